"""k-means steps on the embedding-neighbour graph: seeding and Lloyd, linear in k.

Plain Lloyd compares every read with every centroid: O(N k D) per iteration, and
greedy k-means++ seeding as much per seed trial; with k ~ N / 10 (a strand per
ten reads) both grow as N^2. Here both are restricted to the graph of each
read's nearest embedding neighbours (the candidate lists that every method
searches anyway), as in Deng & Zhao's k-NN-graph k-means (ICDE 2018):

* **Seeding**: greedy k-means++. Each read's squared distance to its nearest
  seed is known through its graph neighbours; a read with no seed among them is
  at least as far as its farthest listed neighbour, and that bound stands in
  for it. The next seed is the read whose choice lowers the k-means potential
  (the sum of weighted squared distances to the nearest seed) the most,
  which scikit-learn's greedy k-means++ estimates from a few sampled trials
  and this computes for every read: a seed only changes its own neighbours'
  distances, so its gain is a sum over its neighbours. Gains only fall as seeds
  are added (the potential is submodular), so a lazy priority queue finds the
  best read without recomputing the others' (O((N + k) x neighbours x log N)).
  A strand without a seed holds all its reads' distances to the unrelated
  reads around it; a second seed in a seeded strand gains only the spread of its
  reads: the greedy choice seeds every strand before it seeds one twice, where
  k-means++ draws in proportion and puts many seeds into strands already seeded.
* **Lloyd**: each read moves to the nearest centroid among those of its own
  cluster and its neighbours' clusters; centroids are the weighted means.
  O(N x neighbours x D) per iteration, whatever k. A read whose nearest
  centroid is not among its neighbours' clusters is missed; on tight strands
  far apart that does not happen, and a read with no neighbour seeded at the
  start is assigned by an exact search over the seeds.
* **Only what changed is recomputed.** The cost of an iteration is the number of
  (read, candidate cluster) pairs times the width (512). On the real ldpc-exp7
  set (reads of mixed lengths, shared primers, k estimated about 1.6 x the true
  number, so strands hold two centroids or more) a read's ~50 graph neighbours
  sit in ~26 clusters: 2 million 512-d distances per iteration, 7 s each, 80 s
  in all. But after the first two iterations few reads move (92,959 distances to
  recompute at the third, under 1,000 at the last), and a centroid whose cluster
  kept its members keeps its mean. So the sums are recomputed for the clusters
  that gained or lost a read only, and the distances to the centroids that moved
  only; the others come from the last iteration's. Members are added in read
  order either way, so the result is the full recomputation's, bit for bit.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dnaembed.cluster.candidates import CandidatePairs

#: Reads processed per block when comparing reads with their candidate centroids.
ASSIGN_BATCH = 16_384


@dataclass
class NeighbourGraph:
    """Undirected neighbour lists in CSR form: ``indices[indptr[i]:indptr[i+1]]``, distances."""

    indptr: np.ndarray  # int64 (n + 1)
    indices: np.ndarray  # int64
    distances: np.ndarray  # float64, squared embedding distances
    far: np.ndarray  # float64 (n): each read's farthest listed neighbour (inf: none)

    @classmethod
    def from_pairs(cls, n: int, pairs: CandidatePairs) -> NeighbourGraph:
        """The graph of ``n`` reads whose edges are ``pairs``, each listed both ways."""
        src = np.concatenate([pairs.lo, pairs.hi])
        dst = np.concatenate([pairs.hi, pairs.lo])
        d = np.concatenate([pairs.embedded, pairs.embedded]).astype(np.float64)
        order = np.lexsort((dst, src))
        src, dst, d = src[order], dst[order], d[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        indptr = np.cumsum(indptr)
        far = np.zeros(n)
        np.maximum.at(far, src, d)
        # A read without neighbours: as far as the farthest neighbour of any read.
        lonely = np.diff(indptr) == 0
        far[lonely] = far.max(initial=1.0) if (~lonely).any() else 1.0
        return cls(indptr, dst, d, far)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @cached_property
    def sources(self) -> np.ndarray:
        """The read each entry of ``indices`` is a neighbour of (int64, CSR expanded)."""
        return np.repeat(np.arange(len(self)), np.diff(self.indptr))


def greedy_seeds(graph: NeighbourGraph, weights: np.ndarray, k: int,
                 rng: np.random.Generator) -> np.ndarray:
    """``k`` seed reads, each the one that lowers the potential most (see the module notes).

    Ties go by a random order drawn from ``rng``.
    """
    n = len(graph)
    w = np.asarray(weights, dtype=np.float64)
    nearest = graph.far.copy()  # squared distance to the nearest seed, or its bound
    edge_w = w[graph.indices]
    edge_gain = edge_w * np.maximum(0.0, nearest[graph.indices] - graph.distances)
    gains = w * nearest + np.bincount(graph.sources, weights=edge_gain, minlength=n)
    order = rng.permutation(n)
    heap = list(zip((-gains).tolist(), order.tolist(), range(n)))
    heapq.heapify(heap)
    seeded = bytearray(n)
    seeds: list[int] = []
    # Python scalars where the loop reads one value at a time: numpy's are slower to index.
    bounds, wl = graph.indptr.tolist(), w.tolist()
    indices, distances = graph.indices, graph.distances
    while len(seeds) < min(k, n) and heap:
        _, tie, c = heapq.heappop(heap)
        if seeded[c]:
            continue
        a, b = bounds[c], bounds[c + 1]
        nb, d = indices[a:b], distances[a:b]
        gain = wl[c] * float(nearest[c]) + float(edge_w[a:b] @ np.maximum(0.0, nearest[nb] - d))
        if heap and gain < -heap[0][0]:
            heapq.heappush(heap, (-gain, tie, c))  # stale: back in line with its true gain
            continue
        seeded[c] = 1
        seeds.append(c)
        nearest[c] = 0.0
        nearest[nb] = np.minimum(nearest[nb], d)
    return np.array(seeds, dtype=np.int64)


def lloyd(x: np.ndarray, weights: np.ndarray, graph: NeighbourGraph, seeds: np.ndarray,
          niter: int) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd iterations restricted to the graph: each read's cluster and squared distance.

    Only what changed is recomputed (see the module notes): the sums of the clusters that
    gained or lost a read, and the distances to the centroids that moved. The result is
    the one a full recomputation gives, bit for bit.
    """
    n, k = len(x), len(seeds)
    w = np.asarray(weights, dtype=np.float64)
    centroids = np.ascontiguousarray(x[seeds], dtype=np.float32)
    assign = np.full(n, -1, dtype=np.int64)
    assign[seeds] = np.arange(k)
    cache = _DistanceCache.empty()
    assign, dist = _assign(x, graph, centroids, assign, np.ones(k, dtype=bool), cache)
    touched = np.ones(k, dtype=bool)
    for _ in range(niter):
        moved = _update_centroids(x, w, assign, centroids, touched)
        new, dist = _assign(x, graph, centroids, assign, moved, cache)
        changed = np.flatnonzero(new != assign)
        touched = np.zeros(k, dtype=bool)
        touched[assign[changed]] = True
        touched[new[changed]] = True
        assign = new
        if len(changed) == 0:
            break
    return assign, dist


