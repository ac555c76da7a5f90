"""`dnaembed train`."""

from __future__ import annotations

import json
import sys

import click

from dnaembed.cli.base import PRECISION_CHOICE, cli, common_options, echo_result


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
    help="Run directory: best.pt, last.pt, metrics.jsonl, validation.png.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="SECTION.KEY=VALUE",
    help="Override a config entry (TOML value), e.g. --set model.channels=[32,64,64].",
)
@click.option("--steps", type=click.IntRange(min=1), help="Override train.steps.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Override train.batch_size.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), help="Override train.lr.")
@click.option("--loss", type=click.Choice(["chi2", "poisson", "mse"]), help="Override train.loss.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda.")
@click.option(
    "--precision",
    type=PRECISION_CHOICE,
    help="Override train.precision: the forward pass's arithmetic (bfloat16 autocast).",
)
@click.option("--resume", is_flag=True, help="Continue from OUTPUT/last.pt.")
@click.option(
    "--init",
    type=click.Path(dir_okay=False),
    help="Override train.init: start from this checkpoint's weights (fine-tuning).",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(min=0, min_open=True),
    help="Stop (and validate) after this much wall time.",
)
@click.option(
    "--comm-hook",
    type=click.Choice(["allreduce", "fp16", "bf16", "powersgd"]),
    help="DDP gradient communication (torchrun runs).",
)
@click.option("--powersgd-rank", type=click.IntRange(min=1), help="PowerSGD matrix rank.")
@click.option(
    "--bucket-cap-mb", type=click.FloatRange(min=0, min_open=True), help="DDP bucket size in MB."
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
    steps,
    batch_size,
    lr,
    loss,
    device,
    precision,
    resume,
    init,
    max_seconds,
    comm_hook,
    powersgd_rank,
    bucket_cap_mb,
    grad_accum,
    nproc,
    seed,
    threads,
) -> None:
    """Train the encoder on pairs drawn from the channel (DDP under torchrun)."""
    from dnaembed.log import set_threads
    from dnaembed.train.config import load_config
    from dnaembed.train.ddp.context import is_main_rank, local_share_of_cores
    from dnaembed.train.loop import train as run_training

    flags = {
        "train.steps": steps,
        "train.batch_size": batch_size,
        "train.lr": lr,
        "train.loss": loss,
        "train.precision": precision,
        "train.init": init,
        "distributed.comm_hook": comm_hook,
        "distributed.powersgd_rank": powersgd_rank,
        "distributed.bucket_cap_mb": bucket_cap_mb,
        "distributed.grad_accum": grad_accum,
    }
    items = list(overrides)
    items += [f"{k}={json.dumps(v)}" for k, v in flags.items() if v is not None]
    if seed:
        items.append(f"seed={seed}")
    config = load_config(config_path, items)
    if nproc and nproc > 1:
        from dnaembed.train.ddp.launch import launch_local

        launch_local(nproc, sys.argv[1:])
        return
    set_threads(threads or local_share_of_cores())
    result = run_training(config, out_dir, device=device, resume=resume, max_seconds=max_seconds)
    if not is_main_rank():
        return
    best = {"mae_near": float("nan"), "bias_near": float("nan"), "spearman": float("nan"),
            **result.best}
    echo_result(
        f"best val MAE(d<=40) {best['mae_near']:.3f}, bias {best['bias_near']:+.3f}, "
        f"Spearman {best['spearman']:.4f} at step {best.get('step')}; checkpoints in {out_dir}"
    )


