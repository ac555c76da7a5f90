"""What runs on a Dask cluster's workers besides the tasks: the worker plugins, and the
calls that reach objects shared with every task.

:mod:`dnaembed.execute.dask` registers the plugins; Dask gives them to every worker,
those that join or restart later too.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import WorkerPlugin

from dnaembed.execute.traffic import timed_call

if TYPE_CHECKING:
    from distributed import Worker

#: Objects shared by every task on this worker, by name (filled by :class:`SharedObject`).
_SHARED: dict[str, Any] = {}


class SharedObject(WorkerPlugin):
    """A worker plugin that gives every worker (now or later) one object, unpickled once."""

    def __init__(self, name: str, payload: bytes) -> None:
        self.name = name
        self.payload = payload

    def setup(self, worker: Worker) -> None:
        """Unpickles the object on ``worker``, where the tasks find it by name."""
        from dnaembed.log import freeze_long_lived

        _SHARED[self.name] = pickle.loads(self.payload)
        freeze_long_lived()  # torch's modules and the first model stay to the worker's end

    def teardown(self, worker: Worker) -> None:
        """Drops the object from ``worker``."""
        _SHARED.pop(self.name, None)


class AllocatorSettings(WorkerPlugin):
    """Gives each worker glibc's own limits back, in place of those its nanny set.

    Dask's nanny starts a worker with ``MALLOC_TRIM_THRESHOLD_=65536``. Setting it also
    fixes glibc's mmap threshold at 128 KiB, which glibc otherwise raises as it sees
    large blocks freed: every activation of the encoder is then a fresh mapping whose
    pages fault on first touch. Embedding 16,384 reads took 1.9 s in a worker against
    0.6 s in the client; with these limits, 0.6-0.7 s. 32 MiB is the ceiling of glibc's
    own dynamic mmap threshold on 64-bit systems, and 64 MiB twice it, as glibc keeps it.
    """

    name = "dnaembed-allocator"

    def setup(self, worker: Worker) -> None:
        """Sets glibc's allocator thresholds on ``worker``."""
        from dnaembed.allocator import set_allocator_thresholds

        set_allocator_thresholds(32 << 20, 64 << 20)


class StoppedByClient(WorkerPlugin):
    """A LocalCluster's worker, which its client stops: it ignores SIGINT and SIGTERM and
    does not warn of the tasks that the stop cancels.

    Why: Ctrl-C in a terminal reaches every process of the foreground group, the workers
    that a LocalCluster spawned too, and each printed a KeyboardInterrupt traceback beside
    the client's one-line "aborted" as it died; SIGTERM sent to the whole group (a batch
    system's cancel, ``kill -- -PGID``) killed the workers under the client, whose
    scheduler and nannies logged broadcast errors and "Restarting worker" before its
    "terminated" (the nanny stops its worker through a queue, then SIGKILL, and a worker
    whose client dies exits with it: neither needs SIGTERM; a worker past 95% of its
    memory, which the nanny sends SIGTERM, gets SIGKILL at its next memory check, 0.5 s
    later); and closing the cluster
    under running tasks had each worker log Dask's "Async instruction for <Task
    cancelled ...> ended with CancelledError". The client, interrupted or terminated,
    closes the cluster, which stops the workers. Workers of a cluster of your own keep
    their signals and their log.
    """

    name = "dnaembed-stopped-by-client"

    def setup(self, worker: Worker) -> None:
        """Has ``worker`` ignore SIGINT and SIGTERM, and drop Dask's warnings of
        cancelled tasks."""
        import signal

        with contextlib.suppress(ValueError):  # signals are set from the main thread only
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        state_log = logging.getLogger("distributed.worker.state_machine")
        if _not_cancelled_instruction not in state_log.filters:
            state_log.addFilter(_not_cancelled_instruction)


def _not_cancelled_instruction(record: logging.LogRecord) -> bool:
    """False for Dask's warning on a worker's task cancelled as its cluster closes."""
    return not str(record.msg).endswith("ended with CancelledError")


class ImportsAhead(WorkerPlugin):
    """Has each worker (now or later) import what the tasks use, torch with the model's
    modules and faiss, on a thread of its own as it joins: its tasks wait for what is not
    imported yet, its event loop does not.

    Why: a fresh worker imported torch only when the model reached it (~1.4 s), while the
    client waited for the first task; imported meanwhile, the import overlaps the client's
    reading of the input.
    """

    name = "dnaembed-imports"

    def setup(self, worker: Worker) -> None:
        """Starts the imports on a thread of ``worker``'s own."""
        import threading

        threading.Thread(target=_import_task_modules, name=self.name, daemon=True).start()


def _import_task_modules() -> None:
    """On a worker: what :class:`ImportsAhead` imports."""
    import dnaembed.cluster.partition_tasks  # noqa: F401
    import dnaembed.model.inference  # noqa: F401
    from dnaembed.cluster.search import faiss_module

    faiss_module()


def dnaembed_version() -> str:
    """On a worker: dnaembed's version there (one without dnaembed fails to unpickle this)."""
    from dnaembed import __version__

    return __version__


def call_shared(fn: Callable, name: str, task: Any) -> Any:
    """On a worker: ``fn(shared object, task)``, and its CPU time (:func:`timed_call`)."""
    return timed_call(fn, _SHARED[name], task)
