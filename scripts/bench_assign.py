"""Assigning reads to partition cells: block size and numpy's BLAS threads.

Two effects measured side by side (``Partitioner.assign``, 64-d vectors of a
Gaussian mixture, cells fitted as the partitioned pipeline fits them):

* blocks of 8,192 reads (the earlier fixed block) against blocks of
  ``ASSIGN_ENTRIES`` distances, at the cells of 10^6 and 3 x 10^6 reads;
* two threads assigning side by side, each one chunk, with numpy's BLAS on
  its default threads (one per core) and on one thread, as tasks now set it;
* and, beside them, the CPU time of fitting the cells (faiss k-means on one
  thread, on the sample the pipeline takes: 64 reads per cell). Both grow with the
  cells, that is with the input: at 2,444 cells (10^7 reads) and beyond, they are
  what the partitioning costs (docs/scaling.md).

    python scripts/bench_assign.py --write-docs
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np
from benchlib import add_write_docs, finish
from threadpoolctl import threadpool_limits

import dnaembed.cluster.partition as partition

READS = 65_536


def vectors(n: int, rng) -> np.ndarray:
    """A mixture of tight groups, as reads of strands are."""
    centres = rng.standard_normal((n // 10 + 1, 64))
    return (centres[rng.integers(0, len(centres), n)]
            + 0.5 * rng.standard_normal((n, 64))).astype(np.float32)


def cpu_per_read(part, y: np.ndarray, entries: int, repeats: int) -> float:
    """Median CPU µs per read of ``assign`` with blocks of ``entries`` distances."""
    partition.ASSIGN_ENTRIES = entries
    times = []
    for _ in range(repeats):
        start = time.process_time()
        part.assign(y)
        times.append(time.process_time() - start)
    return 1e6 * statistics.median(times) / len(y)


def side_by_side(part, y: np.ndarray, repeats: int) -> float:
    """Median wall seconds for two threads assigning half of ``y`` each."""
    halves = np.array_split(y, 2)
    times = []
    for _ in range(repeats):
        threads = [threading.Thread(target=part.assign, args=(h,)) for h in halves]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, nargs="+", default=[245, 733, 2444])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    add_write_docs(p, "Assigning reads to cells")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    y = vectors(max(READS, 64 * max(args.cells)), rng)
    default = partition.ASSIGN_ENTRIES
    lines = ["| cells | blocks of 8,192 reads: CPU µs/read | blocks of "
             f"{default:,} distances: CPU µs/read | two threads, BLAS default: s | "
             "two threads, BLAS 1: s | fitting the cells: CPU s |",
             "|---:|---:|---:|---:|---:|---:|"]
    print(lines[0] + "\n" + lines[1], flush=True)
    for cells in args.cells:
        started = time.process_time()
        part = partition.fit_partitioner(y[: 64 * cells], cells=cells, search_dim=0,
                                         margin=0.5, max_cells=4, seed=args.seed)
        fit = time.process_time() - started
        with threadpool_limits(1, user_api="blas"):
            old = cpu_per_read(part, y[:READS], 8192 * cells, args.repeats)
            new = cpu_per_read(part, y[:READS], default, args.repeats)
        partition.ASSIGN_ENTRIES = default
        with threadpool_limits(None, user_api="blas"):
            many = side_by_side(part, y[:READS], args.repeats)
        with threadpool_limits(1, user_api="blas"):
            one = side_by_side(part, y[:READS], args.repeats)
        lines.append(f"| {cells} | {old:.1f} | {new:.1f} | {many:.2f} | {one:.2f} | {fit:.1f} |")
        print(lines[-1], flush=True)
    finish(args.write_docs, f"{READS:,} vectors, median of {args.repeats}.\n\n"
           + "\n".join(lines))


if __name__ == "__main__":
    main()
