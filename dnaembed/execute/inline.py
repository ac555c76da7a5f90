"""Tasks in this process: one after another, or side by side on threads.

The executor for one machine without Dask, and the default. A task is a
module-level function and plain data (:mod:`dnaembed.cluster.partition_tasks`);
each runs on one thread, so ``threads`` tasks run side by side: faiss,
rapidfuzz and torch release the interpreter lock while they compute.
``map`` yields results in task order and takes the tasks lazily, a few ahead
of the results, so a stream of large tasks is never all in memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from dnaembed.execute.traffic import Traffic, payload_bytes, timed_call
from dnaembed.log import available_cores, blas_on_one_thread, counted, progress_bar

#: Tasks submitted ahead of the oldest unfinished one, per thread.
AHEAD_PER_THREAD = 2


class InlineExecutor:
    """Run tasks here, on ``threads`` threads (0: every available core)."""

    kind = "inline"
    #: Tasks run on this interpreter's threads: work that holds the interpreter lock
    #: gains nothing from tasks here (see :mod:`dnaembed.cluster.link_tasks`).
    shares_interpreter = True

    def __init__(self, threads: int = 1) -> None:
        self.workers = threads if threads > 0 else available_cores()
        self.tasks_per_process = self.workers
        self.traffic = Traffic()
        self._pool = ThreadPoolExecutor(self.workers) if self.workers > 1 else None
        # Tasks side by side multiply on one thread each; only this thread can say so.
        self._restore_blas = blas_on_one_thread() if self._pool is not None else None

    def describe(self) -> str:
        """Where the tasks run, for the log: this process, on how many threads."""
        return f"this process, {counted(self.workers, 'thread')}"

    def map(self, fn: Callable, tasks: Iterable, *, shared: Any = None, desc: str = "tasks",
            unit: str = "task") -> Iterator:
        """``fn(shared, task)`` (or ``fn(task)`` without ``shared``) for each task, in order."""
        args = () if shared is None else (shared,)

        def call(task):
            return timed_call(fn, *args, task)

        def tallied(tasks):
            for task in tasks:
                self.traffic.sent += payload_bytes(task)
                self.traffic.tasks += 1
                yield task

        def back(timed):
            result, cpu = timed
            self.traffic.received += payload_bytes(result)
            self.traffic.add_cpu(desc, cpu)
            bar.update(1)
            return result

        with progress_bar(unit=f" {unit}s", desc=desc) as bar:
            if self._pool is None:
                for task in tallied(tasks):
                    yield back(call(task))
                return
            pending: deque[Future] = deque()
            ahead = AHEAD_PER_THREAD * self.workers
            try:
                for task in tallied(tasks):
                    pending.append(self._pool.submit(call, task))
                    while len(pending) > ahead:
                        yield back(pending.popleft().result())
                while pending:
                    yield back(pending.popleft().result())
            finally:
                for future in pending:
                    future.cancel()

    def close(self) -> None:
        """Logs the traffic, stops the threads (cancelling tasks not started) and gives
        BLAS its threads back."""
        from dnaembed.log import logger

        logger.debug("%s: %s", self.describe(), self.traffic.describe())
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._restore_blas is not None:
            self._restore_blas()
            self._restore_blas = None

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
