"""One orientation per read, for methods that cluster vectors rather than checked pairs.

k-means and DBSCAN place each read's vector in space; a read sequenced in the
other orientation has a vector near its strand's reverse complement, far from
its strand. Before they run, every read is given an orientation from the
embedding-neighbour graph of both orientations: the closest pairs first
(Kruskal order), each pair fixes one read's orientation relative to the other,
and a pair that contradicts earlier ones is skipped. Reads of one strand are
each other's closest neighbours, so they end up in one orientation; how
unrelated groups are oriented relative to each other does not matter.
"""

from __future__ import annotations

import numpy as np

from dnaembed.cluster.candidates import candidate_pairs
from dnaembed.cluster.search import Neighbours
from dnaembed.cluster.unionfind import ParityUnionFind

#: Closest neighbours per read and orientation used to orient (a spanning forest needs few).
ORIENT_NEIGHBOURS = 4


def orient_by_neighbours(forward: Neighbours, reverse: Neighbours) -> np.ndarray:
    """1 for reads to reverse-complement so that neighbouring reads share an orientation."""
    m = min(ORIENT_NEIGHBOURS, forward.indices.shape[1])
    fwd = Neighbours(forward.distances[:, :m], forward.indices[:, :m])
    rev = Neighbours(reverse.distances[:, :m], reverse.indices[:, :m])
    pairs = candidate_pairs(fwd, rev)
    n = len(forward.indices)
    uf = ParityUnionFind(n)
    order = np.lexsort((pairs.hi, pairs.lo, pairs.embedded))
    for i, j, p in zip(
        pairs.lo[order].tolist(), pairs.hi[order].tolist(), pairs.parity[order].tolist()
    ):
        ri, pi = uf.find(i)
        rj, pj = uf.find(j)
        if ri != rj:
            uf.union_roots(ri, rj, pi ^ p ^ pj)
    _, parity = uf.labels()
    return parity


def oriented(forward: np.ndarray, reverse: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """Each read's vector in its chosen orientation."""
    return np.where(flip[:, None].astype(bool), reverse, forward)
