"""Tasks on a Dask cluster: a LocalCluster on this machine, or an existing scheduler.

``--workers N`` starts a ``dask.distributed.LocalCluster`` of N worker
processes on 127.0.0.1 (the embedded default for every core under a memory
limit per worker); ``--scheduler tcp://HOST:PORT`` joins a cluster started with
``dask scheduler`` / ``dask worker`` (or dask-jobqueue). Nothing here is a
scheduler, a protocol or a pool of our own: tasks are ``Client.submit`` calls.

How workers get their data: **sent by the client**, inside each task. The
client reads the input, holds the reads (in memory or spilled to its own
tmpdir) and sends every task its reads and vectors; results come back to the
client. Workers need no shared filesystem and no access to the input, and a
task's inputs stay with the scheduler until it is done, so a task whose
worker dies is run again elsewhere (Dask's own rescheduling; a worker killed
with SIGKILL does not change the result). Large objects used by every task
(the model) go to each worker once, as a worker plugin, which Dask also gives
to workers that join or restart later.

Tasks are submitted a few ahead of the results and collected in task order,
so the client's memory holds a bounded window of them. What runs on the workers besides
the tasks (the worker plugins): :mod:`.dask_workers`; the watch on the workers that the
log reports: :mod:`.dask_watch`; the checks of an existing cluster before a run uses it:
:mod:`.dask_connect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import pickle
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import dask
from distributed import KilledWorker

from dnaembed.errors import DnaembedError
from dnaembed.execute.dask_connect import connect, dnaembed_fault, scheduler_name
from dnaembed.execute.dask_watch import WorkerWatch
from dnaembed.execute.dask_workers import (
    AllocatorSettings,
    ImportsAhead,
    SharedObject,
    StoppedByClient,
    call_shared,
)
from dnaembed.execute.traffic import Traffic, payload_bytes, timed_call
from dnaembed.log import counted, progress_bar

#: Tasks in flight per worker thread.
AHEAD_PER_THREAD = 2
#: Tasks submitted and not yet given back, per worker thread: finished results wait
#: for the slower ones before them, up to this many.
HELD_PER_THREAD = 8
#: The workers of a LocalCluster run no statistical profiler: it samples every thread's
#: stack 100 times a second, for a dashboard that is not started. Its scheduler, nannies
#: and workers sample the machine's state (CPU, memory, network, disks) every 5 s, not
#: every 0.5 s, and not its disks: these samples feed the dashboard only (a worker's
#: memory limit reads the process's memory itself). At 0.5 s they took ~1 s of CPU a
#: minute (an idle cluster of two workers), most of it in the client's process, where a
#: LocalCluster's scheduler and nannies live, and which shares the cores with the tasks.
#: Every server of it (scheduler, nannies, workers) checks its event loop's health (the
#: "tick", for warnings of a blocked loop) every 1 s, not every 20 ms, and the nannies
#: read their workers' memory every 0.5 s, not every 0.1 s (the nanny still stops a
#: worker that outgrows its limit; the budget plan keeps the tasks well below it).
#: With all of these an idle cluster of two workers takes 0.7 s of the client's CPU a minute
#: and 0.5 s of its workers', against 3.8 and 3.0 s with Dask's own settings
#: (scripts/bench_idle_cluster.py, docs/benchmarks.md; measured while the workers also
#: read their memory every 0.5 s, which they no longer do: below).
#: Its workers neither spill nor pause for memory: Dask's thresholds (spill at 70% of the
#: limit, pause at 80%) are for data a worker keeps between tasks, and these keep none (a
#: task's inputs and result leave with it), while the budget plans each worker's memory up
#: to --memory, torch and the model alone ~300 MB. A worker past 70% tried to spill
#: nothing and warned "Unmanaged memory use is high"; one past 80% stopped taking tasks,
#: and under --memory 340M both workers paused with the model loaded and the run waited
#: for good. The nanny still restarts a worker past 95% (Dask's ``terminate``), whose
#: tasks then run again; the workers themselves no longer read their memory.
LOCAL_WORKER_CONFIG = {"distributed.worker.profile.enabled": False,
                       "distributed.admin.system-monitor.interval": "5s",
                       "distributed.admin.system-monitor.disk": False,
                       "distributed.admin.tick.interval": "1s",
                       "distributed.worker.memory.monitor-interval": "500ms",
                       "distributed.worker.memory.target": False,
                       "distributed.worker.memory.spill": False,
                       "distributed.worker.memory.pause": False}
class _Window:
    """Futures in task order: at most ``ahead`` running, at most ``held`` not yet given
    back; finished results are read as they finish, and given back in order."""

    def __init__(self, ahead: int, held: int, result: Callable) -> None:
        from distributed import as_completed

        self.ahead, self.held, self.result = ahead, max(held, ahead), result
        self.running: dict[Any, int] = {}  # future -> task number
        self.finished: dict[int, Any] = {}  # task number -> result
        self.submitted = self.given = 0
        self.completions = as_completed()

    def submit(self, future) -> None:
        self.running[future] = self.submitted
        self.submitted += 1
        self.completions.add(future)

    def ready(self, *, final: bool) -> Iterator:
        """The results that can be given back now in order, waiting for finishing tasks
        while too many run or are held (``final``: until every one is given back)."""
        while True:
            while self.given in self.finished:
                yield self.finished.pop(self.given)
                self.given += 1
            waiting = self.submitted - self.given
            if not self.running or not (final or len(self.running) >= self.ahead
                                        or waiting >= self.held):
                return
            future = next(self.completions)
            self.finished[self.running.pop(future)] = self.result(future)

    def cancel(self, client) -> None:
        if self.running:
            # Cleanup on the way out: a client that lost its scheduler refuses it, and its
            # error would hide the one that ended the run.
            with contextlib.suppress(Exception):
                client.cancel(list(self.running))


def _not_reconnect_failure(record: logging.LogRecord) -> bool:
    """False for Dask's errors on reconnecting to a lost scheduler: a run that lost its
    scheduler ends with its own one-line error (:meth:`DaskExecutor._cluster_failure`),
    and Dask's "Failed to reconnect to scheduler", logged from its event loop as the client
    closes, came first; a run stopped (Ctrl-C, SIGTERM) while the client tried again was
    followed by the traceback of the attempt that closing the client cancelled."""
    if str(record.msg).startswith("Failed to reconnect to scheduler"):
        return False
    return not (record.exc_info and record.exc_info[0] is asyncio.CancelledError)


def _not_sigterm_delay(record: logging.LogRecord) -> bool:
    """False for a nanny's "is slow to accept SIGTERM; sending SIGKILL": a LocalCluster's
    workers ignore SIGTERM (:class:`~dnaembed.execute.dask_workers.StoppedByClient`), so
    one past 95% of its memory is killed at the nanny's next memory check, as meant."""
    return "accept SIGTERM" not in record.getMessage()


