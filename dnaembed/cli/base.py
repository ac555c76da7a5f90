"""The click group, the entry point and the conventions shared by every command.

Conventions shared by every command: ``-o/--output``, ``--seed``, ``-q/--quiet``,
``-v/--verbose``, ``-t/--threads``, ``--log FILE``; logs and progress on stderr,
results in files or on stdout; exit 0 on success, 1 on an error (one line, no
traceback), 2 on a usage error; a closed output pipe (``| head``) ends the
command quietly with status 141, as shell tools do. Ctrl-C (130) and SIGTERM (143: a job
scheduler's cancel, ``timeout``, ``kill``) end it with one line, after the clean-up an
error gets: no output, temporary files removed, worker processes stopped. Every
command's help ends with examples (:mod:`.examples`).
"""

from __future__ import annotations

import functools
import math
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from dnaembed import __version__
from dnaembed.errors import DnaembedError, UsageError
from dnaembed.io.atomic import StdoutError
from dnaembed.log import close_log, configure, note_in_log_file, refuse_foreign_log
from dnaembed.stops import Terminated, forget, on_sigint, on_sigterm

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

#: Exit status when the reader of our stdout went away (128 + SIGPIPE), as shell tools do.
EXIT_BROKEN_PIPE = 141


#: Exit status when stopped by SIGTERM (128 + SIGTERM), as a shell reports it.
EXIT_TERMINATED = 143


class ClosedPipe(Exception):
    """Our standard output was closed by its reader (not an OSError: click would catch it)."""


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """-q/-v/-t/--seed/--log on every command; sets up logging before the command runs."""

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
    @click.option("--log", "log_file", type=click.Path(dir_okay=False),
                  help="Also write the log to this file (with a progress line every 30 s).")
    @functools.wraps(func)
    def wrapper(*args, quiet: bool, verbose: int, log_file: str | None, **kwargs):
        from dnaembed.io.atomic import check_distinct, set_log_file

        _refuse_empty_paths({**kwargs, "log_file": log_file})
        if log_file == "-":
            # It wrote a file named '-' (what '-' names elsewhere is standard output, which
            # holds results and never the log).
            from dnaembed.errors import UsageError

            raise UsageError("--log -: the log goes to standard error already; --log takes a "
                             "file (standard output holds the results)")
        if log_file is not None:
            inputs, outputs = _path_arguments(kwargs)
            check_distinct(inputs, {**outputs, "--log": log_file})
            refuse_foreign_log(log_file)
            _make_log_directory(log_file, kwargs)
        set_log_file(log_file)  # nor any output the command's OutputSet holds
        configure(verbosity=verbose, quiet=quiet, log_file=log_file)
        _state["verbose"] = verbose
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            raise ClosedPipe() from None
        except BaseException as e:
            ending = _ending_line(e)
            if ending is not None:
                note_in_log_file(ending)
            raise
        finally:
            set_log_file(None)
            close_log()

    return wrapper


#: The commands' options that name what they write (the rest of their paths are read).
OUTPUT_OPTIONS = frozenset({"output", "out_dir", "centers", "report", "json_path", "plot_dir"})
#: Those of them that name a directory the command creates.
OUTPUT_DIRECTORIES = frozenset({"out_dir", "plot_dir"})


def _make_log_directory(log_file: str, kwargs: dict) -> None:
    """Creates the ``--log`` file's directory where it is one the command would create
    (``run -o OUT --log OUT/run.log``, OUT new): the log opens before the command's
    outputs, and failed with "No such file or directory". Left when the command fails,
    with the log in it; any other missing directory stays an error."""
    parent = os.path.abspath(os.path.dirname(log_file) or ".")
    if os.path.exists(parent):
        return
    created = {os.path.abspath(kwargs[name]) for name in OUTPUT_DIRECTORIES
               if kwargs.get(name) not in (None, "-")}
    if parent in created:
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise DnaembedError(f"{parent}: cannot create directory: {e.strerror or e}") from None


def _refuse_empty_paths(kwargs: dict) -> None:
    """An empty path (an unset shell variable: ``-o "$OUT"``) is a usage error. ``run``
    and ``report`` wrote into the current directory, ``embed`` failed with an internal
    error, and an empty READS was "is a directory"."""
    from dnaembed.errors import UsageError

    ctx = click.get_current_context(silent=True)
    for p in ctx.command.params if ctx is not None else []:
        value = kwargs.get(p.name)
        if isinstance(p.type, click.Path) and "" in (
                value if isinstance(value, tuple | list) else [value]):
            name = p.human_readable_name if isinstance(p, click.Argument) else "/".join(p.opts)
            raise UsageError(f"{name}: an empty path (an unset shell variable?)")


