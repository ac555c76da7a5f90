"""From raw groups to final cluster labels, representatives and orientations."""

from __future__ import annotations

import numpy as np


def assemble(
    groups: np.ndarray, parity: np.ndarray, centrality: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Final labels from raw groups: ids by decreasing size, representatives, orientations.

    The representative of a group is its most central read (ties: the earliest);
    orientations are made relative to it.
    """
    n = len(groups)
    g = _dense_ids(np.asarray(groups))
    n_groups = int(g.max()) + 1 if n else 0
    idx = np.arange(n)
    reps = _most_central(g, np.asarray(centrality, dtype=np.float64), n_groups)
    sizes = np.bincount(g, weights=weights, minlength=n_groups)
    earliest = np.full(n_groups, n, dtype=np.int64)
    np.minimum.at(earliest, g, idx)
    rank = np.lexsort((earliest, -sizes))  # group ids in output order
    new_id = np.empty(n_groups, dtype=np.int64)
    new_id[rank] = np.arange(n_groups)
    labels = new_id[g]
    parity = np.asarray(parity, dtype=np.int8)
    orient = parity ^ parity[reps][g]
    return labels, orient.astype(np.int8), reps[rank]


def _dense_ids(groups: np.ndarray) -> np.ndarray:
    """Groups numbered 0, 1, ... in increasing order of their labels (non-negative ints),
    as ``np.unique(groups, return_inverse=True)`` numbers them, without a sort."""
    if len(groups) == 0:
        return np.zeros(0, dtype=np.int64)
    present = np.bincount(groups) > 0
    return (np.cumsum(present) - 1)[groups]


def _most_central(g: np.ndarray, centrality: np.ndarray, n_groups: int) -> np.ndarray:
    """Each group's most central member (ties: the earliest), in group order.

    Why not one sort of every read by group, centrality and position: with it an
    assembly of 3 x 10^6 reads in 300,000 groups took 1.3-1.4 s of CPU (three a run),
    with these two passes 0.2-0.35 s.
    """
    best = np.full(n_groups, -np.inf)
    np.maximum.at(best, g, centrality)
    central = np.flatnonzero(centrality == best[g])
    reps = np.full(n_groups, len(g), dtype=np.int64)
    np.minimum.at(reps, g[central], central)
    return reps
