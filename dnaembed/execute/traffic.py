"""What tasks carry: bytes of the arrays in them, counted as they go out and come back;
and what they cost: the CPU time of each task, measured where it runs (every task runs
on one thread, so its thread's CPU time is its own).

The partitioned pipeline's tasks and results are dataclasses of numpy arrays
(:mod:`dnaembed.cluster.partition_tasks`); their arrays are what a Dask
client sends to its workers and gets back (pickling adds a few hundred bytes
per task). The executors count them, so the log (and docs/scaling.md) can say
how many bytes per read a run moves between client and workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from dnaembed.log import counted


def payload_bytes(obj: object, _depth: int = 0) -> int:
    """Bytes of the numpy arrays in ``obj`` (a dataclass, tuple, list or array), recursively."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if _depth > 4:
        return 0
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(payload_bytes(getattr(obj, f.name), _depth + 1)
                   for f in dataclasses.fields(obj))
    if isinstance(obj, tuple | list):
        return sum(payload_bytes(x, _depth + 1) for x in obj)
    return 0


@dataclasses.dataclass
class Traffic:
    """Bytes sent to tasks and received from them, the number of tasks, and the tasks' CPU
    seconds by kind (the ``desc`` of :meth:`map`: "searching partitions", "linking", ...)."""

    sent: int = 0
    received: int = 0
    tasks: int = 0
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)

    def add_cpu(self, kind: str, seconds: float) -> None:
        """Adds ``seconds`` of task CPU time to ``kind``'s."""
        self.cpu[kind] = self.cpu.get(kind, 0.0) + seconds

    def describe_cpu(self) -> str:
        """The tasks' CPU seconds by kind, for the log ("linking 12.3s, ...")."""
        return ", ".join(f"{kind} {seconds:.1f}s" for kind, seconds in self.cpu.items())

    def describe(self) -> str:
        """The tasks and the megabytes of arrays sent and received, for the log."""
        return (f"{counted(self.tasks, 'task')}: {self.sent / 2**20:,.1f} MB of arrays to the "
                f"workers, {self.received / 2**20:,.1f} MB back")


def timed_call(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``(fn(*args), CPU seconds of this thread meanwhile)``: how a runner measures a task."""
    import time

    started = time.thread_time()
    result = fn(*args)
    return result, time.thread_time() - started
