"""The executors for real: a Dask LocalCluster, a worker killed mid-run, `dask scheduler` and
`dask worker` processes on 127.0.0.1, and the memory budget of the one-process path."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_clean_error, run_cli
from scale_data import simulate_run, small_encoder

from dnaembed.cluster.partition_tasks import search_partition
from dnaembed.cluster.search import faiss_module
from dnaembed.execute.dask import DaskExecutor
from dnaembed.execute.inline import InlineExecutor
from dnaembed.model.checkpoint import load_model
from dnaembed.pipeline import clustered_files

PARAMS = {"partition_size": 256}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return simulate_run(tmp_path_factory.mktemp("sim"), strands=150)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    return small_encoder(tmp_path_factory.mktemp("model") / "small.pt")


@pytest.fixture(scope="module")
def local_cluster():
    """Two worker processes on 127.0.0.1, one thread each."""
    with DaskExecutor(workers=2, threads_per_worker=1) as executor:
        yield executor


def cluster_with(runner, sim, model):
    with clustered_files([f"{sim}.fastq.gz"], model, runner, params=PARAMS) as (result, _):
        return result


def same_clusters(a, b) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k))
               for k in ("labels", "orientation", "representatives"))


class KillOneWorker:
    """Runs on a real executor and SIGKILLs one of its workers once partitions are in flight."""

    def __init__(self, executor: DaskExecutor) -> None:
        self.executor = executor
        self.workers = executor.workers
        self.tasks_per_process = executor.tasks_per_process
        self.killed: int | None = None

    def map(self, fn, tasks, **kwargs):
        for result in self.executor.map(fn, tasks, **kwargs):
            if fn is search_partition and self.killed is None:
                pids = self.executor.client.run(os.getpid)
                self.killed = sorted(pids.values())[0]
                os.kill(self.killed, signal.SIGKILL)
            yield result


def _page_faults_of_freed_blocks(_: int) -> int:
    """Minor page faults of this thread while a 2 MiB block is made, touched and freed 20
    times (numpy asks for huge pages only from 4 MiB on)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(20):
        block = np.ones(1 << 18)
        del block
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


def test_workers_reuse_freed_blocks_despite_the_nannys_allocator_setting(local_cluster):
    # The nanny's MALLOC_TRIM_THRESHOLD_ alone would map every block afresh: 20 x 512 faults.
    env = local_cluster.client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert set(env.values()) == {"65536"}
    faults = list(local_cluster.map(_page_faults_of_freed_blocks, [0, 1]))
    assert max(faults) < 2 * 512, faults


def _profiler_enabled() -> bool:
    import dask

    return bool(dask.config.get("distributed.worker.profile.enabled"))


def test_local_workers_run_no_profiler(local_cluster):
    # Dask's profiler samples every thread 100 times a second, for no dashboard here.
    assert set(local_cluster.client.run(_profiler_enabled).values()) == {False}


def _system_monitor(dask_worker) -> tuple[float, bool]:
    return (dask_worker.periodic_callbacks["monitor"].callback_time,
            dask_worker.monitor.monitor_disk_io)


def test_the_local_cluster_samples_the_machine_every_5_s_without_its_disks(local_cluster):
    # Dask's default is every 0.5 s with the disks, in the scheduler, each nanny (in this
    # process) and each worker: samples that feed only a dashboard, which is not started.
    cluster = local_cluster.cluster
    servers = [cluster.scheduler, *cluster.workers.values()]
    here = {(s.periodic_callbacks["monitor"].callback_time, s.monitor.monitor_disk_io)
            for s in servers}
    workers = set(local_cluster.client.run(_system_monitor).values())
    assert here | workers == {(5000, False)}


def _loop_checks(dask_worker) -> tuple[float, float | None]:
    callbacks = dask_worker.periodic_callbacks
    monitor = callbacks.get("memory_monitor")
    return callbacks["tick"].callback_time, monitor.callback_time if monitor else None


def test_the_local_cluster_checks_its_loops_each_second_and_memory_twice_a_second(local_cluster):
    # Dask's defaults, a tick every 20 ms and memory read every 100 ms in every server, cost
    # an idle cluster of two workers most of its CPU (scripts/bench_idle_cluster.py).
    cluster = local_cluster.cluster
    assert cluster.scheduler.periodic_callbacks["tick"].callback_time == 1000
    nannies = {(n.periodic_callbacks["tick"].callback_time,
                n.periodic_callbacks["memory_monitor"].callback_time)
               for n in cluster.workers.values()}
    assert nannies == {(1000, 500)}  # a nanny restarts a worker past 95% of its limit
    # A worker that neither spills nor pauses (LOCAL_WORKER_CONFIG) reads no memory.
    assert set(local_cluster.client.run(_loop_checks).values()) == {(1000, None)}


def _memory_settings() -> tuple:
    import dask

    return tuple(dask.config.get(f"distributed.worker.memory.{k}") for k in ("spill", "pause"))


def test_a_restarted_worker_keeps_the_local_cluster_settings(local_cluster):
    # The nanny starts a worker again (killed, or past 95% of its memory) from the config it
    # kept: one whose settings went back to Dask's when the cluster had started paused at
    # 80% of --memory and read its memory ten times a second.
    client = local_cluster.client
    pids = client.run(os.getpid)
    worker, pid = sorted(pids.items())[0]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:  # until two workers answer, neither the killed one
        answers = client.run(os.getpid, on_error="return").values()
        live = [a for a in answers if isinstance(a, int)]
        if len(live) == 2 and pid not in live:
            break
        assert time.monotonic() < deadline, "the killed worker was not restarted"
        time.sleep(0.2)
    assert set(client.run(_memory_settings).values()) == {(False, False)}
    assert set(client.run(_loop_checks).values()) == {(1000, None)}


