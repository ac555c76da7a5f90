"""Assigning reads to partition cells, and fitting the cells, as the cells grow.

Both grow with the number of cells, that is with the input (docs/scaling.md).
Measured side by side on 64-d vectors of a Gaussian mixture, with cells fitted
as the partitioned pipeline fits them (64 sample vectors a cell):

* ``Partitioner.assign`` against the assignment it replaced, which divided out
  every read's distance to every cell's boundary and took the closest
  ``max_cells`` times over all of them (``every_boundary`` below; the same
  cells), CPU µs a read on one thread: with the centroids' distances to one another
  made once (tasks on this process's threads share them), and made afresh for
  every chunk of 16,384 reads (a task sent to a Dask worker, which receives
  the partitioner without them);
* fitting the cells (faiss k-means): CPU seconds on one thread, and wall
  seconds on ``--threads`` threads, which must give the same centroids.

    python scripts/bench_assign.py --write-docs
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import statistics
import time
from functools import partial

import numpy as np
from benchlib import add_write_docs, check_at_least, finish
from threadpoolctl import threadpool_limits

import dnaembed.cluster.partition as partition

READS = 65_536
CHUNK = 16_384


def vectors(n: int, rng) -> np.ndarray:
    """A mixture of tight groups, as reads of strands are."""
    centres = rng.standard_normal((n // 10 + 1, 64))
    return (centres[rng.integers(0, len(centres), n)]
            + 0.5 * rng.standard_normal((n, 64))).astype(np.float32)


def every_boundary(part: partition.Partitioner, y: np.ndarray) -> np.ndarray:
    """The assignment as it was before the screen (the same cells): every boundary
    divided out, then ``take`` passes of a minimum over all of them."""
    c = part.centroids.astype(np.float64)
    c_norm = (c * c).sum(axis=1)
    gaps = np.sqrt(np.maximum(c_norm[:, None] + c_norm[None, :] - 2 * (c @ c.T), 0.0))
    take = min(part.max_cells, part.cells)
    out = np.full((len(y), part.max_cells), -1, dtype=np.int32)
    batch = max(64, partition.ASSIGN_ENTRIES // part.cells)
    for start in range(0, len(y), batch):
        d2 = c_norm[None, :] - 2 * (y[start : start + batch].astype(np.float64) @ c.T)
        rows = np.arange(len(d2))
        nearest = np.argmin(d2, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            boundary = (d2 - d2[rows, nearest][:, None]) / (2 * gaps[nearest])
        boundary[rows, nearest] = -1.0
        boundary[~np.isfinite(boundary)] = np.inf
        # Rows with fewer finite values than taken (identical centroids): a stable sort.
        short = np.flatnonzero(np.isfinite(boundary).sum(axis=1) < take)
        by_sort = np.argsort(boundary[short], axis=1, kind="stable")[:, :take]
        by_sort_values = np.take_along_axis(boundary[short], by_sort, axis=1)
        best = np.empty((len(d2), take), dtype=np.int64)
        values = np.empty((len(d2), take))
        for j in range(take):
            col = np.argmin(boundary, axis=1)
            best[:, j], values[:, j] = col, boundary[rows, col]
            boundary[rows, col] = np.inf
        best[short], values[short] = by_sort, by_sort_values
        out[start + rows, :take] = np.where(values <= part.margin, best, -1)
    return out


def cpu_per_read(assign, y: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    """Median CPU µs a read of ``assign(y)``, and its cells."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        cells = assign(y)
        times.append(time.process_time() - start)
    return 1e6 * statistics.median(times) / len(y), cells


def in_fresh_chunks(part: partition.Partitioner):
    """Assign chunk after chunk, each with a partitioner as a task receives it."""
    sent = pickle.dumps(part)
    return lambda y: np.concatenate([pickle.loads(sent).assign(y[s : s + CHUNK])
                                     for s in range(0, len(y), CHUNK)])


def fit(y: np.ndarray, cells: int, threads: int, seed: int) -> tuple[float, float, str]:
    """CPU and wall seconds of fitting ``cells`` cells on ``threads`` threads; the
    centroids' digest."""
    cpu, wall = time.process_time(), time.perf_counter()
    part = partition.fit_partitioner(y, cells=cells, search_dim=0, margin=0.5, max_cells=4,
                                     seed=seed, threads=threads)
    digest = hashlib.sha1(part.centroids.tobytes()).hexdigest()[:12]
    return time.process_time() - cpu, time.perf_counter() - wall, digest


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, nargs="+", default=[245, 733, 2444])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="threads of the second fit")
    p.add_argument("--seed", type=int, default=0)
    add_write_docs(p, "Assigning reads to cells, and fitting the cells")
    args = p.parse_args()
    check_at_least(p, args, {"repeats": 1, "threads": 1, "cells": 2})
    rng = np.random.default_rng(args.seed)
    y = vectors(max(READS, 64 * max(args.cells)), rng)
    lines = ["| cells | every boundary: CPU µs/read | screened: CPU µs/read | screened, "
             f"chunks of {CHUNK:,} as tasks: CPU µs/read | fit, one thread: CPU s | "
             f"fit, {args.threads} threads: wall s | same centroids |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    print(lines[0] + "\n" + lines[1], flush=True)
    for cells in args.cells:
        one_cpu, _, one_digest = fit(y[: 64 * cells], cells, 1, args.seed)
        _, many_wall, many_digest = fit(y[: 64 * cells], cells, args.threads, args.seed)
        part = partition.fit_partitioner(y[: 64 * cells], cells=cells, search_dim=0,
                                         margin=0.5, max_cells=4, seed=args.seed)
        with threadpool_limits(1, user_api="blas"):  # as the tasks run
            before, want = cpu_per_read(partial(every_boundary, part), y[:READS],
                                        args.repeats)
            screened, got = cpu_per_read(part.assign, y[:READS], args.repeats)
            fresh, got_fresh = cpu_per_read(in_fresh_chunks(part), y[:READS], args.repeats)
        if not (np.array_equal(got, want) and np.array_equal(got_fresh, want)):
            raise SystemExit(f"{cells} cells: the screened assignment gave other cells")
        lines.append(f"| {cells} | {before:.1f} | {screened:.1f} | {fresh:.1f} | {one_cpu:.1f} "
                     f"| {many_wall:.1f} | {'yes' if one_digest == many_digest else 'NO'} |")
        print(lines[-1], flush=True)
    finish(args.write_docs, f"{READS:,} vectors, median of {args.repeats}; the fits once "
           "each.\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
