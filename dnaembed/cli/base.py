"""The click group, the entry point and the conventions shared by every command.

Conventions shared by every command: ``-o/--output``, ``--seed``, ``-q/--quiet``,
``-v/--verbose``, ``-t/--threads``; logs and progress on stderr, results in
files or on stdout; exit 0 on success, 1 on an error (one line, no traceback),
2 on a usage error; a closed output pipe (``| head``) ends the command quietly.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback

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

#: The encoder's arithmetic (dnaembed.model.inference.PRECISIONS; not imported, to keep torch out of
#: the CLI's start-up): inference and training take the same choices.
PRECISION_CHOICE = click.Choice(["auto", "float32", "bfloat16"])

#: Options shared by the commands that run the encoder (embed, cluster, run).
model_option = click.option(
    "-m", "--model", "model_path",
    help="Model file, or bundled-full / bundled-candidates (default: bundled-full).",
)
#: The encoder of the commands that cluster (cluster, run): the model of the neighbour search.
search_model_option = click.option(
    "-m", "--model", "--search-model", "model_path",
    help="Encoder of the neighbour search: a model file, bundled-candidates (small and fast; "
    "the exact check decides) or bundled-full (the model of embed). Default: "
    "bundled-candidates for the graph method, bundled-full for kmeans and dbscan.",
)
strand_option = click.option(
    "--strand",
    type=click.Choice(["both", "plus"]),
    default="both",
    show_default=True,
    help="both: a read joins its strand whichever way it was sequenced; plus: reads oriented.",
)


def inference_options(func):
    """--device, --batch-size, --precision: how the encoder runs."""
    func = click.option(
        "--precision",
        type=PRECISION_CHOICE,
        default="auto",
        show_default=True,
        help="Inference arithmetic (auto: bfloat16 where the hardware has it).",
    )(func)
    func = click.option(
        "--batch-size",
        type=click.IntRange(min=1),
        help="Reads per inference batch [default: 256 on CPU, 4096 on CUDA].",
    )(func)
    return click.option(
        "--device", default="auto", show_default=True,
        help="auto (CUDA when available), cpu, cuda.",
    )(func)


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


def check_writable(*paths: str | None) -> None:
    """Fail before the work, not after it, when an output file cannot be written."""
    from pathlib import Path

    for path in paths:
        if path is None or str(path) == "-":
            continue
        where = Path(path)
        if where.is_dir():
            raise DnaembedError(f"{path}: cannot write: is a directory")
        parent = where.parent if str(where.parent) else Path(".")
        if not parent.is_dir():
            raise DnaembedError(f"{path}: cannot write: directory {parent} does not exist")


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


def constrained(estimator: type, name: str) -> click.ParamType:
    """The click type of an estimator's hyper-parameter, from its declared constraints.

    The limits live once, in the estimator's ``_parameter_constraints``
    (:mod:`dnaembed.cluster.params`); an option outside them is a usage error.
    """
    from dnaembed.cluster.params import Interval, Options

    for rule in estimator._parameter_constraints[name]:
        if isinstance(rule, Options):
            return click.Choice(list(rule.values))
        if isinstance(rule, Interval):
            kind = click.IntRange if rule.integer else click.FloatRange
            return kind(min=rule.low, max=rule.high,
                        min_open=rule.closed in ("right", "neither") and rule.low is not None,
                        max_open=rule.closed in ("left", "neither") and rule.high is not None)
    raise ValueError(f"{estimator.__name__}.{name} has no interval or options to check")


RATE = click.FloatRange(0.0, 1.0)
FRACTION = click.FloatRange(0.0, 1.0)
