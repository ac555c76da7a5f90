#!/usr/bin/env python
"""Benchmark partitioned clustering at scale: time, peak memory of every process, A_0.9.

The sets are those of ``bench_cluster.py --scaling``: the nanopore preset, 150 nt,
coverage 10 (negative binomial), one set per size, simulated once into --workdir
and reused. Each run is ``dnaembed cluster`` in a subprocess whose whole process
tree (the client, and the Dask workers where there are any) is sampled for its
peak resident memory (``VmHWM``), scored against the truth:

* every size of --sizes in one process (``-t`` threads), --repeat times, the runs
  of the sizes interleaved; the ratio between sizes is that of their median runs;
* --budget-size in one process under ``--memory`` (--budget), --budget-repeat times,
  each after a run of every size of --sizes: its time per read against the largest
  size's, as the ratio of their median runs (and run by run);
* --dask-size on a LocalCluster of 1 worker (1 thread) and of 2 workers (1 thread
  each), --dask-repeat times, interleaved: the speed-up of a second worker, as the
  ratio of their median runs;
* --identity-size with a ``dask scheduler`` and two ``dask worker`` processes on
  127.0.0.1, compared byte for byte with the one-process output.

It prints one table, a table of stage times, the derived ratios (the targets of
the partitioned clustering issue) and the projection to 10^8 and 10^9 reads; with
--write-docs the tables go to docs/benchmarks.md and the projection to
docs/scaling.md. On a machine of many cores or a GPU: --device, -t via --threads,
--lanes (each set simulated as lane files side by side, clustered as one run), and
--timeout, past which a run is stopped and reported with the stages it reached.

    flock /tmp/dnaembed-bench.lock python scripts/bench_scale.py --model M --write-docs
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchlib import (
    ROOT,
    add_write_docs,
    check_at_least,
    cpu_description,
    finish,
    gpu_suffix,
    write_section,
)

MIB = 1 << 20


class TreeSampler:
    """Peak resident memory (VmHWM) of a process and of all its descendants, by pid."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        self.root, self.interval = root, interval
        self.peaks: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _children(self) -> dict[int, int]:
        parents = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    parents[int(entry.name)] = int(fields[1])
                except (OSError, IndexError, ValueError):
                    continue
        return parents

    def _tree(self) -> list[int]:
        parents, tree, frontier = self._children(), [self.root], [self.root]
        while frontier:
            frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
            tree += frontier
        return tree

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._tree():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                match = re.search(r"VmHWM:\s+(\d+) kB", status)
                if match:
                    peak = int(match.group(1)) * 1024
                    self.peaks[pid] = (cmd, max(peak, self.peaks.get(pid, ("", 0))[1]))
            self._stop.wait(self.interval)

    def stop(self) -> dict[int, tuple[str, int]]:
        self._stop.set()
        self._thread.join()
        return self.peaks


def run_cluster(args: list[str], timeout: float) -> dict:
    """``dnaembed cluster ARGS`` with its process tree sampled; wall time, peaks, log.

    A run still going at ``timeout`` seconds is killed (its whole process group) and
    reported as stopped, with the times of the stages it finished (:func:`stage_marks`).
    """
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    started = datetime.datetime.now()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dnaembed", "cluster", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    sampler = TreeSampler(proc.pid)
    stopped = False
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        stopped = True
    finally:
        peaks = sampler.stop()
    seconds = time.perf_counter() - start
    client = peaks.get(proc.pid, ("", 0))[1]
    workers = [peak for pid, (cmd, peak) in peaks.items()
               if pid != proc.pid and "resource_tracker" not in cmd]
    if stopped:
        return {"error": f"stopped at {timeout:.0f} s (--timeout)", "log": err,
                "marks": stage_marks(err, started), "client": client}
    if proc.returncode != 0:
        return {"error": err.strip().splitlines()[-1] if err.strip() else "failed", "log": err}
    return {"seconds": seconds, "client": client, "workers": workers, "log": err}


