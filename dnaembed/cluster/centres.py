"""The centre of every cluster in the search space: the mean vector of its reads.

Why rounds 2.. search from centres, not from each cluster's representative read: a
read's vector is its strand's point plus noise, about half the spread between strands
in every dimension (nanopore preset, 64 dimensions: variance 0.13 against 0.47). Two
pieces of one strand are two single reads apart when each is its representative, and
much closer as means of their reads (the noise falls with the square root of their
number). In cells with a margin of 1.0 round 2 then leaves fewer strands in pieces than
representatives did at 1.5, with about a fifth fewer copies of each (docs/scaling.md).

A cluster's centre averages the reads in its representative's orientation only: a
read linked as the other strand's reverse complement has its vector on the other side
of the space.
"""

from __future__ import annotations

import numpy as np

from dnaembed.io.spill import SpillArray

#: Rows of vectors read at a time (8 MB of float16 at 64 dimensions).
BLOCK_ROWS = 1 << 16


def cluster_centres(vectors: SpillArray, linker, reps: np.ndarray) -> np.ndarray:
    """The centre of each cluster whose representative is in ``reps`` (every cluster's
    once, as :meth:`~dnaembed.cluster.graph._GuardedLinker.clusters` gives them):
    ``(len(reps), dim)`` float16, row for row."""
    root, parity = linker.uf.labels()
    rep_parity = np.frombuffer(linker.rep_parity, dtype=np.int8)
    counted = parity == rep_parity[root]
    position = np.full(len(root), -1, dtype=np.int32)
    position[root[reps]] = np.arange(len(reps), dtype=np.int32)
    cluster = position[root]
    del root, parity, position
    return mean_rows(vectors, cluster, counted, len(reps))


def mean_rows(vectors: SpillArray, group: np.ndarray, counted: np.ndarray,
              groups: int) -> np.ndarray:
    """Mean (float16) of the ``counted`` rows of ``vectors`` in each of ``groups`` groups
    (``group``: each row's, 0..groups-1). Summed in float32, in row order, block by
    block (the same bytes on any machine); a group without a counted row is zero."""
    dim = vectors.row_shape[0]
    sums = np.zeros((groups, dim), dtype=np.float32)
    counts = np.zeros(groups, dtype=np.int64)
    for start in range(0, len(group), BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        keep = counted[rows]
        index = group[rows][keep]
        order = np.argsort(index, kind="stable")
        index = index[order]
        block = vectors.take(rows)[keep][order].astype(np.float32)
        if not len(index):
            continue
        first = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
        sums[index[first]] += np.add.reduceat(block, first, axis=0)
        counts[index[first]] += np.diff(np.r_[first, len(index)])
    sums /= np.maximum(counts, 1)[:, None]
    return sums.astype(np.float16)