def _path_arguments(kwargs: dict) -> tuple[dict[str, object], dict[str, object]]:
    """The command's files, by option name, for the --log check: those it reads, and those
    it writes (so that a --log on one is called an output, not "the input -o/--output")."""
    from dnaembed.io.atomic import named_inputs

    ctx = click.get_current_context(silent=True)
    inputs: dict[str, object] = {}
    outputs: dict[str, object] = {}
    for p in ctx.command.params if ctx is not None else []:
        if isinstance(p.type, click.Path) and kwargs.get(p.name) is not None:
            name = p.human_readable_name if isinstance(p, click.Argument) else "/".join(p.opts)
            value = kwargs[p.name]
            # An argument of several files (cluster and run take nargs=-1 READS).
            paths = named_inputs(name, value if isinstance(value, tuple | list) else [value])
            (outputs if p.name in OUTPUT_OPTIONS else inputs).update(paths)
    return inputs, outputs


_state = {"verbose": 0}

#: The encoder's arithmetic (dnaembed.model.inference.PRECISIONS; not imported, to keep torch out of
#: the CLI's start-up): inference and training take the same choices.
PRECISION_CHOICE = click.Choice(["auto", "float32", "bfloat16"])


class DeviceType(click.ParamType):
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``; anything else is a usage error."""

    name = "auto|cpu|cuda|cuda:N"
    choices = ("auto", "cpu", "cuda", "cuda:N")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> str:
        """``value`` as a device name; anything else fails as a usage error."""
        text = str(value)
        if text in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", text):
            return text
        self.fail(f"unknown device {text!r} (choose from {', '.join(self.choices)})", param, ctx)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str
                       ) -> list[CompletionItem]:
        """The device names that start with ``incomplete``."""
        from click.shell_completion import CompletionItem

        return [CompletionItem(c) for c in ("auto", "cpu", "cuda") if c.startswith(incomplete)]


DEVICE = DeviceType()


def bundled_model_names() -> list[str]:
    """Names of the models shipped in the package (``default``, ...), without importing torch."""
    from importlib import resources

    folder = resources.files("dnaembed.model") / "bundled"
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".pt"))


class ModelType(click.ParamType):
    """A bundled model's name, or a model file."""

    name = "NAME|FILE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> str:
        """``value`` as it was given, a name or a path (checked when the model loads)."""
        # A bundled model's name stays a name: load_model resolves it, and the tables'
        # provenance line records it.
        return str(value)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str
                       ) -> list[CompletionItem]:
        """The bundled models' names that start with ``incomplete``, then files."""
        from click.shell_completion import CompletionItem

        names = [CompletionItem(n) for n in bundled_model_names() if n.startswith(incomplete)]
        return names + [CompletionItem(incomplete, type="file")]


#: The encoder of ``embed``.
model_option = click.option(
    "-m", "--model", "model_path", type=ModelType(),
    help=f"A bundled model ({', '.join(bundled_model_names())}) or a model file "
    "[default: default].",
)
#: The encoder of the neighbour search (cluster, run): the exact check decides for graph.
search_model_option = click.option(
    "-m", "--model", "model_path", type=ModelType(),
    help=f"Encoder of the neighbour search: a bundled model ({', '.join(bundled_model_names())}) "
    "or a model file [default: candidates for the graph method (small and fast; the exact "
    "check decides), default for kmeans and dbscan (they decide on the vectors)].",
)
strand_option = click.option(
    "--strand",
    type=click.Choice(["both", "plus"]),
    default="both",
    show_default=True,
    help="both: a read joins its strand whichever way it was sequenced; plus: reads oriented.",
)


def json_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--json [FILE]``: a machine-readable summary (no value or ``-``: standard output)."""
    return click.option(
        "--json", "json_path", is_flag=False, flag_value="-", default=None,
        type=click.Path(dir_okay=False, allow_dash=True), metavar="[FILE]",
        help=f"Write {what} as one JSON object to FILE (no FILE or -: standard output).",
    )


plot_option = click.option(
    "--plot", "plot_dir", type=click.Path(file_okay=False),
    help="Also draw PNG plots into this directory (needs matplotlib: pip install "
    "'dnaembed[plot]').",
)


def inference_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--device, --batch-size, --precision: how the encoder runs."""
    func = click.option(
        "--precision",
        type=PRECISION_CHOICE,
        default="auto",
        show_default=True,
        help="Inference arithmetic (auto: bfloat16 where the hardware has it and the "
        "instruction set is not capped below it).",
    )(func)
    func = click.option(
        "--batch-size",
        type=click.IntRange(min=1),
        help="Reads per inference batch [default: 256 on CPU, 4096 on CUDA].",
    )(func)
    return click.option(
        "--device", type=DEVICE, default="auto", show_default=True,
        help="auto (CUDA when available), cpu, cuda or cuda:N.",
    )(func)


class Group(click.Group):
    """The ``dnaembed`` group: every command's help ends with its examples."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Adds ``cmd``, its help ending with its examples (:func:`.examples.epilog`)."""
        from dnaembed.cli.examples import epilog

        if cmd.epilog is None:
            cmd.epilog = epilog(name or cmd.name)
        super().add_command(cmd, name)


