"""The ``dnaembed`` command line: a thin layer over the library functions.

Conventions shared by every command: ``-o/--output``, ``--seed``, ``-q/--quiet``,
``-v/--verbose``, ``-t/--threads``; logs and progress on stderr, results in
files or on stdout; exit 0 on success, 1 on an error (one line, no traceback),
2 on a usage error; a closed output pipe (``| head``) ends the command quietly.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from pathlib import Path

import click

from dnaembed import __version__
from dnaembed.errors import DnaembedError
from dnaembed.log import configure

#: Exit status when the reader of our stdout went away (128 + SIGPIPE), as shell tools do.
EXIT_BROKEN_PIPE = 141


def common_options(func):
    """-q/-v/-t/--seed on every command; sets up logging before the command runs."""

    @click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        help="Seed of every random step (same seed, same output).",
    )
    @click.option(
        "-t",
        "--threads",
        type=click.IntRange(min=0),
        default=0,
        help="CPU threads (0 = all available cores).",
    )
    @click.option("-v", "--verbose", count=True, help="More log detail (debug).")
    @click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors; no progress bars.")
    @functools.wraps(func)
    def wrapper(*args, quiet: bool, verbose: int, **kwargs):
        configure(verbosity=verbose, quiet=quiet)
        _state["verbose"] = verbose
        return func(*args, **kwargs)

    return wrapper


_state = {"verbose": 0}


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dnaembed")
def cli() -> None:
    """Cluster DNA-storage sequencing reads with a learned embedding of the edit distance."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: runs the CLI and maps errors to one line and an exit status."""
    try:
        cli.main(args=argv, prog_name="dnaembed", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        print("dnaembed: aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("dnaembed: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except DnaembedError as e:
        if _state["verbose"]:
            traceback.print_exc()
        print(f"dnaembed: error: {e}", file=sys.stderr)
        sys.exit(1)
    except MemoryError:
        print("dnaembed: error: out of memory (try a smaller batch or input)", file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        if _state["verbose"]:
            traceback.print_exc()
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"dnaembed: error: {where}{e.strerror or e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if _state["verbose"]:
            traceback.print_exc()
        print(
            f"dnaembed: internal error: {type(e).__name__}: {e} (rerun with -v for details)",
            file=sys.stderr,
        )
        sys.exit(1)
    # Flush here so that a closed pipe is noticed while we can still handle it.
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(EXIT_BROKEN_PIPE)


def _silence_stdout() -> None:
    # Python would report the failed flush at exit; point stdout at /dev/null first.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def echo_result(text: str) -> None:
    """Results to stdout (logs go to stderr)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _length_range(value: str) -> tuple[int, int]:
    try:
        if "-" in value:
            lo, hi = (int(x) for x in value.split("-", 1))
        else:
            lo = hi = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a length or a range like 140-160") from None
    if lo < 1 or hi < lo:
        raise click.BadParameter(f"{value!r}: need 1 <= min <= max")
    return lo, hi


RATE = click.FloatRange(0.0, 1.0)
FRACTION = click.FloatRange(0.0, 1.0)


# ---------------------------------------------------------------- simulate


@cli.command()
@click.option(
    "-o",
    "--output",
    "prefix",
    default="simulated",
    show_default=True,
    help="Output prefix: PREFIX.fastq.gz, PREFIX.truth.tsv, PREFIX.refs.fasta.",
)
@click.option(
    "--refs",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Strands from this FASTA/FASTQ instead of random ones.",
)
@click.option(
    "--strands",
    "n_strands",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Number of random strands.",
)
@click.option(
    "--length",
    default="150",
    show_default=True,
    help="Random strand length, or a range MIN-MAX (primers not included).",
)
@click.option("--max-homopolymer", type=click.IntRange(min=1), help="Longest run of one base.")
@click.option("--gc-min", type=FRACTION, help="Minimum GC fraction in every GC window.")
@click.option("--gc-max", type=FRACTION, help="Maximum GC fraction in every GC window.")
@click.option("--gc-window", type=click.IntRange(min=2), default=20, show_default=True)
@click.option(
    "--primers",
    "primer_length",
    type=click.IntRange(min=0),
    default=0,
    help="Flank every strand with the same random primer of this length at each end.",
)
@click.option("--primer-5", "primer5", help="Explicit 5' primer (overrides --primers).")
@click.option("--primer-3", "primer3", help="Explicit 3' primer (overrides --primers).")
@click.option(
    "--preset",
    default="nanopore",
    show_default=True,
    help="Channel preset: illumina, illumina-array, nanopore, nanopore-hard.",
)
@click.option("--sub", type=RATE, help="Substitution rate per nt (overrides the preset).")
@click.option("--ins", type=RATE, help="Insertion rate per nt (overrides the preset).")
@click.option("--del", "deletion", type=RATE, help="Deletion rate per nt (overrides the preset).")
@click.option("--burst-rate", type=RATE, help="Rate of multi-base deletions per nt.")
@click.option("--burst-length", type=click.FloatRange(min=2.0), help="Mean burst length (>= 2).")
@click.option(
    "--homopolymer-bias",
    type=click.FloatRange(min=0.0),
    help="Deletion bias in homopolymers (nanopore-like).",
)
@click.option(
    "--coverage",
    "coverage_model",
    default="negbin",
    show_default=True,
    type=click.Choice(["fixed", "poisson", "negbin", "lognormal"]),
)
@click.option(
    "--mean-coverage",
    type=click.FloatRange(min=0.0, min_open=True),
    default=10.0,
    show_default=True,
    help="Mean reads per strand.",
)
@click.option(
    "--dispersion",
    type=click.FloatRange(min=0.0, min_open=True),
    default=5.0,
    show_default=True,
    help="Negative binomial dispersion k (variance m + m^2/k).",
)
@click.option(
    "--sigma",
    type=click.FloatRange(min=0.0),
    default=0.5,
    show_default=True,
    help="Lognormal coverage: sd of the log rate.",
)
@click.option(
    "--dropout",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.0,
    show_default=True,
    help="Fraction of strands with no reads.",
)
@click.option(
    "--reverse-fraction",
    type=FRACTION,
    default=0.0,
    show_default=True,
    help="Fraction of reads returned as reverse complements.",
)
@click.option(
    "--truncate-fraction",
    type=FRACTION,
    default=0.0,
    show_default=True,
    help="Fraction of reads missing their 3' end.",
)
@click.option(
    "--truncate-mean",
    type=click.FloatRange(min=0.0, min_open=True),
    default=30.0,
    show_default=True,
    help="Mean number of missing bases of a truncated read.",
)
@click.option(
    "--contaminants",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.0,
    show_default=True,
    help="Fraction of reads that come from no strand.",
)
@common_options
def simulate(
    prefix: str,
    refs: str | None,
    n_strands: int,
    length: str,
    max_homopolymer,
    gc_min,
    gc_max,
    gc_window,
    primer_length,
    primer5,
    primer3,
    preset,
    sub,
    ins,
    deletion,
    burst_rate,
    burst_length,
    homopolymer_bias,
    coverage_model,
    mean_coverage,
    dispersion,
    sigma,
    dropout,
    reverse_fraction,
    truncate_fraction,
    truncate_mean,
    contaminants,
    seed: int,
    threads: int,
) -> None:
    """Simulate sequencing reads of DNA-storage strands, with the truth.

    Writes PREFIX.fastq.gz (shuffled reads), PREFIX.truth.tsv (read_id, strand_id,
    orientation) and PREFIX.refs.fasta; prints a summary.
    """
    from dnaembed.simulate import SimulationPlan, run_simulation

    plan = SimulationPlan(
        refs=refs,
        n_strands=n_strands,
        length=_length_range(length),
        max_homopolymer=max_homopolymer,
        gc_min=gc_min,
        gc_max=gc_max,
        gc_window=gc_window,
        primer_length=primer_length,
        primer5=primer5,
        primer3=primer3,
        preset=preset,
        overrides=dict(
            substitution=sub,
            insertion=ins,
            deletion=deletion,
            burst_rate=burst_rate,
            burst_mean_length=burst_length,
            homopolymer_bias=homopolymer_bias,
        ),
        coverage=dict(
            model=coverage_model,
            mean=mean_coverage,
            dispersion=dispersion,
            sigma=sigma,
            dropout=dropout,
        ),
        layout=dict(
            reverse_fraction=reverse_fraction,
            truncate_fraction=truncate_fraction,
            truncate_mean=truncate_mean,
            contaminant_fraction=contaminants,
        ),
        seed=seed,
    )
    summary = run_simulation(plan, Path(prefix))
    echo_result(summary)


# ---------------------------------------------------------------- train


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
@click.option("--resume", is_flag=True, help="Continue from OUTPUT/last.pt.")
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
    resume,
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
    from dnaembed.train import load_config
    from dnaembed.train import train as run_training

    flags = {
        "train.steps": steps,
        "train.batch_size": batch_size,
        "train.lr": lr,
        "train.loss": loss,
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
        from dnaembed.launch import launch_local

        launch_local(nproc, sys.argv[1:])
        return
    set_threads(threads or None)
    result = run_training(config, out_dir, device=device, resume=resume, max_seconds=max_seconds)
    best = result.best
    echo_result(
        f"best val MAE(d<=40) {best.get('mae_near', float('nan')):.3f}, bias "
        f"{best.get('bias_near', float('nan')):+.3f}, Spearman {best.get('spearman', float('nan')):.4f} "
        f"at step {best.get('step')}; checkpoints in {out_dir}"
    )


# ---------------------------------------------------------------- demo


@cli.command()
@click.option("-o", "--output", "out_dir", default="dnaembed-demo", show_default=True,
              help="Directory for the demo's files.")
@click.option("--strands", "n_strands", type=click.IntRange(min=1), default=1000,
              show_default=True)
@click.option("--preset", default="nanopore", show_default=True)
@common_options
def demo(out_dir: str, n_strands: int, preset: str, seed: int, threads: int) -> None:
    """The main job on bundled defaults: simulate a run and report on it."""
    from dnaembed.simulate import SimulationPlan, run_simulation

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    plan = SimulationPlan(n_strands=n_strands, preset=preset, seed=seed,
                          coverage={"model": "negbin", "mean": 10.0, "dispersion": 5.0})
    echo_result(run_simulation(plan, Path(out_dir) / "reads"))