def _blas_threads(_: int = 0) -> int:
    """Threads of this process's pthreads BLAS (numpy's OpenBLAS: one pool for every thread;
    an OpenMP one, as faiss's, takes each thread's own OpenMP setting)."""
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info()
                if i["user_api"] == "blas" and i.get("threading_layer") == "pthreads"),
               default=0)


def _blas_threads_of_a_task(_: int) -> int:
    from dnaembed.log import set_threads

    set_threads(1)  # as every task does
    return _blas_threads()


def test_tasks_on_threads_multiply_on_one_blas_thread_each():
    # The main thread sets the BLAS threads first (as the CLI does), and threadpoolctl
    # then ignores the task threads' own setting for numpy's OpenBLAS: the executor
    # sets it on this thread, and restores it when it closes.
    from dnaembed.log import set_threads

    set_threads(2)
    before = _blas_threads()
    if before < 2:
        pytest.skip("no pthreads BLAS on two threads here (numpy's wheels bring one)")
    with InlineExecutor(2) as runner:
        seen = list(runner.map(_blas_threads_of_a_task, range(6)))
    assert seen == [1] * 6
    assert _blas_threads() == before


def _sleep_then_clock(task: tuple[int, float]) -> tuple[int, float]:
    number, seconds = task
    time.sleep(seconds)
    return number, time.time()


def test_a_slow_first_task_does_not_hold_back_the_others(local_cluster):
    # Results come back in task order, but the tasks after a slow one run meanwhile:
    # up to 8 per worker thread wait to be given back, with 2 per thread in flight.
    tasks = [(0, 3.0)] + [(i, 0.05) for i in range(1, 13)]
    results = list(local_cluster.map(_sleep_then_clock, tasks, desc="sleeps"))
    assert [number for number, _ in results] == list(range(13))
    head_done = results[0][1]
    assert sum(done < head_done for _, done in results[1:]) >= 10


@contextlib.contextmanager
def _dnaembed_log(caplog):
    """``caplog`` given the dnaembed logger's records from INFO up (the CLI's set-up stops
    them reaching the root logger)."""
    log = logging.getLogger("dnaembed")
    log.addHandler(caplog.handler)
    try:
        with caplog.at_level("INFO", logger="dnaembed"):
            yield
    finally:
        log.removeHandler(caplog.handler)


def _spin(seconds: float) -> float:
    """A task that keeps its worker's CPU busy for ``seconds``."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds


def _ignores_sigint() -> bool:
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_local_workers_are_left_to_their_client_on_ctrl_c_and_sigterm(local_cluster, signum):
    # Ctrl-C in a terminal reaches the LocalCluster's worker processes too; each died with
    # a KeyboardInterrupt traceback. SIGTERM to the process group (a batch system's
    # cancel) killed them under the client, and Dask logged errors and restarted them.
    # The client, interrupted or terminated, closes the cluster instead.
    workers = local_cluster.client.run(os.getpid)
    for pid in workers.values():
        os.kill(pid, signum)
    time.sleep(1.0)
    assert local_cluster.client.run(os.getpid) == workers  # the same processes, alive
    assert [n for n, _ in local_cluster.map(_sleep_then_clock, [(1, 0.0), (2, 0.0)])] == [1, 2]


def test_closing_logs_the_workers_cpu_since_they_started(caplog):
    with _dnaembed_log(caplog), DaskExecutor(workers=1, threads_per_worker=1) as executor:
        assert list(executor.map(_spin, [0.5, 0.5], desc="spinning")) == [0.5, 0.5]
    assert "a LocalCluster on 127.0.0.1 (1 worker process): 1 worker, 1 thread: 2 tasks: " \
        in caplog.text
    found = re.search(r"worker processes \(1 now\): ([0-9.]+)s of CPU since they started; "
                      r"this run's tasks ([0-9.]+)s of CPU", caplog.text)
    assert found, caplog.text
    workers, tasks = map(float, found.groups())
    assert 1.0 <= tasks <= workers


def test_a_local_cluster_takes_any_free_port_for_its_http_server(recwarn):
    # Dask's scheduler serves HTTP on 8787 unless told otherwise, and warned (on stderr,
    # in a lab script's log) when a second run on the machine found it taken.
    with contextlib.ExitStack() as stack:
        taken = stack.enter_context(socket.socket())
        with contextlib.suppress(OSError):  # taken by something else already: as good
            taken.bind(("", 8787))
            taken.listen()
        with DaskExecutor(workers=1, threads_per_worker=1) as executor:
            assert list(executor.map(_sleep_then_clock, [(7, 0.0)], desc="one"))[0][0] == 7
    assert not [w for w in recwarn if "already in use" in str(w.message)]


def test_local_cluster_gives_the_one_process_result(sim, small_model, local_cluster):
    model = load_model(small_model).model
    with InlineExecutor(1) as inline:
        expected = cluster_with(inline, sim, model)
    assert local_cluster.worker_count == 2
    faiss = faiss_module()
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)
    local_cluster.traffic.cpu.clear()
    try:
        got = cluster_with(local_cluster, sim, model)
        threads_after = faiss.omp_get_max_threads()
    finally:
        faiss.omp_set_num_threads(before)
    assert same_clusters(got, expected)
    assert got.stats["partitions"] >= 4
    # The threshold sample is searched here, not shipped: its tasks would carry whole
    # partitions' vectors for a few queries. This thread's faiss threads are left as set.
    assert "searching a sample" not in local_cluster.traffic.cpu
    assert "searching partitions" in local_cluster.traffic.cpu
    # The rescue's k-mer search of one block of queries too: two workers have no more
    # than twice this process's threads. Its profiles and alignments are tasks.
    assert "counting k-mers" not in local_cluster.traffic.cpu
    assert "rescue alignments" in local_cluster.traffic.cpu
    assert threads_after == 3


def test_small_link_and_rescue_tasks_on_the_local_cluster_give_the_one_process_result(
        sim, small_model, local_cluster, monkeypatch):
    # Round 1's linking, the rescue's k-mer search, profiles and alignments in many small
    # tasks on two worker processes; in one process they run here in one pass.
    from dnaembed.cluster import kmer_tasks, link_tasks, rescue_tasks

    model = load_model(small_model).model
    with InlineExecutor(1) as inline:
        expected = cluster_with(inline, sim, model)
    for module, name, size in ((link_tasks, "PAIRS_PER_TASK", 200),
                               (kmer_tasks, "RANGE_TARGETS", 40),
                               (kmer_tasks, "TARGETS_PER_QUERY", 0),
                               (rescue_tasks, "PROFILES_PER_TASK", 8),
                               (rescue_tasks, "READS_PER_TASK", 4)):
        monkeypatch.setattr(module, name, size)
    monkeypatch.setattr(kmer_tasks, "TASKS_CPU_FACTOR", 0)  # the k-mer search as tasks too
    local_cluster.traffic.cpu.clear()
    got = cluster_with(local_cluster, sim, model)
    assert same_clusters(got, expected)
    assert got.stats["rescued"] == expected.stats["rescued"] > 0
    assert got.stats["merges"] == expected.stats["merges"]
    assert {"linking", "counting k-mers", "k-mer votes", "cluster profiles",
            "rescue alignments"} <= set(local_cluster.traffic.cpu)


def test_a_worker_killed_mid_run_does_not_change_the_result(sim, small_model, local_cluster):
    model = load_model(small_model).model
    with InlineExecutor(2) as inline:
        expected = cluster_with(inline, sim, model)
    runner = KillOneWorker(local_cluster)
    got = cluster_with(runner, sim, model)
    assert runner.killed is not None
    assert same_clusters(got, expected)
    # The worker was really gone: the nanny restarted it under another process id.
    local_cluster.client.wait_for_workers(2, timeout=60)
    assert runner.killed not in local_cluster.client.run(os.getpid).values()


def test_run_makes_the_same_strands_on_the_local_cluster(sim, small_model, local_cluster):
    from dnaembed.pipeline import strands_from_files

    model = load_model(small_model).model
    found = []
    for runner in (InlineExecutor(1), local_cluster):
        with strands_from_files([f"{sim}.fastq.gz"], model, runner, params=PARAMS,
                                threads=1) as (result, strands, _):
            found.append((result.labels, [(s.cluster_id, s.sequence) for s in strands]))
    assert np.array_equal(found[0][0], found[1][0])
    assert found[0][1] == found[1][1] and found[0][1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask_command(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("dask")), *args]


def _tests_env() -> dict:
    """The environment of a scheduler or worker that unpickles this module's tasks."""
    return dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(Path(__file__).parent))


