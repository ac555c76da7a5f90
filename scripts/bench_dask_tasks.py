#!/usr/bin/env python
"""What a task costs the client process of a LocalCluster: CPU per task and per MB sent.

A LocalCluster's scheduler and nannies run in the client's process, beside the client
itself, so every task's submission, scheduling, transfer and result costs that process
CPU, which on 2 cores is taken from the workers. This starts a LocalCluster of two
workers (1 thread each, on 127.0.0.1) through ``dnaembed.execute.dask.DaskExecutor``,
as ``dnaembed cluster --workers 2`` does, and maps ``--tasks`` tasks that do almost
nothing over it, each carrying a payload of ``--sizes`` bytes (a uint8 array) and
returning an eighth of it. It prints the client process's CPU time (user and system)
per task, and the tasks per second, median of ``--repeats`` passes per size.

    python scripts/bench_dask_tasks.py --write-docs
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from benchlib import add_write_docs, check_at_least, finish

MB = 1 << 20


def _eighth(payload: np.ndarray) -> np.ndarray:
    """The task: next to nothing, a result an eighth of its payload's size."""
    return np.zeros(len(payload) // 8, dtype=np.uint8)


def one_pass(executor, tasks: int, size: int) -> tuple[float, float]:
    """(client CPU seconds, wall seconds) of ``tasks`` tasks of ``size`` bytes each."""
    payloads = (np.ones(size, np.uint8) for _ in range(tasks))
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in executor.map(_eighth, payloads, desc="tasks"):
        pass
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    from dnaembed.execute.dask import DaskExecutor
    from dnaembed.log import configure

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=500)
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 4 * MB])
    p.add_argument("--repeats", type=int, default=3)
    add_write_docs(p, "What a task costs a LocalCluster's client process")
    args = p.parse_args()
    check_at_least(p, args, {"tasks": 1, "repeats": 1, "sizes": 1})
    configure(quiet=True)  # no progress bars among the figures
    lines = ["| payload bytes | tasks | client process CPU ms/task | tasks/s |",
             "|---:|---:|---:|---:|"]
    with DaskExecutor(workers=2) as executor:
        one_pass(executor, 50, 1_000)  # the workers' imports and first tasks, not timed
        for size in args.sizes:
            runs = [one_pass(executor, args.tasks, size) for _ in range(args.repeats)]
            cpu = statistics.median(c for c, _ in runs)
            wall = statistics.median(w for _, w in runs)
            lines.append(f"| {size:,} | {args.tasks:,} | {1e3 * cpu / args.tasks:.1f} | "
                         f"{args.tasks / wall:.0f} |")
            print(lines[-1], flush=True)
    finish(args.write_docs, f"Median of {args.repeats} passes per size.\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