class DaskExecutor:
    """Tasks on Dask: a new LocalCluster (``workers``) or the one at ``scheduler``.

    ``memory_limit`` (``--memory``): each LocalCluster worker's limit; with ``scheduler``,
    what the tasks are planned for, checked against the workers' own limits."""

    kind = "dask"
    #: Tasks run in worker processes (see :attr:`InlineExecutor.shares_interpreter`).
    shares_interpreter = False

    def __init__(self, *, workers: int | None = None, scheduler: str | None = None,
                 threads_per_worker: int = 1, memory_limit: int | None = None) -> None:
        self.cluster = None
        client_log = logging.getLogger("distributed.client")
        if _not_reconnect_failure not in client_log.filters:
            client_log.addFilter(_not_reconnect_failure)
        self._shared: dict[int, tuple[Any, str]] = {}  # id(object) -> (object, plugin name)
        self._quiet_logs = contextlib.ExitStack()
        if scheduler is not None:
            self._quiet_dask_info()
            try:
                self.client = connect(scheduler, memory_limit)
                self.where = scheduler_name(scheduler)
            except BaseException:
                self._quiet_logs.close()
                raise
        else:
            self._start_local(workers, threads_per_worker, memory_limit)
        plugins = [AllocatorSettings(), ImportsAhead()]
        if self.cluster is not None:
            plugins.append(StoppedByClient())
        for plugin in plugins:
            self.client.register_plugin(plugin, name=plugin.name)
        self._plugin_names = [plugin.name for plugin in plugins]
        threads = self.client.nthreads()
        self.workers = max(1, sum(threads.values()))
        self.worker_count = len(threads)
        self.tasks_per_process = max(threads.values(), default=1)
        self.traffic = Traffic()
        # Workers that join an existing cluster later (queued by dask-jobqueue, restarted)
        # are checked as the ones at the start were.
        joined = (functools.partial(dnaembed_fault, self.client, self.where)
                  if self.cluster is None else None)
        self._watch = WorkerWatch(self.client, self.where, self._more_memory(), joined)

    def _quiet_dask_info(self) -> None:
        """Dask's INFO lines off this process's standard error until :meth:`close`, as a
        LocalCluster's ``silence_logs`` keeps them for its own: a client of a scheduler
        that died mid-run printed "distributed.batched - INFO - Batched Comm Closed" with
        a traceback before the run's own one-line error. Its warnings and errors stay."""
        from distributed.utils import silence_logging_cmgr

        self._quiet_logs.enter_context(silence_logging_cmgr(logging.WARNING))

    def _start_local(self, workers: int, threads_per_worker: int,
                     memory_limit: int | None) -> None:
        """A LocalCluster of ``workers`` processes on 127.0.0.1, and its client."""
        from distributed import Client, LocalCluster

        nanny_memory = logging.getLogger("distributed.nanny.memory")
        if _not_sigterm_delay not in nanny_memory.filters:
            nanny_memory.addFilter(_not_sigterm_delay)
        with dask.config.set(LOCAL_WORKER_CONFIG):  # read by its servers as they start
            self.cluster = LocalCluster(
                n_workers=workers, threads_per_worker=threads_per_worker, processes=True,
                memory_limit=memory_limit if memory_limit else "auto", host="127.0.0.1",
                dashboard_address=None, silence_logs=logging.WARNING,
                # Its scheduler serves HTTP (health, metrics) even without a dashboard,
                # on 8787 unless told: a second run on the machine then printed Dask's
                # "Port 8787 is already in use" warning. Any free port instead.
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                # Each nanny starts its worker, and starts it again (killed, or past 95%
                # of its memory), with this config. A copy of its own: the nanny's merge
                # of the config is shallow, so it shared the nested settings that leaving
                # this block sets back, and a restarted worker had Dask's: it warned at 70%
                # of --memory and paused at 80%, which under a small --memory waits for good.
                config=copy.deepcopy(dask.config.config),
            )
        self.client = Client(self.cluster)
        processes = counted(workers, "worker process", "worker processes")
        self.where = f"a LocalCluster on 127.0.0.1 ({processes})"

    def describe(self) -> str:
        """Where the tasks run, for the log: the cluster, its workers and threads."""
        return (f"{self.where}: {counted(self.worker_count, 'worker')}, "
                f"{counted(self.workers, 'thread')}")

    def _share(self, obj: Any) -> str:
        """Register ``obj`` with every worker once; its plugin name."""
        entry = self._shared.get(id(obj))
        if entry is None:
            name = f"dnaembed-shared-{uuid.uuid4().hex}"
            payload = pickle.dumps(obj)
            self.client.register_plugin(SharedObject(name, payload), name=name)
            self.traffic.sent += len(payload) * self.worker_count
            entry = self._shared[id(obj)] = (obj, name)  # keep obj alive: its id stays unique
        return entry[1]

    def map(self, fn: Callable, tasks: Iterable, *, shared: Any = None, desc: str = "tasks",
            unit: str = "task") -> Iterator:
        """``fn(shared, task)`` (or ``fn(task)``) on the cluster for each task, in task order.

        At most :data:`AHEAD_PER_THREAD` tasks per thread are in flight, and at most
        :data:`HELD_PER_THREAD` submitted and not yet given back. Results are taken as
        they finish and given back in task order: a long task at the head holds back
        only the giving, not the next tasks, so the other workers keep working.
        """
        label, token = desc.replace(" ", "-"), uuid.uuid4().hex[:12]
        name = self._share(shared) if shared is not None else None
        window = _Window(AHEAD_PER_THREAD * self.workers, HELD_PER_THREAD * self.workers,
                         lambda future: self._result(future, desc))
        # Each task carries its data, by design (see the module notes): no warning per task.
        quiet = dask.config.set({"distributed.admin.large-graph-warning-threshold": "10GB"})
        with quiet, progress_bar(unit=f" {unit}s", desc=desc) as bar:
            try:
                for i, task in enumerate(tasks):
                    self.traffic.sent += payload_bytes(task)
                    self.traffic.tasks += 1
                    window.submit(self._submit(fn, name, task, f"{label}-{token}-{i}"))
                    for result in window.ready(final=False):
                        self._refuse_joined()
                        yield result
                        bar.update(1)
                for result in window.ready(final=True):
                    self._refuse_joined()
                    yield result
                    bar.update(1)
            except Exception as e:
                failure = self._cluster_failure(e, desc)
                if failure is None:
                    raise
                raise failure from None
            finally:
                window.cancel(self.client)

    def _refuse_joined(self) -> None:
        """Ends the run if a worker that joined it cannot run its tasks (the watch's
        :func:`~dnaembed.execute.dask_connect.dnaembed_fault`)."""
        if self._watch.fault is not None:
            raise DnaembedError(self._watch.fault)

    def _cluster_failure(self, e: Exception, desc: str) -> DnaembedError | None:
        """The one-line error for a run that the cluster, not a task, ended with ``e``;
        None for any other error (a task's own, raised as it is)."""
        if isinstance(e, KilledWorker):
            # Dask gives a task up once the workers running it died more than
            # ``allowed-failures`` times: killed, or stopped by the nanny for memory.
            deaths = e.allowed_failures + 1
            return DnaembedError(
                f"{self.where}: the workers running one of the {desc} tasks died "
                f"{counted(deaths, 'time')} (killed, or out of memory: "
                f"{self._more_memory()} or a smaller --partition-size may fit)")
        if self.client.status != "running":
            # A client that lost its scheduler cancels its futures, tries to reconnect and
            # closes after 10 s: the run cannot go on.
            return DnaembedError(f"lost the connection to {self.where}: the scheduler "
                                 f"stopped or cannot be reached ({type(e).__name__})")
        return None

    def _more_memory(self) -> str:
        """How to give the workers more memory: a LocalCluster's have --memory each; others,
        what they were started with."""
        if self.cluster is not None:
            return "a larger --memory"
        return "workers with more memory (dask worker --memory-limit)"

    def _submit(self, fn: Callable, shared_name: str | None, task: Any, key: str):
        if shared_name is None:
            return self.client.submit(timed_call, fn, task, key=key, pure=False)
        return self.client.submit(call_shared, fn, shared_name, task, key=key, pure=False)

    def _result(self, future, kind: str) -> Any:
        result, cpu = future.result()
        self.traffic.received += payload_bytes(result)
        self.traffic.add_cpu(kind, cpu)
        return result

    def close(self) -> None:
        """Stops the watch on workers, logs the traffic and the workers' CPU, and closes the
        client (and the LocalCluster this executor started)."""
        from dnaembed.log import logger

        self._watch.stop()
        logger.info("%s: %s", self.describe(), self.traffic.describe())
        with contextlib.suppress(Exception):  # a diagnostic: a lost worker must not fail it
            cpu = self.client.run(time.process_time)
            tasks = sum(self.traffic.cpu.values())
            # Only the workers there now answer: any lost during the run took their CPU
            # with them, so the tasks' CPU may be more than theirs.
            logger.info("worker processes (%d now): %.1fs of CPU since they started; this "
                        "run's tasks %.1fs of CPU", len(cpu), sum(cpu.values()), tasks)
        for _, name in self._shared.values():
            # A closing cluster may already be gone.
            with contextlib.suppress(Exception):
                self.client.unregister_worker_plugin(name)
        self._shared.clear()
        for name in self._plugin_names:
            with contextlib.suppress(Exception):
                self.client.unregister_worker_plugin(name)
        try:
            self.client.close()
        finally:
            self._quiet_logs.close()
        if self.cluster is not None:
            # A worker with torch loaded may take longer to exit than the nanny waits before
            # it kills it, with a warning; the work is done by then, so the kill is quiet.
            nanny = logging.getLogger("distributed.nanny")
            level = nanny.level
            nanny.setLevel(logging.ERROR)
            try:
                self.cluster.close()
            finally:
                nanny.setLevel(level)

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