@click.group(cls=Group, epilog=None,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dnaembed")
def cli() -> None:
    """Cluster DNA-storage sequencing reads with a learned embedding of the edit distance."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: runs the CLI and maps errors to one line and an exit status."""
    if threading.current_thread() is not threading.main_thread():
        _run(argv)  # signals reach the main thread only: its handlers stay
        return
    forget()
    before = signal.signal(signal.SIGTERM, on_sigterm)
    # Ctrl-C is noted too (dnaembed.stops), unless it is ignored (a job started with &).
    interrupt = signal.getsignal(signal.SIGINT)
    if interrupt is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        _run(argv)
    finally:
        signal.signal(signal.SIGTERM, before)
        if interrupt is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupt)


def _run(argv: list[str] | None) -> None:
    """:func:`main` within its signal handling."""
    try:
        code = cli.main(args=argv, prog_name="dnaembed", standalone_mode=False)
    except Terminated:
        print("dnaembed: terminated", file=sys.stderr)
        sys.exit(EXIT_TERMINATED)
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
    except (BrokenPipeError, ClosedPipe):
        _silence_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except Exception as e:  # noqa: BLE001 - one line, not a traceback
        sys.exit(_report(e))
    # Flush here so that a closed pipe is noticed while we can still handle it.
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except OSError as e:  # a full disk under a redirection: "> /dev/full"
        sys.exit(_report(StdoutError(e.errno, e.strerror)))
    if isinstance(code, int) and code:
        sys.exit(code)


def _report(e: Exception) -> int:
    """Print the one-line message of an error; its exit status. With ``-v``, an internal
    error's traceback first: a foreseen error (bad input, a usage error, a full disk) is
    its one line, with ``-v`` too (a bad input's 30 lines of traceback buried it)."""
    foreseen = isinstance(e, (DnaembedError, StdoutError, OSError, MemoryError))
    if _state["verbose"] and not foreseen:
        traceback.print_exc()
    if isinstance(e, StdoutError):
        _silence_stdout()  # else Python reports its failed flush again at exit
    message, code = _error_message(e)
    print(f"dnaembed: {message}", file=sys.stderr)
    return code


def _error_message(e: Exception) -> tuple[str, int]:
    """The one-line message of an error (after ``dnaembed: ``), and its exit status."""
    if isinstance(e, UsageError):
        return f"error: {e}", 2
    if isinstance(e, DnaembedError):
        return f"error: {e}", 1
    if isinstance(e, MemoryError):
        return "error: out of memory (try a smaller batch or input)", 1
    if isinstance(e, StdoutError):
        return f"error: standard output: cannot write: {e.strerror or e}", 1
    if isinstance(e, OSError):
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        return f"error: {where}{e.strerror or e}", 1
    return f"internal error: {type(e).__name__}: {e} (rerun with -v for details)", 1


def _ending_line(e: BaseException) -> str | None:
    """What a command stopped by ``e`` ends its ``--log`` file with (as standard error
    ends; None where the command's end is not a failure)."""
    if isinstance(e, Terminated):
        return "terminated"
    if isinstance(e, click.exceptions.Abort):
        return "aborted"
    if isinstance(e, KeyboardInterrupt):
        return "interrupted"
    if isinstance(e, (click.exceptions.Exit, BrokenPipeError, ClosedPipe)):
        return None
    if isinstance(e, click.ClickException):
        return f"error: {e.format_message()}"
    return _error_message(e)[0] if isinstance(e, Exception) else None


def _silence_stdout() -> None:
    # Python would report the failed flush at exit; point stdout at /dev/null first.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def echo_result(text: str) -> None:
    """Results to stdout (logs go to stderr)."""
    from dnaembed.io.atomic import writing_stdout

    with writing_stdout() as out:
        out.write(text if text.endswith("\n") else text + "\n")


def write_json(path: str, data: dict) -> None:
    """One JSON object to ``path`` (atomic, compressed by name) or to stdout for ``-``."""
    import json

    from dnaembed.io.atomic import open_output
    from dnaembed.report.summary import plain

    text = json.dumps(plain(data), indent=1 if str(path) != "-" else None)
    with open_output(path) as out:
        out.write(text + "\n")


def given(name: str) -> bool:
    """Whether the running command's parameter ``name`` was given (on the command line or
    in the environment), not left at its default: ``--strands 1000`` is given."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, click.core.ParameterSource.DEFAULT,
                          click.core.ParameterSource.DEFAULT_MAP)


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
            kind = click.IntRange if rule.integer else FiniteRange
            return kind(min=rule.low, max=rule.high,
                        min_open=rule.closed in ("right", "neither") and rule.low is not None,
                        max_open=rule.closed in ("left", "neither") and rule.high is not None)
    raise ValueError(f"{estimator.__name__}.{name} has no interval or options to check")


class FiniteRange(click.FloatRange):
    """A float range that refuses nan and infinity: click's lets nan through every bound and
    infinity past an open one (``simulate --mean-coverage inf`` ended in an internal error,
    ``--homopolymer-bias inf`` in reads without substitutions)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> float:
        """``value`` as a float in the range; nan and infinity fail as usage errors."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


RATE = FiniteRange(0.0, 1.0)
FRACTION = FiniteRange(0.0, 1.0)
