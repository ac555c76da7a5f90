"""k-means on the embeddings (faiss), for comparison with the graph method.

The squared Euclidean distance approximates the edit distance, so k-means
minimises the within-cluster edit distance as the embedding sees it. No exact
check: the result is as good as the embedding.

``n_clusters`` (``--k``) when given; otherwise estimated from the data. For a
sample of reads (:data:`ESTIMATE_READS`), each read's candidates are checked
with exact Levenshtein under the data-derived threshold (as the graph method
does); a read with ``s - 1`` verified neighbours is in a cluster of about ``s``
reads, and the number of clusters is the sum of ``1 / s`` over all reads
(each cluster of size s contributes s times 1/s), estimated from the sample.
Clusters larger than the candidate list are under-counted in ``s``, which
errs towards more clusters.

Initial centroids: k-means++ (scikit-learn's ``kmeans_plusplus``) on a random
sample of at most ``3k + 1000`` reads; faiss then runs ``niter`` Lloyd
iterations on all reads. faiss's own random initialisation often puts two
centroids in one tight cluster and none in another, which on well-separated
strands costs a third of the clusters, and Lloyd iterations cannot repair it.
k-means++ does it too: a strand's reads are ~17 edits from each other at
nanopore rates and ~80 from other strands', so the last strand without a seed
holds only a small share of the squared distances, and a seed drawn in
proportion lands in an already seeded strand most of the time. Greedy seeding
draws :data:`LOCAL_TRIALS` candidates per seed and keeps the one that lowers
the potential most (scikit-learn's default, 2 + log k, merged two of 12
nanopore strands for 2 of 12 seeds; 20 for none), up to k = 1000; beyond, one
trial per seed, to bound the cost.

Cost: each Lloyd iteration compares N reads with k centroids (brute force, BLAS):
O(N k D niter), quadratic when k grows with N as it does here. (faiss's HNSW
assignment index would make it near-linear, but measured here it stalls the
objective and loses half the accuracy.)

With both orientations, reads are oriented first
(:mod:`dnaembed.cluster.orientation`). More in ``docs/algorithms.md`` (k-means).
"""

from __future__ import annotations

import time

import numpy as np

from dnaembed.cluster.base import Clusterer, FitData
from dnaembed.cluster.candidates import candidate_pairs, levenshtein_pairs
from dnaembed.cluster.orientation import orient_by_neighbours, oriented
from dnaembed.cluster.params import Interval
from dnaembed.cluster.search import PROJECTED_DIM
from dnaembed.log import logger

#: Reads whose candidates are checked to estimate the number of clusters.
ESTIMATE_READS = 2_000
#: Greedy k-means++ candidates per seed, up to k = GREEDY_LIMIT (see the module notes).
LOCAL_TRIALS = 20
GREEDY_LIMIT = 1000


class KMeansClusterer(Clusterer):
    """faiss k-means with ``n_clusters`` centroids (None = estimated), ``niter`` iterations."""

    method = "kmeans"
    _parameter_constraints = {
        **Clusterer._parameter_constraints,
        "n_clusters": [None, Interval(integer=True, low=1)],
        "niter": [Interval(integer=True, low=1)],
    }

    def __init__(
        self,
        n_clusters: int | None = None,
        *,
        niter: int = 20,
        neighbours: int = 16,
        index: str = "auto",
        index_dim: int = PROJECTED_DIM,
        rescue: bool = True,
        rescue_max_size: int = 2,
        threads: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(
            neighbours=neighbours, index=index, index_dim=index_dim, rescue=rescue,
            rescue_max_size=rescue_max_size,
            threads=threads, seed=seed,
        )
        self.n_clusters = n_clusters
        self.niter = niter

    def estimate_clusters(self, data: FitData) -> int:
        """The number of clusters seen from a sample of reads (see the module notes)."""
        n = len(data)
        threshold = self._threshold(data)
        rows = self._sample_rows(data, ESTIMATE_READS)
        fwd, rev = self._search_rows(data, rows)
        pairs = candidate_pairs(fwd, rev, rows=rows)
        cuts = threshold.cuts(np.maximum(data.lengths[pairs.lo], data.lengths[pairs.hi]))
        dist = levenshtein_pairs(data.seqs, self._rc_seqs(data), pairs,
                                 cutoff=int(cuts.max(initial=0)), workers=self._workers())
        ok = (dist <= cuts) & (data.lengths[pairs.lo] > 0) & (data.lengths[pairs.hi] > 0)
        w = data.weights.astype(np.float64)
        in_sample = np.zeros(n, dtype=bool)
        in_sample[rows] = True
        lo, hi = pairs.lo[ok], pairs.hi[ok]
        # Weight of the verified neighbours of each sampled read (pairs are symmetric).
        seen = np.zeros(n)
        np.add.at(seen, lo, np.where(in_sample[lo], w[hi], 0))
        np.add.at(seen, hi, np.where(in_sample[hi], w[lo], 0))
        size = w[rows] + seen[rows]
        estimate = len(data) / len(rows) * float(np.sum(w[rows] / size))
        return int(min(max(round(estimate), 1), n))

    def _initial_centroids(self, x: np.ndarray, k: int) -> np.ndarray:
        """k-means++ seeds from a sample (see the module notes)."""
        from sklearn.cluster import kmeans_plusplus

        rng = np.random.default_rng([self.seed, 11])
        size = min(len(x), 3 * k + 1000)
        sample = x[np.sort(rng.choice(len(x), size, replace=False))] if size < len(x) else x
        trials = LOCAL_TRIALS if k <= GREEDY_LIMIT else 1
        centres, _ = kmeans_plusplus(sample, k, n_local_trials=trials,
                                     random_state=int(rng.integers(2**31)))
        return np.ascontiguousarray(centres, dtype=np.float32)

    def _cluster(self, data: FitData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import faiss

        n = len(data)
        if data.both:
            forward, reverse = self._neighbours(data)
            flip = orient_by_neighbours(forward, reverse)
            x = oriented(data.forward, data.reverse_all(), flip)
        else:
            flip = np.zeros(n, dtype=np.int8)
            x = data.forward
        k = self.n_clusters if self.n_clusters is not None else self.estimate_clusters(data)
        k = min(k, n)
        self.stats_["k"] = k
        logger.info("k-means with k = %d%s", k, "" if self.n_clusters else " (estimated)")
        start = time.perf_counter()
        x = np.ascontiguousarray(x)
        km = faiss.Kmeans(
            x.shape[1], k, niter=self.niter, seed=self.seed, verbose=False,
            min_points_per_centroid=1, max_points_per_centroid=256,
        )
        km.train(x, weights=data.weights.astype(np.float32),
                 init_centroids=self._initial_centroids(x, k))
        dist, assign = km.index.search(np.ascontiguousarray(x), 1)
        self._add_time("kmeans", start)
        return assign[:, 0].astype(np.int64), flip.astype(np.int8), -dist[:, 0].astype(np.float64)
