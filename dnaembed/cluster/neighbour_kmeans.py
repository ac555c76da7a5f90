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
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

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


def greedy_seeds(graph: NeighbourGraph, weights: np.ndarray, k: int,
                 rng: np.random.Generator) -> np.ndarray:
    """``k`` seed reads, each the one that lowers the potential most (see the module notes).

    Ties go by a random order drawn from ``rng``.
    """
    n = len(graph)
    w = np.asarray(weights, dtype=np.float64)
    nearest = graph.far.copy()  # squared distance to the nearest seed, or its bound
    src = np.repeat(np.arange(n), np.diff(graph.indptr))
    edge_gain = w[graph.indices] * np.maximum(0.0, nearest[graph.indices] - graph.distances)
    gains = w * nearest + np.bincount(src, weights=edge_gain, minlength=n)
    order = rng.permutation(n)
    heap = list(zip((-gains).tolist(), order.tolist(), range(n)))
    heapq.heapify(heap)
    seeded = np.zeros(n, dtype=bool)
    seeds: list[int] = []
    indptr, indices, distances = graph.indptr, graph.indices, graph.distances
    while len(seeds) < min(k, n) and heap:
        _, tie, c = heapq.heappop(heap)
        if seeded[c]:
            continue
        nb = indices[indptr[c]:indptr[c + 1]]
        d = distances[indptr[c]:indptr[c + 1]]
        gain = w[c] * nearest[c] + float(w[nb] @ np.maximum(0.0, nearest[nb] - d))
        if heap and gain < -heap[0][0]:
            heapq.heappush(heap, (-gain, tie, c))  # stale: back in line with its true gain
            continue
        seeded[c] = True
        seeds.append(c)
        nearest[c] = 0.0
        nearest[nb] = np.minimum(nearest[nb], d)
    return np.array(seeds, dtype=np.int64)


def lloyd(x: np.ndarray, weights: np.ndarray, graph: NeighbourGraph, seeds: np.ndarray,
          niter: int) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd iterations restricted to the graph: each read's cluster and squared distance."""
    from scipy import sparse

    n, k = len(x), len(seeds)
    w = np.asarray(weights, dtype=np.float64)
    centroids = np.ascontiguousarray(x[seeds], dtype=np.float32)
    assign = np.full(n, -1, dtype=np.int64)
    assign[seeds] = np.arange(k)
    assign, dist = _assign(x, graph, centroids, assign)
    for _ in range(niter):
        mass = np.bincount(assign, weights=w, minlength=k)
        sums = sparse.csr_matrix((w, (assign, np.arange(n))), shape=(k, n)) @ x
        filled = mass > 0  # an emptied cluster keeps its centroid
        centroids[filled] = (sums[filled] / mass[filled, None]).astype(np.float32)
        moved, dist = _assign(x, graph, centroids, assign)
        changed = int(np.sum(moved != assign))
        assign = moved
        if changed == 0:
            break
    return assign, dist


def _assign(x: np.ndarray, graph: NeighbourGraph, centroids: np.ndarray,
            assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each read's nearest centroid among its own cluster's and its neighbours' clusters."""
    n, k = len(x), len(centroids)
    src = np.concatenate([np.repeat(np.arange(n), np.diff(graph.indptr)), np.arange(n)])
    cand = np.concatenate([assign[graph.indices], assign])
    ok = cand >= 0
    keys = np.unique(src[ok] * k + cand[ok])
    rows, clusters = keys // k, keys % k
    d = np.empty(len(keys), dtype=np.float32)
    for start in range(0, len(keys), ASSIGN_BATCH):
        r = rows[start:start + ASSIGN_BATCH]
        diff = x[r] - centroids[clusters[start:start + ASSIGN_BATCH]]
        d[start:start + len(r)] = np.einsum("ij,ij->i", diff, diff)
    order = np.lexsort((clusters, d, rows))
    first = np.ones(len(order), dtype=bool)
    first[1:] = rows[order][1:] != rows[order][:-1]
    best = order[first]
    out = assign.copy()
    dist = np.full(n, np.inf, dtype=np.float32)
    out[rows[best]] = clusters[best]
    dist[rows[best]] = d[best]
    orphans = np.flatnonzero(out < 0)
    if len(orphans):
        from dnaembed.cluster.search import NeighbourIndex

        found = NeighbourIndex(centroids, kind="exact").search(x[orphans], 1)
        out[orphans] = found.indices[:, 0]
        dist[orphans] = found.distances[:, 0]
    return out, dist
