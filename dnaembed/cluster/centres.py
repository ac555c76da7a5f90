"""The centre of every cluster in the search space: the mean vector of its reads.

Why rounds 2.. search from centres, not from each cluster's representative read: a
read's vector is its strand's point plus noise, about half the spread between strands
in every dimension (nanopore preset, 64 dimensions: variance 0.13 against 0.47). Two
pieces of one strand are two single reads apart when each is its representative, and
much closer as means of their reads (the noise falls with the square root of their
number). Estimated on the bench sets' vectors, round 2 in cells with a margin of 1.0
leaves fewer strands in pieces than representatives did at 1.5, with about a fifth
fewer copies of each; the rounds use 1.25 (docs/scaling.md, "Rounds by centres").

A cluster's centre averages the reads in its representative's orientation only: a
read linked as the other strand's reverse complement has its vector on the other side
of the space.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dnaembed.allocator import trim_memory
from dnaembed.io.spill import SpillArray

if TYPE_CHECKING:
    from dnaembed.cluster.graph import _GuardedLinker

#: Rows of vectors read at a time (2 MB of float16 at 64 dimensions; blocks of 65,536
#: rows took 1.3x as long, their temporaries out of cache).
BLOCK_ROWS = 1 << 14
#: Bytes of float32 sums held at once: wider sums are made a slice of the dimensions at a
#: time, one pass over the vectors each: a bound on what the centres add to the client's
#: memory whatever the number of clusters. 3 x 10^6 reads' ~440,000 clusters take two
#: passes (random clusters, one thread: 2.1 s of CPU, against 3.1 in four passes with 32
#: MB and 1.4 in one with 128 MB; 10^6 reads' 126,000 one pass, 0.4 s). This runs while
#: the tasks wait. 3 x 10^6 under --memory 2G peaked at 1,586-1,664 MiB in four runs with
#: 64 MB, against 1,591-1,652 in three with 32 (bench_scale, docs/scaling-history.md).
SUM_BYTES = 64 << 20


def cluster_centres(vectors: SpillArray, linker: _GuardedLinker, reps: np.ndarray
                    ) -> np.ndarray:
    """The centre of each cluster whose representative is in ``reps`` (every cluster's
    once, as :meth:`~dnaembed.cluster.graph._GuardedLinker.clusters` gives them):
    ``(len(reps), dim)`` float16, row for row."""
    trim_memory()  # the reverse complements' embedding just freed its blocks on other threads
    root, parity = linker.uf.labels(np.int32)
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
    (``group``: each row's, 0..groups-1). Summed in float32 in row order (the same
    bytes on any machine); a group without a counted row is zero."""
    dim = vectors.row_shape[0]
    out = np.empty((groups, dim), dtype=np.float16)
    counts = np.maximum(np.bincount(group[counted], minlength=groups), 1)[:, None]
    width = max(1, min(dim, SUM_BYTES // max(4 * groups, 1)))
    for first in range(0, dim, width):
        dims = slice(first, min(dim, first + width))
        sums = _sums(vectors, group, counted, groups, dims)
        sums /= counts
        out[:, dims] = sums
    return out


def _sums(vectors: SpillArray, group: np.ndarray, counted: np.ndarray, groups: int,
          dims: slice) -> np.ndarray:
    """Float32 sums of the counted rows per group, in the dimensions ``dims``."""
    sums = np.zeros((groups, dims.stop - dims.start), dtype=np.float32)
    for start in range(0, len(group), BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        keep = counted[rows]
        index = group[rows][keep]
        order = np.argsort(index, kind="stable")
        index = index[order]
        block = vectors.take(rows)[np.flatnonzero(keep)[order], dims].astype(np.float32)
        # The block's first row of every group, then its second, ...: each layer's groups
        # are distinct, so one vectorised add does it (np.add.reduceat over ~60,000 groups
        # of a row or two cost 2.5x as much, np.add.at 2x).
        layer = np.arange(len(index)) - np.searchsorted(index, index)
        for n in range(int(layer.max()) + 1 if len(layer) else 0):
            at = layer == n
            sums[index[at]] += block[at]
    return sums