#: Log lines that end a stage: read and dedupe; the partitioning and the embedding; the
#: first round's search and check (the threshold follows it).
MILESTONES = (("read", r"dnaembed: [\d,]+ reads in [\d,]+ files?,"),
              ("embed", r"dnaembed: [\d,]+ distinct reads in [\d,]+ partitions"),
              ("search", r"dnaembed: max distance \d+"))


def stage_marks(log: str, started: datetime.datetime) -> dict[str, float]:
    """Seconds from the start to each milestone the log reached (its HH:MM:SS stamps)."""
    marks = {}
    for name, pattern in MILESTONES:
        match = re.search(rf"^(\d\d):(\d\d):(\d\d) {pattern}", log, re.M)
        if not match:
            break
        hour, minute, second = map(int, match.groups())
        at = started.replace(hour=hour, minute=minute, second=second, microsecond=0)
        if at < started - datetime.timedelta(seconds=1):  # past midnight
            at += datetime.timedelta(days=1)
        marks[name] = max(0.0, (at - started).total_seconds())
    return marks


def parse_log(log: str) -> dict:
    """Stage times, task CPU times, partitions and the traffic, from a run's log."""
    out: dict = {}
    match = re.search(r"reads in [\d,]+ clusters \((.*)\)\s*$", log, re.M)
    if match:
        out["stages"] = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+)s", match.group(1))}
    match = re.search(r"task CPU time: (.*)$", log, re.M)
    if match:
        out["cpu"] = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+)s", match.group(1))}
    match = re.search(r"task CPU time by kind: (.*)$", log, re.M)
    if match:
        out["cpu_by_kind"] = {k: float(v) for k, v in
                              re.findall(r"([a-z][a-z0-9 -]*?) ([\d.]+)s", match.group(1))}
    match = re.search(r"this thread's CPU time by stage \(the tasks aside\): (.*)$", log, re.M)
    if match:
        out["own_cpu"] = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+)s", match.group(1))}
    match = re.search(r"this process: ([\d.]+)s", log)
    if match:
        out["client_cpu"] = float(match.group(1))
    match = re.search(r"in ([\d,]+) partitions \(each read in ([\d.]+)", log)
    if match:
        out["partitions"], out["copies"] = int(match.group(1).replace(",", "")), float(
            match.group(2))
    match = re.search(r"([\d,.]+) MB of arrays to the workers, ([\d,.]+) MB back", log)
    if match:
        out["traffic_mb"] = tuple(float(x.replace(",", "")) for x in match.groups())
    return out