def _start_scheduler(port: int) -> subprocess.Popen:
    return subprocess.Popen(dask_command("scheduler", "--host", "127.0.0.1", "--port", str(port),
                                         "--no-dashboard"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=_tests_env())


def _start_worker(address: str, tmp_path: Path, *options: str) -> subprocess.Popen:
    return subprocess.Popen(dask_command("worker", address, "--nthreads", "1", "--no-dashboard",
                                         "--local-directory", str(tmp_path / "dask"), *options),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=_tests_env())


def _stop(procs: list[subprocess.Popen]) -> None:
    """The workers, then the scheduler: asked to stop, killed after 20 s."""
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_scheduler_and_two_worker_processes_write_the_same_file(sim, small_model, tmp_path):
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start_scheduler(port)]
    try:
        procs += [_start_worker(address, tmp_path) for _ in range(2)]
        common = ["-m", str(small_model), "--partition-size", "256", "-q"]
        here, there = tmp_path / "here.tsv", tmp_path / "there.tsv"
        run_cli("cluster", f"{sim}.fastq.gz", "-o", str(here), *common, check=True)
        run_cli("cluster", f"{sim}.fastq.gz", "-o", str(there), "--scheduler", address, *common,
                check=True)
        assert here.read_bytes() == there.read_bytes()
    finally:
        _stop(procs)


