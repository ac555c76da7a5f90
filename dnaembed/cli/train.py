"""`dnaembed train`."""

from __future__ import annotations

import sys

import click

from dnaembed.cli.base import (
    DEVICE,
    PRECISION_CHOICE,
    FiniteRange,
    cli,
    common_options,
    echo_result,
    given,
)


@cli.command()
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Training config (TOML); see configs/.",
)
@click.option(
    "-o",
    "--output",
    "out_dir",
    default="runs/train",
    show_default=True,
    help="Run directory: best.pt, last.pt, metrics.jsonl, validation.png; for a config "
    "with stages, one directory per stage, model.pt and its model card.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="SECTION.KEY=VALUE",
    help="Override a config entry (TOML value), e.g. --set model.channels=[32,64,64].",
)
@click.option("--steps", type=click.IntRange(min=1), help="Override train.steps.")
@click.option(
    "--steps-scale",
    type=FiniteRange(min=0, min_open=True),
    default=1.0,
    help="Multiply every stage's steps, warm-up and validation interval (a short trial "
    "of a whole recipe, e.g. 0.002).",
)
@click.option(
    "--label-workers",
    type=click.IntRange(min=0),
    help="Override train.label_workers: processes that draw the pairs and their exact "
    "labels (0: this process; same batches either way).",
)
@click.option("--batch-size", type=click.IntRange(min=1), help="Override train.batch_size.")
@click.option("--lr", type=FiniteRange(min=0, min_open=True), help="Override train.lr.")
@click.option("--loss", type=click.Choice(["chi2", "poisson", "mse"]), help="Override train.loss.")
@click.option("--device", type=DEVICE, default="auto", show_default=True,
              help="auto (CUDA when present, else CPU), cpu, cuda or cuda:N.")
@click.option(
    "--precision",
    type=PRECISION_CHOICE,
    help="Override train.precision: the forward pass's arithmetic (bfloat16 autocast).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue from OUTPUT/last.pt (a config with stages always continues where it stopped).",
)
@click.option(
    "--init",
    type=click.Path(dir_okay=False),
    help="Override train.init: start from this checkpoint's weights (fine-tuning).",
)
@click.option(
    "--max-seconds",
    type=FiniteRange(min=0, min_open=True),
    help="Stop (and validate) after this much wall time.",
)
@click.option(
    "--comm-hook",
    type=click.Choice(["allreduce", "fp16", "bf16", "powersgd"]),
    help="DDP gradient communication (torchrun runs).",
)
@click.option("--powersgd-rank", type=click.IntRange(min=1), help="PowerSGD matrix rank.")
@click.option(
    "--bucket-cap-mb", type=FiniteRange(min=0, min_open=True), help="DDP bucket size in MB."
)
@click.option(
    "--grad-accum",
    type=click.IntRange(min=1),
    help="Micro-steps per optimizer step (DDP syncs on the last only).",
)
@click.option(
    "--nproc",
    type=click.IntRange(min=1),
    help="Launch this many local ranks (torch's launcher) instead of one process.",
)
@common_options
def train(
    config_path,
    out_dir,
    overrides,
    steps_scale,
    device,
    resume,
    max_seconds,
    nproc,
    seed,
    threads,
    **settings,
) -> None:
    """Train the encoder on pairs drawn from the channel (DDP under torchrun).

    A config with [[stage]] tables (configs/default.toml) runs every stage, each in
    its own directory under OUTPUT, and continues an interrupted run where it stopped.
    """
    from dnaembed.log import set_threads
    from dnaembed.train.ddp.context import is_main_rank, local_share_of_cores
    from dnaembed.train.stages import load_recipe

    # The options named after a config key (--steps: train.steps, --comm-hook:
    # distributed.comm_hook); the loader names the option in its errors.
    flags = {f"{_DISTRIBUTED.get(k, 'train')}.{k}": v for k, v in settings.items()}
    # --seed 0 given is a seed too (it gave way to a config's seed); left out, the config's.
    flags["seed"] = seed if given("seed") else None
    recipe = load_recipe(config_path, list(overrides), flags, steps_scale)
    if nproc and nproc > 1:
        from dnaembed.train.ddp.launch import launch_local

        launch_local(nproc, sys.argv[1:])
        return
    set_threads(threads or local_share_of_cores())
    if recipe.staged:
        _train_stages(recipe, out_dir, device, max_seconds, is_main_rank())
        return
    from dnaembed.train.loop import train as run_training

    result = run_training(recipe.stages[0].config, out_dir, device=device, resume=resume,
                          max_seconds=max_seconds)
    if is_main_rank():
        echo_result(f"{_scores(result.best)}; checkpoints in {out_dir}")


#: Options that set a [distributed] key; the other key-named options set [train] keys.
_DISTRIBUTED = {"comm_hook": "distributed", "powersgd_rank": "distributed",
                "bucket_cap_mb": "distributed", "grad_accum": "distributed"}


def _scores(best: dict) -> str:
    best = {"mae_near": float("nan"), "bias_near": float("nan"), "spearman": float("nan"),
            **best}
    return (f"best val MAE(d<=40) {best['mae_near']:.3f}, bias {best['bias_near']:+.3f}, "
            f"Spearman {best['spearman']:.4f} at step {best.get('step')}")


def _train_stages(recipe, out_dir: str, device: str, max_seconds, main: bool) -> None:
    from dnaembed.train.recipe import train_recipe

    result = train_recipe(recipe, out_dir, device=device, max_seconds=max_seconds)
    if not main:
        return
    n = len(recipe.stages)
    if not result.complete:
        stage = recipe.stages[len(result.stages)]
        echo_result(f"stopped in stage {len(result.stages) + 1} of {n} ({stage.name}); run the "
                    f"same command to continue; stages in {out_dir}")
        return
    echo_result(f"{n} of {n} stages complete; {_scores(result.stages[-1]['best'])} of stage "
                f"{recipe.stages[-1].name}; model {result.model}, card {result.card}")


