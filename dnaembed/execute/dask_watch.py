"""Watching a Dask cluster's workers during a run, for the log (:class:`WorkerWatch`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from dnaembed.log import counted, logger

if TYPE_CHECKING:
    from distributed import Client

#: Seconds between two looks at the scheduler's workers (:class:`WorkerWatch`).
WATCH_INTERVAL = 5.0


class WorkerWatch:
    """Logs when workers leave (killed, or restarted by their nanny for memory) or join,
    when no worker can take tasks (none left, or all paused for memory), and when one can
    again. ``check_joined(addresses)``, if given, is asked about workers that join: a
    reason to refuse one becomes :attr:`fault`, for the run to end with.

    Why: Dask keeps the tasks of a scheduler without workers until one joins (a lost
    worker's tasks too), which is what a cluster whose workers are restarted or still
    queued (dask-jobqueue) needs; and a worker past its memory's pause threshold (80% of
    ``--memory-limit`` by default) takes no task until its memory drops, which it may never
    do. Either way a run then waits with no sign of why. A thread of its own asks every
    :data:`WATCH_INTERVAL` seconds.
    """

    def __init__(self, client: Client, where: str, more_memory: str,
                 check_joined: Callable[[list[str]], str | None] | None = None) -> None:
        self.client, self.where, self.more_memory = client, where, more_memory
        self.check_joined = check_joined
        self.fault: str | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dnaembed-worker-watch",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        state, known = "working", self._workers()
        while not self._stopped.wait(WATCH_INTERVAL):
            workers = self._workers()
            if workers is None:
                continue
            if known is not None:
                self._report_changes(known, workers)
            known = set(workers)
            state = self._report(state, workers)

    def _report_changes(self, known: set, workers: dict) -> None:
        """Logs the workers that left and joined since the last look; checks those that
        joined (``check_joined``)."""
        left = len(known - workers.keys())
        if left:
            logger.info("%s: %s left (%d now); Dask runs %s unfinished tasks again",
                        self.where, counted(left, "worker"), len(workers),
                        "its" if left == 1 else "their")
        joined = sorted(workers.keys() - known)
        if not joined:
            return
        if known:  # else the first workers: "has N workers again" (_report) says so
            logger.info("%s: %s joined (%d now)", self.where, counted(len(joined), "worker"),
                        len(workers))
        if self.check_joined is not None and self.fault is None:
            self.fault = self.check_joined(joined)

    def _workers(self) -> dict | None:
        """The scheduler's workers (address -> what it knows of each), None if it did not
        answer."""
        try:
            return self.client.scheduler_info()["workers"]
        except Exception:  # noqa: BLE001 - a closing client: the run's own calls report it
            return None

    def _report(self, state: str, workers: dict) -> str:
        """Logs a change of state (``working``, ``none`` or ``paused``); the new state."""
        paused = [w for w in workers.values() if w.get("status") == "paused"]
        now = "none" if not workers else "paused" if len(paused) == len(workers) else "working"
        if now == state:
            return now
        if now == "none":
            logger.warning("%s has no workers: the tasks wait until one joins", self.where)
        elif now == "paused":
            logger.warning(
                "%s: %s paused for memory, past Dask's pause threshold (%s): the tasks wait "
                "until one has memory free; %s or a smaller --partition-size may fit", self.where,
                "its worker is" if len(workers) == 1 else f"all {len(workers)} workers are",
                _memory_of(paused[0]), self.more_memory)
        elif state == "none":
            logger.info("%s has %s again", self.where, counted(len(workers), "worker"))
        else:
            logger.info("%s: workers take tasks again", self.where)
        return now

    def stop(self) -> None:
        """Ends the watch: its thread stops at its next look (waited for up to 1 s)."""
        self._stopped.set()
        self._thread.join(timeout=1.0)  # not held up by a scheduler slow to answer


def _memory_of(worker: dict) -> str:
    """A paused worker's memory for the log, from the scheduler's view of it."""
    used = worker.get("metrics", {}).get("memory")
    limit = worker.get("memory_limit")
    if not used or not limit:
        return "its memory not known"
    return f"one at {used / 2**20:,.0f} MiB of its {limit / 2**20:,.0f} MiB limit"