def _wait_for(text: str, caplog, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while text not in caplog.text and time.monotonic() < end:
        time.sleep(0.1)
    return text in caplog.text


@contextlib.contextmanager
def _scheduler_and_worker(tmp_path: Path, *worker_options: str):
    """A ``dask scheduler`` and one ``dask worker``: (address, [scheduler, worker]), the
    list open to more processes, all stopped at the end."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start_scheduler(port)]
    try:
        time.sleep(1.0)
        procs.append(_start_worker(address, tmp_path, *worker_options))
        yield address, procs
    finally:
        _stop(procs)


def test_a_scheduler_left_without_workers_says_so_and_goes_on_when_one_joins(
        tmp_path, caplog, monkeypatch):
    import dnaembed.execute.dask_watch as dask_watch

    monkeypatch.setattr(dask_watch, "WATCH_INTERVAL", 0.2)
    with _scheduler_and_worker(tmp_path) as (address, procs), _dnaembed_log(caplog), \
            DaskExecutor(scheduler=address) as executor:
        where = f"the Dask scheduler at {address}"
        results = []
        for number, _ in executor.map(_sleep_then_clock, [(i, 0.3) for i in range(8)],
                                      desc="sleeps"):
            results.append(number)
            if number == 0:
                procs[1].kill()  # the only worker, mid-run
                procs[1].wait()
                assert _wait_for(f"{where} has no workers", caplog, 10), caplog.text
                procs.append(_start_worker(address, tmp_path))
        assert results == list(range(8))
        assert f"{where}: 1 worker left (0 now); Dask runs its unfinished tasks again" \
            in caplog.text
        assert f"{where} has 1 worker again" in caplog.text


def _fill_worker_memory(task: tuple[int, float]) -> int:
    """Task ``number``: with ``seconds``, fills its worker's memory to 90% of its limit
    (past Dask's pause threshold, 80%, short of its restart, 95%) for that long."""
    import psutil
    from distributed import get_worker

    number, seconds = task
    if seconds:
        limit = get_worker().memory_manager.memory_limit
        block = np.ones(int(0.9 * limit) - psutil.Process().memory_info().rss, dtype=np.uint8)
        time.sleep(seconds)
        del block
    return number


def test_workers_below_the_budget_or_all_paused_for_memory_are_reported(
        tmp_path, caplog, monkeypatch):
    import dnaembed.execute.dask_watch as dask_watch

    monkeypatch.setattr(dask_watch, "WATCH_INTERVAL", 0.2)
    with _scheduler_and_worker(tmp_path, "--memory-limit", "1GiB") as (address, _), \
            _dnaembed_log(caplog), \
            DaskExecutor(scheduler=address, memory_limit=2 << 30) as executor:
        where = f"the Dask scheduler at {address}"
        assert f"{where}: its worker has a memory limit of 1,024 MiB, below --memory (2,048 MiB)" \
            in caplog.text
        # Workers of a cluster of one's own keep their signals.
        assert not any(executor.client.run(_ignores_sigint).values())
        tasks = [(0, 3.0), (1, 0.0), (2, 0.0)]
        assert list(executor.map(_fill_worker_memory, tasks, desc="filling")) == [0, 1, 2]
        assert _wait_for(f"{where}: workers take tasks again", caplog, 10), caplog.text
    assert f"{where}: its worker is paused for memory, past Dask's pause threshold (one at " \
        in caplog.text
    assert "MiB of its 1,024 MiB limit): the tasks wait until one has memory free; workers " \
        "with more memory (dask worker --memory-limit) or a smaller --partition-size may fit" \
        in caplog.text


#: A ``dask worker`` (no nanny: this process) in an environment without dnaembed.
_WORKER_WITHOUT_DNAEMBED = ("import sys; sys.modules['dnaembed'] = None; "
                            "from distributed.cli.dask_worker import main; main()")


def test_a_worker_without_dnaembed_is_refused_in_one_line(tmp_path):
    from distributed import Client

    with _scheduler_and_worker(tmp_path) as (address, procs):
        procs.append(subprocess.Popen(
            [sys.executable, "-c", _WORKER_WITHOUT_DNAEMBED, address, "--nthreads", "1",
             "--no-nanny", "--no-dashboard", "--local-directory", str(tmp_path / "bare")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
            env=dict(os.environ, PYTHONWARNINGS="ignore")))
        with Client(address) as client:
            client.wait_for_workers(2, timeout=30)
        proc = run_cli("cluster", "-", "-o", str(tmp_path / "c.tsv"), "--scheduler", address,
                       stdin=b"@r1\nACGT\n+\nIIII\n")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and len(err.strip().splitlines()) == 1, err
    assert re.match(rf"dnaembed: error: the Dask scheduler at {address}: worker tcp://[\d.:]+ "
                    r"cannot import dnaembed \(.*\); install dnaembed [\w.]+, the version here, "
                    r"on every worker$", err.strip()), err
    assert not (tmp_path / "c.tsv").exists()


#: A ``dask worker`` (no nanny) whose dnaembed says it is another version.
_WORKER_OF_ANOTHER_VERSION = ("import dnaembed; dnaembed.__version__ = '0.0.1'; "
                              "from distributed.cli.dask_worker import main; main()")


def _start_late_worker(code: str, address: str, tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, address, "--nthreads", "1", "--no-nanny",
         "--no-dashboard", "--local-directory", str(tmp_path / "late")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path, env=_tests_env())


def test_a_worker_of_another_version_that_joins_mid_run_ends_it_in_one_line(
        tmp_path, caplog, monkeypatch):
    # As dask-jobqueue's workers do, one joins after the run's start: it is checked as
    # those at the start are, and the run ends with the same error.
    import dnaembed.execute.dask_watch as dask_watch
    from dnaembed.errors import DnaembedError

    monkeypatch.setattr(dask_watch, "WATCH_INTERVAL", 0.2)
    with _scheduler_and_worker(tmp_path) as (address, procs), _dnaembed_log(caplog), \
            DaskExecutor(scheduler=address) as executor:
        numbers = []
        with pytest.raises(DnaembedError) as error:
            for number, _ in executor.map(_sleep_then_clock, [(i, 0.2) for i in range(150)],
                                          desc="sleeps"):
                numbers.append(number)
                if number == 0:
                    procs.append(_start_late_worker(_WORKER_OF_ANOTHER_VERSION, address,
                                                    tmp_path))
    assert 0 < len(numbers) < 150
    assert re.fullmatch(rf"the Dask scheduler at {address}: worker tcp://[\d.:]+ has dnaembed "
                        r"0\.0\.1; install dnaembed [\w.]+, the version here, on every worker",
                        str(error.value)), str(error.value)
    assert f"the Dask scheduler at {address}: 1 worker joined (2 now)" in caplog.text


def test_a_worker_without_dnaembed_cannot_join_a_run(tmp_path, monkeypatch):
    # It cannot load the run's worker plugins (dnaembed's classes), and Dask stops it as it
    # starts: the run goes on, on the workers it has.
    with _scheduler_and_worker(tmp_path) as (address, procs), \
            DaskExecutor(scheduler=address) as executor:
        late = None
        for number, _ in executor.map(_sleep_then_clock, [(i, 0.2) for i in range(150)],
                                      desc="sleeps"):
            if number == 0:
                late = _start_late_worker(_WORKER_WITHOUT_DNAEMBED, address, tmp_path)
                procs.append(late)
            if late is not None and late.poll() is not None:
                break
        assert late.poll() not in (None, 0) and number < 149
        assert list(executor.map(_sleep_then_clock, [(7, 0.0)], desc="one"))[0][0] == 7
        assert len(executor.client.scheduler_info()["workers"]) == 1


def _cli_on(address: str, reads: Path, out: Path, model: Path) -> subprocess.Popen:
    """``dnaembed cluster`` on the scheduler at ``address``, its log read as it runs."""
    return subprocess.Popen(
        [sys.executable, "-m", "dnaembed", "cluster", str(reads), "-o", str(out), "-m",
         str(model), "--scheduler", address], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, env=dict(os.environ, DNAEMBED_NO_PROGRESS="1",
                                         PYTHONWARNINGS="ignore"))


def _read_until(proc: subprocess.Popen, text: str) -> str:
    """The process's log up to the line holding ``text`` (all of it if it ends first)."""
    lines = []
    for line in iter(proc.stderr.readline, b""):
        lines.append(line.decode())
        if text in lines[-1]:
            break
    return "".join(lines)


@contextlib.contextmanager
def _run_waiting_for_workers(sim: Path, model: Path, out: Path):
    """A ``dask scheduler`` without workers and a ``cluster`` run on it, past its "no
    workers yet" line: (address, [scheduler], run, its log so far); the processes of the
    list (not the run) stopped at the end."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start_scheduler(port)]
    try:
        time.sleep(1.0)
        run = _cli_on(address, Path(f"{sim}.fastq.gz"), out, model)
        yield address, procs, run, _read_until(run, "has no workers yet")
    finally:
        _stop(procs)


def test_a_scheduler_without_workers_at_the_start_waits_for_one(sim, small_model, tmp_path):
    # As dask-jobqueue's workers, queued in the batch system, join after the scheduler
    # starts: the run says it waits, and goes on when one joins.
    out = tmp_path / "c.tsv"
    with _run_waiting_for_workers(sim, small_model, out) as (address, procs, run, log):
        assert f"the Dask scheduler at {address} has no workers yet: the run waits until " \
            "one joins" in log, log
        procs.append(_start_worker(address, tmp_path))
        err = log + run.communicate(timeout=300)[1].decode()
    assert run.returncode == 0, err
    assert f"the Dask scheduler at {address} has 1 worker\n" in err
    assert out.exists() and len(out.read_text().splitlines()) > 100


def test_a_scheduler_lost_while_the_run_waits_for_workers_is_a_clean_error(
        sim, small_model, tmp_path):
    out = tmp_path / "c.tsv"
    with _run_waiting_for_workers(sim, small_model, out) as (address, procs, run, log):
        procs[0].kill()  # lost, not closed
    err = log + run.communicate(timeout=60)[1].decode()
    assert run.returncode == 1 and "Traceback" not in err, err
    assert err.endswith(f"dnaembed: error: lost the connection to the Dask scheduler at "
                        f"{address}: the scheduler stopped or cannot be reached\n"), err
    assert not out.exists()


#: A run on the scheduler at {address}: once its tasks run, it kills the scheduler (pid
#: {pid}); a second later, while Dask's client tries to reach it again, Ctrl-C. Dask may
#: also cancel the run's tasks at once, and the run end with the lost-connection error.
_STOPPED_WHILE_RECONNECTING = """
import os, signal, sys, threading, time
from dnaembed.errors import DnaembedError
from dnaembed.execute.dask import DaskExecutor

def sleep(seconds):
    time.sleep(seconds)
    return seconds

ctrl_c = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
ctrl_c.daemon = True
try:
    with DaskExecutor(scheduler="{address}") as executor:
        for number, _ in enumerate(executor.map(sleep, [0.3] * 100, desc="sleeps")):
            if number == 1:
                os.kill({pid}, signal.SIGKILL)
                ctrl_c.start()
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
except DnaembedError as error:
    ctrl_c.cancel()
    print("lost:", error, file=sys.stderr)
"""


def test_a_run_stopped_while_its_client_reconnects_prints_no_traceback(tmp_path):
    # Dask's client tries to reach a lost scheduler again for 10 s; a run stopped then
    # (Ctrl-C) printed, as it exited, Dask's traceback of the attempt that closing the
    # client cancelled.
    with _scheduler_and_worker(tmp_path) as (address, procs):
        code = _STOPPED_WHILE_RECONNECTING.format(address=address, pid=procs[0].pid)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                             env=dict(os.environ, DNAEMBED_NO_PROGRESS="1",
                                      PYTHONWARNINGS="ignore"))
    err = run.stderr.decode()
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert run.returncode == 0 and last.startswith(("interrupted", "lost: ")), err
    assert "distributed.client - ERROR" not in err and "asyncio.exceptions" not in err, err
    assert "distributed.batched" not in err and "Traceback" not in err, err


def test_a_scheduler_lost_mid_run_is_a_clean_error(tmp_path, caplog):
    from dnaembed.errors import DnaembedError

    lost = "lost the connection to the Dask scheduler at {}: the scheduler stopped"
    with _scheduler_and_worker(tmp_path) as (address, procs), \
            pytest.raises(DnaembedError, match=re.escape(lost.format(address))), \
            DaskExecutor(scheduler=address) as executor:
        for number, _ in executor.map(_sleep_then_clock, [(i, 0.3) for i in range(8)],
                                      desc="sleeps"):
            if number == 1:
                procs[0].kill()  # the scheduler, mid-run
                procs[0].wait()
    # Dask's own error for it, logged as the client gives up, would come before ours.
    time.sleep(1.0)
    assert "Failed to reconnect" not in caplog.text


_DASK_LINES_AROUND_A_RUN = """
import logging
from dnaembed.execute.dask import DaskExecutor

batched = logging.getLogger("distributed.batched")
with DaskExecutor(scheduler="{address}"):
    batched.info("Batched Comm Closed <TCP (closed) Client->Scheduler>")
    batched.warning("a warning of Dask's")
batched.info("an info line after the run")
"""


def test_a_scheduler_runs_client_prints_no_dask_info_lines(tmp_path):
    # Dask logs "Batched Comm Closed" at INFO, with a traceback, when a scheduler dies as
    # the client writes to it (seen once, by chance): Dask's INFO lines, whichever, are
    # not printed while a process is a run's client, and are again once it closes. In a
    # process of its own: its standard error is Dask's handler's.
    with _scheduler_and_worker(tmp_path) as (address, _):
        run = subprocess.run([sys.executable, "-c", _DASK_LINES_AROUND_A_RUN.format(
            address=address)], capture_output=True, timeout=120, env=_tests_env())
    err = run.stderr.decode()
    assert run.returncode == 0, err
    assert "Batched Comm Closed" not in err
    assert "distributed.batched - WARNING - a warning of Dask's" in err
    assert "distributed.batched - INFO - an info line after the run" in err


def _kill_own_worker(_: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_task_whose_workers_keep_dying_is_a_clean_error():
    import dask

    from dnaembed.errors import DnaembedError

    # Dask gives a task up after its workers died allowed-failures + 1 times (3 + 1 by
    # default, each a worker restart); 0 here, so the first death ends it.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            DaskExecutor(workers=1, threads_per_worker=1) as executor, \
            pytest.raises(DnaembedError, match=re.escape(
                "the workers running one of the dying tasks died 1 time (killed, or out of "
                "memory: a larger --memory or a smaller --partition-size may fit)")):
        list(executor.map(_kill_own_worker, [0], desc="dying"))


def _fill_memory(_: int) -> None:
    block = np.ones(700 * 2**20, np.uint8)  # past 95% of a 600 MiB worker
    time.sleep(60 + int(block[0]))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_worker_past_its_memory_is_killed_without_a_sigterm_warning():
    import dask

    from dnaembed.errors import DnaembedError

    # The nanny sends SIGTERM, which a LocalCluster's worker ignores (StoppedByClient), and
    # SIGKILL at its next check: Dask's "is slow to accept SIGTERM; sending SIGKILL" is
    # that design at work, not news; its "exceeded 95% memory budget" stays.
    records = _Records()
    nanny_memory = logging.getLogger("distributed.nanny.memory")
    nanny_memory.addHandler(records)
    try:
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
                DaskExecutor(workers=1, threads_per_worker=1,
                             memory_limit=600 * 2**20) as executor, \
                pytest.raises(DnaembedError, match="died 1 time"):
            list(executor.map(_fill_memory, [0], desc="filling"))
    finally:
        nanny_memory.removeHandler(records)
    assert any("exceeded 95% memory budget" in m for m in records.messages)
    assert not any("SIGTERM" in m for m in records.messages), records.messages


def _frozen_objects() -> int:
    import gc

    return gc.get_freeze_count()


def _parameters_plus(model, task: int) -> int:
    return sum(p.numel() for p in model.parameters()) + task


def test_workers_keep_the_model_and_its_modules_out_of_the_collectors_passes(small_model):
    # Each full collection would walk torch's ~200,000 objects (docs/scaling.md).
    model = load_model(small_model).model
    with DaskExecutor(workers=1, threads_per_worker=1) as executor:
        assert list(executor.client.run(_frozen_objects).values()) == [0]
        found = list(executor.map(_parameters_plus, [0, 1], shared=model))
        assert found == [_parameters_plus(model, 0), _parameters_plus(model, 1)]
        assert min(executor.client.run(_frozen_objects).values()) > 50_000


def test_workers_import_torch_and_faiss_as_they_join_before_any_task():
    # While the client reads its input: not when the first task, waited for, gets there.
    # (A lambda travels by value: a function of this module would import it, and torch
    # with it, in the worker.)
    modules = {"torch", "faiss", "dnaembed.model.inference"}

    def wait_for_imports(executor):
        deadline = time.monotonic() + 60
        while not all(executor.client.run(lambda: modules <= set(sys.modules),
                                          on_error="ignore").values() or [False]):
            assert time.monotonic() < deadline, "the worker never imported them"
            time.sleep(0.2)

    with DaskExecutor(workers=1, threads_per_worker=1) as executor:
        wait_for_imports(executor)
        assert executor.traffic.tasks == 0 and not executor._shared
        # A worker that replaces a lost one imports them too.
        (pid,) = executor.client.run(os.getpid).values()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while pid in executor.client.run(os.getpid, on_error="ignore").values() or not (
                executor.client.nthreads()):
            assert time.monotonic() < deadline, "the worker was not replaced"
            time.sleep(0.2)
        wait_for_imports(executor)
        assert pid not in executor.client.run(os.getpid).values()


def test_a_process_freezes_its_long_lived_objects_once():
    # Run apart: freezing pytest's own objects would outlive this test.
    code = ("import gc; from dnaembed.log import freeze_long_lived as f; f(); "
            "first = gc.get_freeze_count(); kept = [[i] for i in range(10_000)]; f(); "
            "print(first, gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    first, second = map(int, out.stdout.split())
    assert first > 1_000 and second == first


def test_bad_input_on_a_local_cluster_is_a_clean_error(tmp_path, small_model):
    bad = tmp_path / "bad.fastq"
    bad.write_text("@r1\nACGT\n+\nIIII\n@r2\nACXT\n+\nIIII\n")
    out = tmp_path / "c.tsv"
    assert_clean_error(run_cli("cluster", str(bad), "-o", str(out), "-m", str(small_model),
                               "--workers", "1"), "bad.fastq: record 2 (r2): invalid character")
    assert not out.exists()


def test_an_unreachable_scheduler_is_a_clean_error(sim, small_model, tmp_path):
    proc = run_cli("cluster", f"{sim}.fastq.gz", "-o", str(tmp_path / "c.tsv"), "-m",
                   str(small_model), "--scheduler", f"tcp://127.0.0.1:{free_port()}")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "cannot use the Dask scheduler" in err
    assert not (tmp_path / "c.tsv").exists()


@contextlib.contextmanager
def _http_server():
    """A server on 127.0.0.1 that answers every connection as HTTP does, with a 400: its
    address (tcp://...)."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def answer() -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                conn, _ = listener.accept()
                with conn:
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    time.sleep(0.5)

    threading.Thread(target=answer, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_a_scheduler_address_that_is_not_dask_is_a_clean_error(sim, small_model, tmp_path):
    # Dask's client read the HTTP reply's text as the length of a frame, and the run
    # ended with "out of memory" (an allocation of exabytes); a server that answered
    # nothing, as the dashboard's port does, kept the run waiting for good.
    with _http_server() as address:
        proc = run_cli("cluster", f"{sim}.fastq.gz", "-o", str(tmp_path / "c.tsv"), "-m",
                       str(small_model), "--scheduler", address, timeout=60)
    err = assert_clean_error(proc, f"dnaembed: error: --scheduler {address}: its answer is "
                             "not Dask's", "is it the scheduler's port")
    assert "out of memory" not in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.tsv").exists()


@pytest.mark.parametrize("address", ["tcp://127.0.0.1", "http://127.0.0.1:8786", "inproc://x",
                                     "tcp://host:port", "tcp://127.0.0.1:99999",
                                     "tcp://127.0.0.1:0"])
def test_a_malformed_scheduler_address_is_a_usage_error(tmp_path, address):
    # Dask's parser raised a ValueError, reported as an internal error.
    proc = run_cli("run", "-", "-o", str(tmp_path), "--scheduler", address, stdin=b"")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert f"Invalid value for '--scheduler': '{address}' is not a scheduler's address" in err


def test_more_workers_than_threads_is_a_usage_error(tmp_path):
    # Each worker runs one thread at least: --workers 5 -t 3 ran five, silently.
    proc = run_cli("cluster", "-", "-o", str(tmp_path / "c.tsv"), "--workers", "5", "-t", "3",
                   stdin=b"")
    assert_clean_error(proc, "--workers 5 is more than --threads 3", code=2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["cluster", "run"])
def test_a_budget_too_small_is_refused_before_the_local_cluster_starts(tmp_path, command):
    # The budget was planned once the executor was there: a LocalCluster was started, and
    # logged its empty summary, before the one-line refusal.
    out = ["-o", str(tmp_path / ("c.tsv" if command == "cluster" else "out"))]
    proc = run_cli(command, "-", *out, "--workers", "2", "--memory", "1M", stdin=b"")
    err = assert_clean_error(proc, "--memory 1 MB is too small for partitions of 4,096 reads")
    assert "LocalCluster" not in err and len(err.splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


def peak_rss_of(args: list[str]) -> tuple[int, str]:
    """Run ``python -m dnaembed ARGS``; its peak resident memory (bytes) and its log.

    The peak is the program's own (``VmHWM``, read until it exits), not ``ru_maxrss``:
    a child spawned from this process counts this process's own peak there (Linux keeps
    it across the exec), and pytest's grows with the tests run before."""
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "dnaembed", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _high_water(proc.pid))
            time.sleep(0.01)
        log.seek(0)
        err = log.read().decode()
    assert proc.returncode == 0, err
    assert peak > 0, "no reading of the program's memory"
    return peak, err


def _high_water(pid: int) -> int:
    """Peak resident memory of the running program so far (0 before its exec, and once it
    has exited: until the exec the child still shares pytest's memory)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if b"-m\0dnaembed\0" not in cmdline.read():
                return 0
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def test_a_memory_budget_is_respected_and_does_not_change_the_output(sim, small_model, tmp_path):
    # The program and a model take ~320 MB (budget.PROCESS_BASE); the rest leaves room for
    # what the allocator holds on a busy machine (one run peaked at 527 MiB beside a benchmark).
    budget = 560 << 20
    common = ["cluster", f"{sim}.fastq.gz", "-m", str(small_model), "--partition-size", "256",
              "--tmpdir", str(tmp_path)]
    _, _ = peak_rss_of([*common, "-o", str(tmp_path / "free.tsv")])
    peak, log = peak_rss_of([*common, "-o", str(tmp_path / "budget.tsv"), "--memory", "560M"])
    assert peak <= budget, (peak, log)
    assert "memory budget 560 MB per process" in log and "partitions of about 256" in log
    assert (tmp_path / "free.tsv").read_bytes() == (tmp_path / "budget.tsv").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget.tsv", "free.tsv"]
    # A budget below what the reads need is refused before any work, with the figures.
    proc = run_cli(*common, "-o", str(tmp_path / "no.tsv"), "--memory", "100M")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "too small for partitions of 256 reads" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_local_cluster_under_a_small_budget_neither_pauses_nor_spills(sim, small_model,
                                                                        tmp_path):
    # Under 340M torch and the model take a worker past Dask's pause threshold (80%): both
    # workers paused with nothing to run and the run waited for good.
    common = ["cluster", f"{sim}.fastq.gz", "-m", str(small_model), "--partition-size", "256"]
    run_cli(*common, "-o", str(tmp_path / "one.tsv"), check=True)
    proc = run_cli(*common, "--workers", "2", "--memory", "340M", "-o", str(tmp_path / "two.tsv"),
                   timeout=150)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "memory budget 340 MB per process" in err
    assert "paused" not in err and "Pausing" not in err and "Unmanaged memory" not in err, err
    assert (tmp_path / "one.tsv").read_bytes() == (tmp_path / "two.tsv").read_bytes()


def _linker_state(linker) -> dict:
    roots, parity = linker.uf.labels()
    at = np.flatnonzero(roots == np.arange(len(roots)))
    arrays = {name: np.frombuffer(values, dtype=dtype)[at]
              for name, values, dtype in (("rep", linker.rep, np.int32),
                                          ("rep_parity", linker.rep_parity, np.int8),
                                          ("weight", linker.weight, np.float64),
                                          ("size", linker.uf.size, np.int32))}
    return {"roots": roots, "parity": parity, **arrays, "merges": linker.merges,
            "refusals": linker.refusals, "refused": linker.refused}


def test_components_linked_in_tasks_end_as_one_pass(local_cluster, monkeypatch):
    # Chains of noisy reads of 40 strands, either orientation, and pairs across strands
    # (which the guard refuses): linked by components, a few per task on two worker
    # processes, the linker ends in the state of one pass, refusals included.
    from dnaembed.cluster import link_tasks
    from dnaembed.cluster.candidates import CandidatePairs
    from dnaembed.cluster.graph import _GuardedLinker
    from dnaembed.cluster.threshold import Threshold
    from dnaembed.cluster.units import UnitSequences
    from dnaembed.encoding import decode_flat, encode_flat, reverse_complement
    from dnaembed.io.strings import PackedStrings
    from dnaembed.sim.channel import Channel, transmit

    rng = np.random.default_rng(12)
    strands = ["".join(rng.choice(list("ACGT"), 120)) for _ in range(40)]
    strand = np.repeat(np.arange(40), 12)
    channel = Channel(substitution=0.02, insertion=0.01, deletion=0.01)
    reads = decode_flat(*_transmitted([strands[s] for s in strand], channel, rng, encode_flat,
                                      transmit))
    flip = rng.random(len(reads)) < 0.5
    reads = [reverse_complement(r) if f else r for r, f in zip(reads, flip)]
    lo = rng.integers(0, len(reads), 3_000)
    hi = np.where(rng.random(3_000) < 0.9, lo - lo % 12 + rng.integers(0, 12, 3_000),
                  rng.integers(0, len(reads), 3_000))
    keep = lo < hi
    lo, hi = lo[keep], hi[keep]
    parity = (flip[lo] ^ flip[hi]).astype(np.int8)
    dist = rng.integers(0, 20, len(lo)).astype(np.int32)
    edges = CandidatePairs(lo, hi, parity, np.zeros(len(lo), np.float32))
    store = PackedStrings()
    store.append(reads)
    store.finish()
    seqs = UnitSequences(store, np.arange(len(reads)))
    threshold = Threshold(12, "test", reference_length=120)
    degree = rng.random(len(reads))
    weights = rng.integers(1, 3, len(reads))

    def fresh():
        return _GuardedLinker(seqs, seqs.reversed(), degree, weights, threshold, 1.5, True)

    one_pass = fresh()
    one_pass.link(edges, dist)
    monkeypatch.setattr(link_tasks, "PAIRS_PER_TASK", 100)
    in_tasks = fresh()
    link_tasks.link_in_tasks(in_tasks, edges, dist, local_cluster, seqs,
                             threshold=threshold, factor=1.5, guard=True)
    want, got = _linker_state(one_pass), _linker_state(in_tasks)
    assert want["refusals"] > 0 and want["merges"] > 300
    for key, value in want.items():
        assert (np.array_equal(got[key], value) if isinstance(value, np.ndarray)
                else got[key] == value), key


@pytest.mark.parametrize("seed", range(3))
def test_each_link_tasks_reads_are_its_pairs_reads_in_order(seed, monkeypatch):
    # One sort of the reads by task gives each task the reads of its pairs, increasing,
    # and each read its place among them, as a union and a search per task would; reads
    # in no pair are in no task.
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from dnaembed.cluster import link_tasks

    rng = np.random.default_rng(seed)
    n = 400
    # Groups of 6 reads at random places (the tasks' reads interleave); 60 in no pair.
    a = rng.integers(0, n - 60, 600)
    b = np.minimum(a - a % 6 + rng.integers(0, 6, 600), n - 61)
    place = rng.permutation(n)
    a, b = place[a[a != b]], place[b[a != b]]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    monkeypatch.setattr(link_tasks, "PAIRS_PER_TASK", 40)
    _, component = connected_components(
        coo_matrix((np.ones(len(lo), np.int8), (lo, hi)), shape=(n, n)), directed=False)
    by_component = np.argsort(component[lo], kind="stable")
    edge_component = component[lo][by_component]
    cuts = link_tasks._task_cuts(edge_component)
    reads, read_cuts, local = link_tasks._task_reads(component, edge_component, cuts)
    assert len(cuts) > 5
    assert sorted(reads.tolist()) == sorted(set(lo.tolist()) | set(hi.tolist()))
    for task in range(len(cuts) - 1):
        pick = by_component[cuts[task] : cuts[task + 1]]
        want = sorted(set(lo[pick].tolist()) | set(hi[pick].tolist()))
        assert reads[read_cuts[task] : read_cuts[task + 1]].tolist() == want
        assert local[lo[pick]].tolist() == [want.index(r) for r in lo[pick].tolist()]
        assert local[hi[pick]].tolist() == [want.index(r) for r in hi[pick].tolist()]


def _transmitted(seqs, channel, rng, encode_flat, transmit):
    out = transmit(*encode_flat(seqs), channel, rng)
    return out.codes, out.lengths