def ensure_set(workdir: Path, reads: int, seed: int, lanes: int = 1) -> Path:
    """The simulated set of ``reads`` reads (as bench_cluster's scaling series), made once;
    with ``lanes`` > 1, made in that many lanes side by side (:func:`simulate_lanes`)."""
    from bench_cluster import simulate_set

    if lanes > 1:
        return simulate_lanes(workdir, reads, seed, lanes)
    prefix = workdir / f"scale-{reads}"
    if not Path(f"{prefix}.fastq.gz").exists():
        print(f"# simulating {reads:,} reads into {prefix}", flush=True)
        simulate_set(prefix, "nanopore", max(1, reads // 10), 150, 10.0, False, seed)
    return prefix


def simulate_lanes(workdir: Path, reads: int, seed: int, lanes: int) -> Path:
    """A set of ``reads`` reads as ``lanes`` files PREFIX.laneNN.fastq.gz, one process each,
    with one PREFIX.truth.tsv: each lane its own strands (ids marked with the lane), so that
    a set of 10^7 reads takes a minute on a machine of many cores, not many minutes on one.
    Not the same reads as the one-lane set of that size: another set, of the same kind."""
    prefix = workdir / f"scale-{reads}-{lanes}lanes"
    truth = Path(f"{prefix}.truth.tsv")
    if truth.exists():
        return prefix
    print(f"# simulating {reads:,} reads in {lanes} lanes into {prefix}", flush=True)
    strands = max(1, reads // 10 // lanes)
    with ProcessPoolExecutor(min(lanes, os.cpu_count() or 1)) as pool:
        list(pool.map(simulate_lane, [str(prefix)] * lanes, range(lanes), [strands] * lanes,
                      [seed] * lanes))
    tmp = truth.with_suffix(".tsv.tmp")
    with open(tmp, "w") as out:
        out.write("#read_id\tstrand_id\torientation\n")
        for lane in range(lanes):
            part = Path(f"{prefix}.lane{lane:02d}.truth.part")
            out.write(part.read_text())
            part.unlink()
    os.replace(tmp, truth)  # last: the set is whole once its truth is there
    return prefix


def simulate_lane(prefix: str, lane: int, strands: int, seed: int) -> None:
    """One lane of :func:`simulate_lanes`: the nanopore preset, 150 nt, coverage 10."""
    import numpy as np

    from dnaembed.io.sequences import write_sequences
    from dnaembed.sim.channel import get_preset
    from dnaembed.sim.coverage import Coverage
    from dnaembed.sim.simulate import simulate_reads
    from dnaembed.sim.strands import random_strands

    seqs = random_strands(strands, 150, np.random.default_rng([seed, lane, 1]))
    ids = [f"L{lane:02d}strand{i:07d}" for i in range(strands)]
    coverage = Coverage(model="negbin", mean=10.0, dispersion=5.0)
    sim = simulate_reads(seqs, get_preset("nanopore"), coverage, seed=seed * 1_000 + lane,
                         strand_ids=ids, id_prefix=f"L{lane:02d}read")
    write_sequences(f"{prefix}.lane{lane:02d}.fastq.gz", sim.ids, sim.seqs, sim.quals)
    Path(f"{prefix}.lane{lane:02d}.truth.part").write_text(
        "".join("\t".join(row) + "\n" for row in sim.truth_rows()))


def set_files(prefix: Path) -> list[str]:
    """The read files of a set: PREFIX.fastq.gz, or its lanes."""
    single = Path(f"{prefix}.fastq.gz")
    if single.exists():
        return [str(single)]
    return sorted(str(p) for p in prefix.parent.glob(f"{prefix.name}.lane*.fastq.gz"))


def score(output: Path, truth: Path) -> float:
    from dnaembed.evaluate.clustering import evaluate_files

    return evaluate_files(output, truth)["A_0.9"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dask_processes(workdir: Path) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and two single-threaded workers on 127.0.0.1, as separate processes."""
    dask = str(Path(sys.executable).with_name("dask"))
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], **quiet)]
    for _ in range(2):
        procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1",
                                       "--no-dashboard", "--local-directory",
                                       str(workdir / "dask-workers")], **quiet))
    return address, procs


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def one_run(name: str, prefix: Path, args, extra: list[str], rows: list[dict],
            tag: str = "") -> dict:
    """Run, score, record and print one row."""
    out = Path(args.workdir) / f"out-{prefix.name}{tag}.tsv"
    # The run's own tmpdir: a run stopped at --timeout is killed and leaves its spill there.
    tmpdir = Path(args.workdir) / f"tmp-{out.stem}"
    tmpdir.mkdir(exist_ok=True)
    cmd = [*set_files(prefix), "-o", str(out), "--seed", str(args.seed), "--tmpdir",
           str(tmpdir), *extra]
    if args.model:
        cmd += ["-m", args.model]
    if args.device:
        cmd += ["--device", args.device]
    try:
        res = run_cluster(cmd, args.timeout)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    # The run's log beside its output, for the stage timings behind the row.
    out.with_suffix(".log").write_text(res["log"])
    reads = int(prefix.name.split("-")[1])
    row = {"name": name, "reads": reads, "output": out, **res}
    if "error" not in res:
        scored = args.score_max is None or reads <= args.score_max
        row.update(parse_log(res["log"]),
                   a09=score(out, Path(f"{prefix}.truth.tsv")) if scored else None)
    rows.append(row)
    print(table([row], header=False), flush=True)
    return row


def repeated_sizes(sizes: list[int], args, threads: list[str], rows: list[dict],
                   budget: bool) -> dict[str, dict]:
    """Each size in one process, ``--repeat`` times, and (``budget``) the budget's size
    ``--budget-repeat`` times, all interleaved (the machine's speed drifts); "small",
    "large" and "budget": the first and the last size's and the budget's median-time
    runs, and "pairs": each attempt's largest size and budget run, side by side."""
    runs: dict[int, list[dict]] = {size: [] for size in sizes}
    budget_runs: list[dict] = []
    attempts = max(args.repeat, args.budget_repeat if budget else 0)
    for attempt in range(attempts):
        if attempt < args.repeat:
            name, tag = numbered("one process", "", attempt, args.repeat)
            for size in sizes:
                runs[size].append(one_run(name, ensure_set(Path(args.workdir), size,
                                                           args.seed, args.lanes),
                                          args, threads, rows, tag=tag))
        if budget and attempt < args.budget_repeat:
            prefix = ensure_set(Path(args.workdir), args.budget_size, args.seed, args.lanes)
            name, tag = numbered(f"one process, --memory {args.budget}", "-budget", attempt,
                                 args.budget_repeat)
            budget_runs.append(one_run(name, prefix, args, [*threads, "--memory", args.budget],
                                       rows, tag=tag))
    out = {}
    if sizes:
        median = {size: median_run(r) for size, r in runs.items()}
        out.update(small=median[sizes[0]], large=median[sizes[-1]])
    if budget_runs:
        out.update(budget=median_run(budget_runs),
                   pairs=list(zip(runs[sizes[-1]], budget_runs)) if sizes else [])
    return out


def numbered(name: str, tag: str, attempt: int, count: int) -> tuple[str, str]:
    """A run's name and output tag: numbered when there are several."""
    if count == 1:
        return name, tag
    return f"{name}, run {attempt + 1}", f"{tag}-run{attempt + 1}"


def median_run(runs: list[dict]) -> dict:
    """The run of median time (the later of the two middle ones for an even count)."""
    return sorted(runs, key=lambda row: row.get("seconds", float("inf")))[len(runs) // 2]


def dask_runs(prefix: Path, args, rows: list[dict]) -> dict[str, dict]:
    """A LocalCluster of 1 worker, then of 2, ``--dask-repeat`` times, interleaved (the
    machine's speed drifts); "dask1" and "dask2": each one's median-time run."""
    runs: dict[int, list[dict]] = {1: [], 2: []}
    for attempt in range(args.dask_repeat):
        for workers in (1, 2):
            name, tag = numbered(
                f"LocalCluster, {workers} worker{'s' if workers > 1 else ''} x 1 thread",
                f"-dask{workers}", attempt, args.dask_repeat)
            runs[workers].append(one_run(name, prefix, args,
                                         ["--workers", str(workers), "-t", str(workers)],
                                         rows, tag=tag))
    return {f"dask{workers}": median_run(r) for workers, r in runs.items()}


def a09(row: dict) -> str:
    return "not scored" if row.get("a09") is None else f"{row['a09']:.4f}"


def table(rows: list[dict], header: bool = True) -> str:
    lines = ["| run | reads | time s | µs/read | peak client MiB | peak workers MiB | A_0.9 | "
             "partitions (copies/read) |", "|---|---:|---:|---:|---:|---:|---:|---:|"] \
        if header else []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['reads']:,} | {r['error']} |")
            continue
        workers = ", ".join(f"{w / MIB:,.0f}" for w in sorted(r["workers"])) or "-"
        parts = f"{r.get('partitions', 0):,} ({r.get('copies', 0):.2f})"
        lines.append(f"| {r['name']} | {r['reads']:,} | {r['seconds']:.1f} | "
                     f"{1e6 * r['seconds'] / r['reads']:.0f} | {r['client'] / MIB:,.0f} | "
                     f"{workers} | {a09(r)} | {parts} |")
    return "\n".join(lines)


#: Stage groups of the stage table: the log's stages (``cluster``'s last line) in each.
STAGE_GROUPS = (("read", ("model", "read", "dedupe")), ("embed", ("partition", "embed")),
                ("search", ("search",)))


def stage_table(rows: list[dict]) -> str:
    """Wall seconds of reading, embedding (with the partitioner), the search and check
    (round 1 and rounds 2..), and the rest; a stopped run's from its log's time stamps (to
    the second), its search round 1's alone."""
    lines = ["| run | reads | read s | partition + embed s | embedded reads/s | "
             "search + check s (round 1; in a finished run, rounds 2.. too) | the rest s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "stages" in r:
            done = {group: sum(r["stages"].get(k, 0.0) for k in keys)
                    for group, keys in STAGE_GROUPS}
            rest = f"{r['seconds'] - sum(done.values()):.1f}"
        elif r.get("marks"):
            ends = [r["marks"].get(group) for group, _ in STAGE_GROUPS]
            done = {group: end - before for (group, _), end, before in
                    zip(STAGE_GROUPS, ends, [0.0, *ends]) if end is not None and
                    before is not None}
            rest = "stopped"
        else:
            continue
        cells = [f"{done[g]:.1f}" if g in done else "-" for g, _ in STAGE_GROUPS]
        rate = f"{r['reads'] / done['embed']:,.0f}" if done.get("embed") else "-"
        lines.append(f"| {r['name']} | {r['reads']:,} | {cells[0]} | {cells[1]} | {rate} | "
                     f"{cells[2]} | {rest} |")
    return "\n".join(lines)


def pair_ratios(pairs: list[tuple[dict, dict]]) -> str:
    """Time per read of the budget's run against the largest size's run just before it,
    for each attempt (how far the machine's drift moves the ratio)."""
    ratios = [(b["seconds"] / b["reads"]) / (s["seconds"] / s["reads"]) for s, b in pairs
              if "error" not in s and "error" not in b]
    if len(ratios) < 2:
        return ""
    return "; run by run " + ", ".join(f"{r:.2f}x" for r in ratios)


def derived(rows: dict[str, dict], args) -> list[str]:
    """The targets: ratios measured side by side in this run."""
    out = []
    small, large = rows.get("small"), rows.get("large")
    if small and large and small is not large and "error" not in small and "error" not in large:
        ratio = large["seconds"] / small["seconds"]
        factor = large["reads"] / small["reads"]
        out.append(f"- {large['reads']:,} / {small['reads']:,} reads ({factor:g}x): time "
                   f"{ratio:.2f}x (target <= 10.5x), peak {large['client'] / MIB:,.0f} MiB "
                   f"(target <= 2,048), A_0.9 {a09(large)} (target >= 0.999)")
    budget = rows.get("budget")
    if budget and large and "error" not in budget and "error" not in large:
        per = budget["seconds"] / budget["reads"] / (large["seconds"] / large["reads"])
        out.append(f"- {budget['reads']:,} reads under --memory {args.budget}: peak "
                   f"{budget['client'] / MIB:,.0f} MiB, A_0.9 {a09(budget)} (target >= "
                   f"0.999), time per read {per:.2f}x that of {large['reads']:,} (target <= 1.10)"
                   + pair_ratios(rows.get("pairs", [])))
    one, two = rows.get("dask1"), rows.get("dask2")
    if one and two and "error" not in one and "error" not in two:
        out.append(f"- LocalCluster at {two['reads']:,} reads: 2 workers "
                   f"{one['seconds'] / two['seconds']:.2f}x faster than 1 (target >= 1.7)")
        cpu = [(sum((r.get("cpu_by_kind") or r.get("cpu", {})).values()),
                r.get("client_cpu", float("nan"))) for r in (one, two)]
        (task1, client1), (task2, client2) = cpu
        out.append(f"- CPU seconds, 1 worker / 2 workers: tasks {task1:.0f} / {task2:.0f}, "
                   f"client process {client1:.0f} / {client2:.0f} (its serial stages, feeding "
                   "the tasks and taking their results)")
    same = rows.get("identity")
    if same is not None:
        out.append(f"- `dask scheduler` + 2 `dask worker` processes on 127.0.0.1: output "
                   f"{'byte-identical to' if same else 'DIFFERENT from'} the one-process path")
    return out


#: Task kinds of the stages that a runner of worker processes runs as tasks (the link and
#: the rescue) and the one-process run does here.
CLIENT_STAGE_TASKS = ("linking", "counting k-mers", "k-mer votes", "cluster profiles",
                      "rescue alignments")


def projection(rows: dict[str, dict]) -> str:
    """Per-read costs from the largest one-process run and the Dask run; 10^8 and 10^9."""
    base = rows.get("budget") or rows.get("large")
    if not base or "error" in base or "cpu" not in base:
        return "(no run to project from)"
    n = base["reads"]
    stages = base.get("stages", {})
    where = {k: "tasks (workers)" for k in base["cpu"]}
    tasks = {k: v / n for k, v in base["cpu"].items()}
    serial_stages = ("read", "dedupe", "partition", "link", "split", "rescue", "write")
    serial = {k: stages.get(k, 0.0) / n for k in serial_stages}
    dask = rows.get("dask2")
    if dask and "own_cpu" in dask and "cpu_by_kind" in dask:
        # On workers, the link and the rescue are tasks too: their tasks' CPU and what this
        # process did itself in those stages, from the 10^6 LocalCluster run.
        per = 1 / dask["reads"]
        for kind in CLIENT_STAGE_TASKS:
            if kind in dask["cpu_by_kind"]:
                tasks[kind] = dask["cpu_by_kind"][kind] * per
                where[kind] = "tasks (workers), 10^6 LocalCluster run"
        for stage in ("link", "rescue"):
            serial[stage] = dask["own_cpu"].get(stage, 0.0) * per
    lines = ["| stage | where | CPU µs per read |", "|---|---|---:|"]
    for k, v in tasks.items():
        lines.append(f"| {k} | {where[k]} | {1e6 * v:.1f} |")
    for k, v in serial.items():
        own = dask and "own_cpu" in dask and k in ("link", "rescue")
        lines.append(f"| {k} | client{', 10^6 LocalCluster run' if own else ', one thread'} | "
                     f"{1e6 * v:.1f} |")
    task_s, serial_s = sum(tasks.values()), sum(serial.values())
    client_per_read = max(base["client"] - 300 * MIB, 0) / n
    moved = (sum(dask["traffic_mb"]) * MIB / dask["reads"]) if dask and "traffic_mb" in dask \
        else float("nan")
    worker_peak = max(dask["workers"]) / MIB if dask and dask.get("workers") else float("nan")
    text = ["\n".join(lines), "",
            f"Bytes per read between client and workers (arrays in tasks and results, the "
            f"LocalCluster run): {moved:,.0f}. Peak memory of a worker: {worker_peak:,.0f} MiB. "
            f"Client memory per read beyond its ~300 MiB base: {client_per_read:,.0f} bytes.",
            "", "| reads | task core-hours | 100 workers, hours | client serial hours | "
            "client memory GB | bytes moved GB |", "|---:|---:|---:|---:|---:|---:|"]
    for reads in (10**8, 10**9):
        core_h = task_s * reads / 3600
        text.append(f"| {reads:.0e} | {core_h:,.0f} | {core_h / 100:,.1f} | "
                    f"{serial_s * reads / 3600:,.1f} | {client_per_read * reads / 1e9:,.0f} | "
                    f"{moved * reads / 1e9:,.0f} |")
    return "\n".join(text)


def pairs_lost(prefixes: list[Path], model_path: str | None, seed: int) -> str:
    """Of the true same-strand pairs of each set, the fraction whose reads share no partition
    of round 1 (neither read's nearest cell holds the other), per margin; the copies per
    read, and the reads whose cells reached the cap (``max_cells``), past which the margin
    no longer holds."""
    from dnaembed.cluster.partitioned import PartitionPlan
    from dnaembed.log import set_threads
    from dnaembed.model.checkpoint import load_search_model

    set_threads(0)
    model = load_search_model(model_path, "graph").model  # cluster's own search encoder
    plan = PartitionPlan()
    lines = ["| reads | cells | same-strand pairs | margin | copies per read | reads at the cap "
             f"of {plan.max_cells} cells | pairs sharing no partition |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for prefix in prefixes:
        lines += _pairs_lost_rows(prefix, model, plan, seed)
    return (f"Cells of about {plan.partition_size:,} reads, fitted as round 1 fits them; pairs: "
            "consecutive reads of each strand (a chain).\n\n" + "\n".join(lines))


def _pairs_lost_rows(prefix: Path, model, plan, seed: int) -> list[str]:
    import numpy as np

    from dnaembed.cluster.partition import fit_partitioner, pairs_sharing_a_partition
    from dnaembed.io.sequences import read_sequences
    from dnaembed.io.tables import read_labels
    from dnaembed.model.inference import embed_sequences

    reads = read_sequences(f"{prefix}.fastq.gz")
    truth = read_labels(f"{prefix}.truth.tsv")
    vectors = embed_sequences(model, reads.seqs)
    strand = np.array([truth.get(i, "") for i in reads.ids])
    order = np.argsort(strand, kind="stable")
    same = np.flatnonzero((strand[order][1:] == strand[order][:-1]) & (strand[order][1:] != ""))
    lo, hi = order[same], order[same + 1]  # consecutive reads of a strand: a chain of pairs
    rng = np.random.default_rng([seed, 21])
    cells = max(1, -(-len(reads) // plan.partition_size))
    sample = np.sort(rng.choice(len(reads), max(plan.sample_size, 64 * cells), replace=False))
    rows = []
    for margin in (0.0, 0.25, plan.margin, 1.0):
        part = fit_partitioner(vectors[sample], cells=cells, search_dim=plan.search_dim,
                               margin=margin, max_cells=plan.max_cells, seed=seed)
        assigned = part.assign(part.project(vectors))
        lost = 1 - pairs_sharing_a_partition(lo, hi, assigned).mean()
        copies = (assigned >= 0).sum() / len(reads)
        capped = (assigned[:, -1] >= 0).mean()
        rows.append(f"| {len(reads):,} | {cells:,} | {len(lo):,} | {margin:g} | {copies:.2f} | "
                    f"{capped:.3f} | {lost:.4f} |")
    return rows


def identity_run(args, workdir: Path, rows: list[dict], threads: list[str]) -> bool:
    """A scheduler and two workers as processes: the one-process output, byte for byte?"""
    prefix = ensure_set(workdir, args.identity_size, args.seed, args.lanes)
    here = next((r for r in rows if r["reads"] == args.identity_size
                 and r["name"] == "one process"), None) or one_run(
        "one process", prefix, args, threads, rows)
    address, procs = start_dask_processes(workdir)
    try:
        there = one_run("dask scheduler + 2 dask workers", prefix, args,
                        ["--scheduler", address], rows, tag="-scheduler")
    finally:
        stop(procs)
    return ("error" not in there and "error" not in here
            and Path(here["output"]).read_bytes() == Path(there["output"]).read_bytes())


def read_counts(text: str) -> list[int]:
    """``100000,1e6`` -> [100000, 1000000]; argparse's usage error for anything else."""
    try:
        counts = [int(float(x)) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not read counts: {text!r}") from None
    if any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError(f"read counts must be at least 1: {text!r}")
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=read_counts, default="100000,1000000",
                   help="one-process runs (read counts)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each size of --sizes (the median run counts)")
    p.add_argument("--budget-size", type=int, default=3_000_000)
    p.add_argument("--budget", default="2G")
    p.add_argument("--budget-repeat", type=int, default=1,
                   help="runs under the budget, each after a run of every size of --sizes "
                        "(the median run counts; each pair's ratio is printed too)")
    p.add_argument("--dask-size", type=int, default=1_000_000)
    p.add_argument("--dask-repeat", type=int, default=1,
                   help="runs of each LocalCluster (1 and 2 workers), interleaved; the "
                        "median run of each counts")
    p.add_argument("--identity-size", type=int, default=100_000)
    p.add_argument("--pairs-sizes", type=read_counts, default="",
                   help="sets (read counts) whose same-strand pairs are checked against the "
                        "partitions (default: the first of --sizes)")
    p.add_argument("--skip", default="",
                   help="comma-separated: budget, dask, identity, pairs")
    p.add_argument("--model", help="model file (default: cluster's default)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=str(ROOT.parent / "scratch" / "bench_scale"))
    p.add_argument("--timeout", type=float, default=2400,
                   help="seconds a run may take; a run still going is stopped and reported "
                        "with the stages it finished")
    p.add_argument("--score-max", type=int,
                   help="score only sets of at most this many reads (scoring 10^7 reads "
                        "takes minutes)")
    p.add_argument("--device", help="cluster's --device (default: cluster's own, auto)")
    p.add_argument("--lanes", type=int, default=1,
                   help="simulate each set as this many lane files, side by side (a set in "
                        "lanes is another set than the one-file set of its size)")
    add_write_docs(p, "Partitioned clustering at scale")
    args = p.parse_args()
    check_at_least(p, args, {"repeat": 1, "budget_repeat": 1, "dask_repeat": 1, "lanes": 1})
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    # The pairs' check reads one file: a set in lanes has none.
    skip = set(args.skip.split(",")) | ({"pairs"} if args.lanes > 1 else set())
    print(f"# bench_scale: {cpu_description()}{gpu_suffix()}; workdir {workdir}", flush=True)
    print(table([]), flush=True)
    rows: list[dict] = []
    named: dict[str, dict] = {}
    threads = ["-t", str(args.threads)]
    sizes = args.sizes
    named.update(repeated_sizes(sizes, args, threads, rows, "budget" not in skip))
    if "dask" not in skip:
        prefix = ensure_set(workdir, args.dask_size, args.seed, args.lanes)
        named.update(dask_runs(prefix, args, rows))
    if "identity" not in skip:
        named["identity"] = identity_run(args, workdir, rows, threads)
    body = "\n\n".join([table(rows), stage_table(rows), "\n".join(derived(named, args))])
    pair_sizes = args.pairs_sizes or sizes[:1]
    lost = "" if "pairs" in skip or not pair_sizes else pairs_lost(
        [ensure_set(workdir, size, args.seed) for size in pair_sizes], args.model, args.seed)
    print("\n" + body + "\n\n" + projection(named) + "\n\n" + lost)
    finish(args.write_docs, body if rows else lost)  # a run of the pairs' check alone: that
    if not args.write_docs:
        return
    scaling = ROOT / "docs" / "scaling.md"
    if lost:
        write_section("Pairs that share no partition (bench_scale)", lost, path=scaling)
    # The projection's bytes moved and worker memory come from the two-worker run: a run
    # without it (--skip dask) leaves the docs' projection as it was, and so does one whose
    # one-process runs are smaller than it (a --dask-repeat table over 10^5 reads would
    # replace a projection from 3 x 10^6 by one from 10^5).
    base, dask = named.get("budget") or named.get("large"), named.get("dask2")
    if base and dask and base.get("reads", 0) >= dask.get("reads", 0):
        write_section("Projection from the measured figures (bench_scale)", projection(named),
                      path=scaling)


if __name__ == "__main__":
    main()
