"""Joining an existing Dask cluster (``--scheduler``): the checks before a run uses it.

A run pointed at a scheduler first makes sure that a Dask scheduler answers there
(:func:`check_answers_as_dask`), then waits for a worker (:func:`wait_for_a_worker`:
dask-jobqueue's workers may still be queued), and refuses workers that cannot run
its tasks (:func:`dnaembed_fault`: no dnaembed, or another version) or warns of
ones whose memory limit is below the budget (:func:`check_worker_memory`). Each
check ends in a one-line error, never a wait for good or a Dask traceback.
:class:`~dnaembed.execute.dask.DaskExecutor` runs them; the watch on workers that
join later (:mod:`.dask_watch`) asks :func:`dnaembed_fault` too.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from dnaembed.errors import DnaembedError
from dnaembed.execute.dask_workers import dnaembed_version
from dnaembed.log import counted

if TYPE_CHECKING:
    from distributed import Client

#: Seconds to wait for a scheduler to answer, and for its first worker.
CONNECT_TIMEOUT = 10


def connect(scheduler: str, memory_limit: int | None) -> Client:
    """A client of the cluster at ``scheduler``, once a worker fit for the run is there;
    ``memory_limit`` (``--memory``): what the tasks are planned for (see
    :func:`check_worker_memory`)."""
    from distributed import Client

    check_answers_as_dask(scheduler)
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as e:
        raise DnaembedError(f"cannot use the Dask scheduler at {scheduler}: {e}") from None
    where = scheduler_name(scheduler)
    try:
        wait_for_a_worker(client, where)
        fault = dnaembed_fault(client, where, None)
        if fault is not None:
            raise DnaembedError(fault)
    except DnaembedError:
        client.close()
        raise
    if memory_limit:
        check_worker_memory(client, where, memory_limit)
    return client


def scheduler_name(scheduler: str) -> str:
    """How the log and the errors name the cluster at ``scheduler``."""
    return f"the Dask scheduler at {scheduler}"


def check_answers_as_dask(scheduler: str) -> None:
    """Raises :class:`DnaembedError` unless a Dask server answers Dask's handshake at
    ``scheduler`` (within :data:`CONNECT_TIMEOUT` to connect, as much again to answer).

    Why: Dask's client waits for the handshake's answer without a limit and takes any
    bytes for its frames: a run pointed at a port that accepts connections and says
    nothing waited for good, and one at an HTTP server (the scheduler's dashboard, 8787)
    failed with "out of memory" (the reply's text read as a frame of exabytes)."""
    from distributed.comm import connect as dask_connect
    from distributed.security import Security

    args = Security().get_connection_args("client")

    async def handshake() -> None:
        comm = await asyncio.wait_for(dask_connect(scheduler, timeout=CONNECT_TIMEOUT, **args),
                                      2 * CONNECT_TIMEOUT)
        await comm.close()

    hint = ("is it the scheduler's port (8786 by default), not another service's, such as "
            "the dashboard's (8787)?")
    try:
        asyncio.run(handshake())
    except TimeoutError:
        raise DnaembedError(f"--scheduler {scheduler}: no Dask answer within "
                            f"{2 * CONNECT_TIMEOUT} s of connecting: {hint}") from None
    except OSError as e:  # refused, unreachable, or closed by the other end
        raise DnaembedError(f"cannot use the Dask scheduler at {scheduler}: {e}") from None
    except Exception as e:  # noqa: BLE001 - whatever Dask makes of another protocol
        raise DnaembedError(f"--scheduler {scheduler}: its answer is not Dask's "
                            f"({type(e).__name__}): {hint}") from None


def wait_for_a_worker(client: Client, where: str) -> None:
    """Waits, saying so, until the cluster of ``client`` has a worker.

    Why not fail: workers that dask-jobqueue submits wait in the batch queue, and may
    join minutes after their scheduler started (a run stopped after 10 s with Dask's
    "Only 0/1 workers arrived after 10"). A run with none waits as it would mid-run
    (:class:`~dnaembed.execute.dask_watch.WorkerWatch`), until Ctrl-C or SIGTERM."""
    from dnaembed.log import logger

    if client.nthreads():
        return
    logger.warning("%s has no workers yet: the run waits until one joins", where)
    lost = DnaembedError(f"lost the connection to {where}: the scheduler stopped or "
                         "cannot be reached")
    try:
        while not client.nthreads():
            if client.status != "running":
                raise lost
            with contextlib.suppress(TimeoutError):  # still none
                client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
    except OSError:  # the scheduler is gone (Dask's closed connections)
        raise lost from None
    logger.info("%s has %s", where, counted(len(client.nthreads()), "worker"))


def dnaembed_fault(client: Client, where: str, workers: list[str] | None) -> str | None:
    """Why the first of ``workers`` (None: all) that cannot run the tasks, without
    dnaembed or with another version, is refused; None where each can. A worker gone
    before it answered is not asked.

    Why: the tasks are dnaembed's functions, and a worker without it failed the first
    one with an internal error (ModuleNotFoundError from Dask's unpickling); another
    version may compute other bytes."""
    from dnaembed import __version__

    try:
        versions = client.run(dnaembed_version, workers=workers, on_error="return")
    except Exception:  # noqa: BLE001 - a worker that left as it was asked
        return None
    for worker, version in sorted(versions.items()):
        if isinstance(version, OSError):  # it left, or is leaving, as it was asked
            continue
        if version != __version__:
            found = (f"cannot import dnaembed ({version})"
                     if isinstance(version, Exception) else f"has dnaembed {version}")
            return (f"{where}: worker {worker} {found}; install dnaembed "
                    f"{__version__}, the version here, on every worker")
    return None


def check_worker_memory(client: Client, where: str, budget: int) -> None:
    """Warns when a worker of the cluster has a memory limit below ``budget``
    (``--memory``, what the tasks are planned for): Dask pauses a worker at 80% of its
    limit and restarts it at 95%."""
    from dnaembed.log import logger

    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    below = [limit for limit in limits if 0 < limit < budget]
    if not below:
        return
    whose = ("its worker has a memory limit of" if len(limits) == 1 else
             f"{len(below)} of its {len(limits)} workers have memory limits down to")
    logger.warning("%s: %s %s MiB, below --memory (%s MiB): the tasks may pause or restart "
                   "them (start the workers with a --memory-limit of at least --memory, or "
                   "give a smaller --memory)", where, whose,
                   f"{min(below) / 2**20:,.0f}", f"{budget / 2**20:,.0f}")
