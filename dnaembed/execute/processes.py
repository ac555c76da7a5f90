"""Run independent tasks in local worker processes, results in task order.

Stage-free: a stage hands :func:`map_in_processes` a picklable function and
plain-data tasks and gets plain data back, so the algorithm never knows how
(or where) it was run. One process, or one task, runs here without a pool.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from dnaembed.log import available_cores, progress_bar

T = TypeVar("T")
R = TypeVar("R")


def start_method() -> str:
    """``fork`` where it is safe, else ``spawn``.

    Fork is fast and works from scripts without a ``__main__`` guard; but once
    torch or faiss is loaded their thread pools would be broken in a forked
    child, so then (or where fork does not exist) workers are spawned.
    """
    risky = any(name in sys.modules for name in ("torch", "faiss"))
    if risky or "fork" not in multiprocessing.get_all_start_methods():
        return "spawn"
    return "fork"


def map_in_processes(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    *,
    processes: int = 1,
    weights: Sequence[int] | None = None,
    desc: str = "tasks",
    unit: str = "task",
) -> list[R]:
    """``[fn(task) for task in tasks]``, run in up to ``processes`` worker processes.

    ``processes`` <= 0 means every available core; with one process, or at
    most one task, everything runs in this process. ``fn`` and the tasks must
    pickle (a module-level function and plain data). Results come in the order
    of ``tasks``. The progress bar (stderr) advances by each finished task's
    weight (``weights``, default 1 each), counted in ``unit``. An exception
    raised by a task reaches the caller as itself; the tasks not yet started
    are then cancelled.
    """
    if processes <= 0:
        processes = available_cores()
    if weights is None:
        weights = [1] * len(tasks)
    elif len(weights) != len(tasks):
        raise ValueError(f"{len(weights)} weights for {len(tasks)} tasks: need one per task")
    bar = progress_bar(total=sum(weights), unit=unit, desc=desc)
    try:
        if processes == 1 or len(tasks) <= 1:
            results = []
            for task, weight in zip(tasks, weights):
                results.append(fn(task))
                bar.update(weight)
            return results
        context = multiprocessing.get_context(start_method())
        with ProcessPoolExecutor(min(processes, len(tasks)), mp_context=context) as pool:
            try:
                results = []
                for weight, result in zip(weights, pool.map(fn, tasks)):
                    results.append(result)
                    bar.update(weight)
                return results
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        bar.close()
