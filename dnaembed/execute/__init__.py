"""How work runs: in this process, in local worker processes, or on Dask."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol


class Runner(Protocol):
    """What the stages ask of the executor they hand tasks to
    (:class:`~dnaembed.execute.inline.InlineExecutor`,
    :class:`~dnaembed.execute.dask.DaskExecutor`): ``workers``, the threads that run tasks
    in all, and :meth:`map`. For annotations only: a stage reads anything else (such as
    ``shares_interpreter``) with ``getattr`` and a default."""

    workers: int

    def map(self, fn: Callable, tasks: Iterable, *, shared: Any = None, desc: str = "tasks",
            unit: str = "task") -> Iterator:
        """``fn(shared, task)`` (or ``fn(task)`` without ``shared``) for each task, in order."""
        ...


def runs_here(runner: Runner | None) -> bool:
    """Whether ``runner``'s tasks would run on this interpreter's threads (None: no runner,
    everything here). Work that holds the interpreter lock gains nothing from such tasks, so
    it is done here in one pass instead: the same result, without packing it into tasks."""
    return runner is None or bool(getattr(runner, "shares_interpreter", False))
