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
    _, g = np.unique(groups, return_inverse=True)
    g = g.reshape(-1)
    n_groups = int(g.max()) + 1 if n else 0
    idx = np.arange(n)
    order = np.lexsort((idx, -np.asarray(centrality, dtype=np.float64), g))
    first = np.ones(n, dtype=bool)
    first[1:] = g[order][1:] != g[order][:-1]
    reps = order[first]  # one per group, in group order
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