def _update_centroids(x: np.ndarray, w: np.ndarray, assign: np.ndarray, centroids: np.ndarray,
                      touched: np.ndarray) -> np.ndarray:
    """Weighted means of the ``touched`` clusters, in place; which centroids moved.

    The other clusters kept their members, hence their means. An emptied cluster keeps
    its centroid.
    """
    from scipy import sparse

    members = np.flatnonzero(touched[assign])
    clusters = np.flatnonzero(touched)
    row = np.searchsorted(clusters, assign[members])
    # Members in read order, as a full recomputation would add them: the same sums.
    sums = sparse.csr_matrix((w[members], (row, np.arange(len(members)))),
                             shape=(len(clusters), len(members))) @ x[members]
    mass = np.bincount(row, weights=w[members], minlength=len(clusters))
    filled = mass > 0
    means = (sums[filled] / mass[filled, None]).astype(np.float32)
    target = clusters[filled]
    moved = np.zeros(len(centroids), dtype=bool)
    moved[target] = (means != centroids[target]).any(axis=1)
    centroids[target] = means
    return moved


@dataclass
class _DistanceCache:
    """Squared distances of (read, cluster) pairs from the last assignment, by sorted key."""

    keys: np.ndarray  # int64, read * k + cluster, sorted
    distances: np.ndarray  # float32

    @classmethod
    def empty(cls) -> _DistanceCache:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))

    def lookup(self, keys: np.ndarray, stale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distances of ``keys`` known and not ``stale``, and where they are missing."""
        d = np.empty(len(keys), dtype=np.float32)
        known = np.zeros(len(keys), dtype=bool)
        if len(self.keys):
            pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
            known = (self.keys[pos] == keys) & ~stale
            d[known] = self.distances[pos[known]]
        return d, np.flatnonzero(~known)


def _candidate_keys(graph: NeighbourGraph, assign: np.ndarray, k: int) -> np.ndarray:
    """Sorted distinct ``read * k + cluster`` of each read's own and neighbours' clusters."""
    n = len(graph)
    src = np.concatenate([graph.sources, np.arange(n)])
    cand = np.concatenate([assign[graph.indices], assign])
    ok = cand >= 0
    # A sort and a comparison with the neighbour: np.unique's hash table is ten times slower.
    keys = np.sort(src[ok] * k + cand[ok])
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return keys[first]


def _assign(x: np.ndarray, graph: NeighbourGraph, centroids: np.ndarray, assign: np.ndarray,
            moved: np.ndarray, cache: _DistanceCache) -> tuple[np.ndarray, np.ndarray]:
    """Each read's nearest centroid among its own cluster's and its neighbours' clusters.

    Ties go to the lower cluster id. Distances to the centroids that did not ``move`` come
    from ``cache``, which is then updated.
    """
    n, k = len(x), len(centroids)
    keys = _candidate_keys(graph, assign, k)
    rows, clusters = keys // k, keys % k
    d, todo = cache.lookup(keys, moved[clusters])
    for start in range(0, len(todo), ASSIGN_BATCH):
        part = todo[start:start + ASSIGN_BATCH]
        diff = x[rows[part]] - centroids[clusters[part]]
        d[part] = np.einsum("ij,ij->i", diff, diff)
    cache.keys, cache.distances = keys, d
    out = assign.copy()
    dist = np.full(n, np.inf, dtype=np.float32)
    if len(keys):
        # Keys run by read, then by cluster: each read's first minimum has the lowest id.
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        least = np.minimum.reduceat(d, starts)
        hit = np.flatnonzero(d == np.repeat(least, np.diff(np.r_[starts, len(keys)])))
        best = hit[np.r_[True, rows[hit][1:] != rows[hit][:-1]]]
        out[rows[best]] = clusters[best]
        dist[rows[best]] = d[best]
    orphans = np.flatnonzero(out < 0)
    if len(orphans):
        from dnaembed.cluster.search import NeighbourIndex

        found = NeighbourIndex(centroids, kind="exact").search(x[orphans], 1)
        out[orphans] = found.indices[:, 0]
        dist[orphans] = found.distances[:, 0]
    return out, dist
