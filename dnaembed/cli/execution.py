"""Options that say where and within what the work runs: --workers, --scheduler, --memory, --tmpdir.

Shared by ``cluster`` and ``run``. Without --workers or --scheduler the tasks
run in this process, on --threads threads; --workers N starts a Dask
LocalCluster of N worker processes on this machine (the threads split between
them); --scheduler tcp://HOST:PORT uses a running Dask cluster. --memory is
the budget of every process (this one and each worker).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from dnaembed.execute.dask import DaskExecutor
    from dnaembed.execute.inline import InlineExecutor

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from '2G', '500M', '1.5GiB', '2GB', '1000000' (powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (like 2G, 500M or 1.5GB)")
    value, unit = float(match.group(1)), match.group(2).lower()
    return int(value * _UNITS[unit])


class ByteSize(click.ParamType):
    """A memory size on the command line."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> int:
        """Bytes in ``value`` (:func:`parse_size`); not a size, or not positive, fails."""
        if isinstance(value, int):
            return value
        try:
            size = parse_size(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)
        if size <= 0:
            self.fail(f"{value!r}: the size must be positive", param, ctx)
        return size


def scheduler_address(ctx: click.Context, param: click.Parameter, value: str | None
                      ) -> str | None:
    """--scheduler, checked as Dask parses it: a wrong address was an internal error."""
    if value is None:
        return None
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    try:
        scheme, location = parse_address(value, strict=False)
        get_backend(scheme)
        if scheme == "inproc":
            raise ValueError("an in-process address reaches no other process")
        _, port = parse_host_port(location)
        if not 0 < int(port) < 65536:  # Dask's parser takes any number
            raise ValueError(f"port {port} is not 1-65535")
    except ValueError as e:
        raise click.BadParameter(f"{value!r} is not a scheduler's address, like "
                                 f"tcp://HOST:8786 ({e})", ctx, param) from None
    return value


def execution_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--workers, --scheduler, --memory, --tmpdir."""
    func = click.option(
        "--tmpdir", type=click.Path(exists=True, file_okay=False),
        help="Where data that does not fit in --memory goes (default: the system's temporary "
        "directory); removed at the end.",
    )(func)
    func = click.option(
        "--memory", type=ByteSize(),
        help="Memory budget of every process (this one and each worker), like 2G: the work is "
        "split to fit and the log says how.",
    )(func)
    func = click.option(
        "--scheduler", metavar="ADDRESS", callback=scheduler_address,
        help="Run the tasks on this Dask cluster (tcp://HOST:PORT, started with `dask "
        "scheduler` and `dask worker`); workers need no access to the input.",
    )(func)
    return click.option(
        "--workers", type=click.IntRange(min=1),
        help="Run the tasks on a Dask LocalCluster of this many worker processes here (the "
        "--threads split between them, at least one each: with --threads given, no more "
        "workers than threads).",
    )(func)


def open_executor(workers: int | None, scheduler: str | None, threads: int,
                  memory: int | None, params: dict | None = None
                  ) -> InlineExecutor | DaskExecutor:
    """The executor these options ask for (a context manager); ``params``: the work's
    (partition size and the like), that a budget too small for a LocalCluster's tasks is
    refused before the cluster starts."""
    from dnaembed.cluster.budget import refuse_unfit
    from dnaembed.log import available_cores

    if workers is not None and scheduler is not None:
        raise click.UsageError("--workers and --scheduler exclude each other")
    if scheduler is not None:
        from dnaembed.execute.dask import DaskExecutor

        return DaskExecutor(scheduler=scheduler, memory_limit=memory)
    if workers is not None:
        from dnaembed.execute.dask import DaskExecutor

        if 0 < threads < workers:  # each worker runs a thread: more than were asked for
            raise click.UsageError(f"--workers {workers} is more than --threads {threads}: "
                                   "each worker process runs one thread at least (give "
                                   "fewer workers, or as many threads)")
        total = threads if threads > 0 else available_cores()
        per_worker = max(1, total // workers)
        refuse_unfit(memory, per_worker, params)
        return DaskExecutor(workers=workers, threads_per_worker=per_worker,
                            memory_limit=memory)
    from dnaembed.execute.inline import InlineExecutor

    return InlineExecutor(threads)
