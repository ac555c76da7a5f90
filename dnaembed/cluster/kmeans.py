"""k-means on the embeddings, linear in k, with an optional exact refinement.

The squared Euclidean distance approximates the edit distance, so k-means
minimises the within-cluster edit distance as the embedding sees it.

``n_clusters`` (``--k``) when given; otherwise estimated from the data. For a
sample of reads (:data:`ESTIMATE_READS`), each read's candidates are checked
with exact Levenshtein under the data-derived threshold (as the graph method
does); a read with ``s - 1`` verified neighbours is in a cluster of about ``s``
reads, and the number of clusters is the sum of ``1 / s`` over all reads
(each cluster of size s contributes s times 1/s), estimated from the sample.
A read whose every candidate is verified lies in a cluster larger than its
list: a subsample of such reads (:data:`ENLARGE_READS`) is searched again with
lists 4 times as long, and again up to :data:`MAX_ESTIMATE_NEIGHBOURS`; sizes
that still fill those are lower bounds, which errs towards more clusters. (With
the lists of 16 alone, 300 strands read 40 times each gave k = 532.)

Seeding and iterations (:mod:`dnaembed.cluster.neighbour_kmeans`): greedy
k-means++ and Lloyd's iterations, both restricted to each read's nearest
embedding neighbours, so that their cost grows with N, not with N x k.
More in ``docs/algorithms.md`` and ``docs/vector-clustering.md``.

``refine`` (``cluster --refine``), off by default: an exact-distance refinement
of the final assignment. Each read is checked against its cluster's
representative with the exact Levenshtein distance (under the data-derived
threshold, scaled to the pair's length); a read over it moves to the nearest
representative within it among the clusters of its embedding neighbours, or
else starts a new cluster, which the later such reads of its old cluster may
join (by the same check). k-means alone puts every read in some cluster; this
takes out the reads that do not belong to theirs (truncated reads, reads of a
strand left without a centroid), at the cost of one exact check per read and a
few per moved read.

With both orientations, reads are oriented first
(:mod:`dnaembed.cluster.orientation`). More in ``docs/algorithms.md`` (k-means).
"""

from __future__ import annotations

import time

import numpy as np

from dnaembed.cluster.base import FULL_LENGTH_FRACTION, Clusterer, FitData
from dnaembed.cluster.candidates import CandidatePairs, candidate_pairs
from dnaembed.cluster.labels import assemble
from dnaembed.cluster.neighbour_kmeans import NeighbourGraph, greedy_seeds, lloyd
from dnaembed.cluster.orientation import orient_by_neighbours, oriented
from dnaembed.cluster.params import Interval
from dnaembed.cluster.search import PROJECTED_DIM, Neighbours
from dnaembed.cluster.threshold import Threshold
from dnaembed.log import logger

#: Reads whose candidates are checked to estimate the number of clusters.
ESTIMATE_READS = 20_000
#: Of those whose verified neighbours fill their lists, at most this many are searched
#: again with longer lists (4 times as long each time, up to MAX_ESTIMATE_NEIGHBOURS).
ENLARGE_READS = 2_000
MAX_ESTIMATE_NEIGHBOURS = 1_024


def _rows_of(neighbours: Neighbours | None, rows: np.ndarray) -> Neighbours | None:
    """The neighbour lists of ``rows`` only."""
    if neighbours is None:
        return None
    return Neighbours(neighbours.distances[rows], neighbours.indices[rows])


class KMeansClusterer(Clusterer):
    """k-means with ``n_clusters`` centroids (None = estimated), ``niter`` iterations.

    ``refine``: the exact-distance refinement of the final assignment (see the
    module notes).
    """

    method = "kmeans"
    _parameter_constraints = {
        **Clusterer._parameter_constraints,
        "n_clusters": [None, Interval(integer=True, low=1)],
        "niter": [Interval(integer=True, low=0)],
        "refine": ["boolean"],
    }

    def __init__(
        self,
        n_clusters: int | None = None,
        *,
        niter: int = 20,
        refine: bool = False,
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
        self.refine = refine

    def estimate_clusters(self, data: FitData) -> int:
        """The number of clusters seen from a sample of reads (see the module notes)."""
        n = len(data)
        rows = self._sample_rows(data, ESTIMATE_READS)
        fwd, rev = self._neighbours(data)
        k = self._k(data)
        size, full = self._cluster_sizes(data, rows, k, _rows_of(fwd, rows), _rows_of(rev, rows))
        w = data.weights.astype(np.float64)
        total = float(np.sum(w[rows][~full] / size[~full]))
        # Reads whose every neighbour is verified lie in clusters larger than their lists:
        # a subsample of them is searched again with lists 4 times as long, and again.
        pending, pending_size, scale = rows[full], size[full], 1.0
        rng = np.random.default_rng([self.seed, 12])
        while len(pending) and k < min(MAX_ESTIMATE_NEIGHBOURS, n - 1):
            if len(pending) > ENLARGE_READS:
                scale *= len(pending) / ENLARGE_READS
                pending = np.sort(rng.choice(pending, ENLARGE_READS, replace=False))
            k = min(4 * k, MAX_ESTIMATE_NEIGHBOURS, n - 1)
            size, full = self._cluster_sizes(data, pending, k, *self._search_rows(data, pending, k))
            total += scale * float(np.sum(w[pending][~full] / size[~full]))
            pending, pending_size = pending[full], size[full]
        # Still full at the longest lists: their sizes are lower bounds (more clusters).
        total += scale * float(np.sum(w[pending] / pending_size))
        estimate = n / len(rows) * total
        return int(min(max(round(estimate), 1), n))

    def _cluster_sizes(self, data: FitData, rows: np.ndarray, k: int, fwd: Neighbours,
                       rev: Neighbours | None) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``rows``' cluster size as its verified neighbours show it (collapsed
        copies counted), and whether they fill its list of ``k`` (the size a lower bound)."""
        pairs, _ = self._check(data, candidate_pairs(fwd, rev, rows=rows), self._threshold(data))
        w = data.weights.astype(np.float64)
        in_rows = np.zeros(len(data), dtype=bool)
        in_rows[rows] = True
        lo, hi = pairs.lo, pairs.hi
        # Weight and number of the verified neighbours of each row (pairs are symmetric).
        seen, count = np.zeros(len(data)), np.zeros(len(data), dtype=np.int64)
        np.add.at(seen, lo, np.where(in_rows[lo], w[hi], 0))
        np.add.at(seen, hi, np.where(in_rows[hi], w[lo], 0))
        np.add.at(count, lo, in_rows[lo])
        np.add.at(count, hi, in_rows[hi])
        return w[rows] + seen[rows], count[rows] >= k

    def _cluster(self, data: FitData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(data)
        forward, reverse = self._neighbours(data)
        if data.both:
            flip = orient_by_neighbours(forward, reverse)
            x = oriented(data.forward, data.reverse_all(), flip)
        else:
            flip = np.zeros(n, dtype=np.int8)
            x = data.forward
        pairs = candidate_pairs(forward, reverse)
        # Neighbours in the orientation each read was given.
        pairs = pairs.subset(pairs.parity == (flip[pairs.lo] ^ flip[pairs.hi]))
        k = self.n_clusters if self.n_clusters is not None else self.estimate_clusters(data)
        k = min(k, n)
        self.stats_["k"] = k
        logger.info("k-means with k = %d%s", k, "" if self.n_clusters else " (estimated)")
        start = time.perf_counter()
        graph = NeighbourGraph.from_pairs(n, pairs)
        seeds = greedy_seeds(graph, data.weights, k, np.random.default_rng([self.seed, 11]))
        assign, dist = lloyd(np.ascontiguousarray(x, dtype=np.float32), data.weights, graph,
                             seeds, self.niter)
        self._add_time("kmeans", start)
        centrality = -dist.astype(np.float64)
        if self.refine:
            assign = self._refine(data, graph, assign, flip, centrality)
        return assign, flip.astype(np.int8), centrality

    def _refine(self, data: FitData, graph: NeighbourGraph, assign: np.ndarray,
                flip: np.ndarray, centrality: np.ndarray) -> np.ndarray:
        """The exact-distance refinement of the final assignment (see the module notes)."""
        threshold = self._threshold(data)
        n = len(data)
        full = data.lengths >= FULL_LENGTH_FRACTION * data.median_length
        lift = float(np.abs(centrality).max(initial=0.0)) * 2 + 1
        _, _, reps = assemble(assign, flip, centrality + lift * full, data.weights)
        rep_of = np.full(int(assign.max()) + 1, -1, dtype=np.int64)
        rep_of[assign[reps]] = reps
        rows = np.setdiff1d(np.arange(n), reps)
        ok = self._distances(data, rows, rep_of[assign[rows]], flip, threshold) >= 0
        out = assign.copy()
        # Over the cut: the nearest representative within it among the neighbours' clusters.
        leaving = rows[~ok]
        pick = np.isin(graph.sources, leaving)
        cand = np.unique(np.stack([graph.sources[pick], assign[graph.indices[pick]]]), axis=1)
        cand = cand[:, cand[1] != assign[cand[0]]]
        dist = self._distances(data, cand[0], rep_of[cand[1]], flip, threshold)
        close = dist >= 0
        order = np.lexsort((cand[1][close], dist[close], cand[0][close]))
        movers, first = np.unique(cand[0][close][order], return_index=True)
        out[movers] = cand[1][close][order][first]
        stranded = np.setdiff1d(leaving, movers)
        out = self._regroup(data, out, stranded, flip, centrality, threshold)
        self.stats_.update(refine_moved=len(movers), refine_new_clusters=int(
            len(np.unique(out)) - len(np.unique(assign))))
        return out

    def _distances(self, data: FitData, a: np.ndarray, b: np.ndarray, flip: np.ndarray,
                   threshold: Threshold) -> np.ndarray:
        """Exact distance of read a[i] to read b[i], as oriented; -1 over the cut."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        pairs = CandidatePairs(np.minimum(a, b), np.maximum(a, b),
                               (flip[a] ^ flip[b]).astype(np.int8),
                               np.zeros(len(a), dtype=np.float32))
        return self._exact_distances(data, pairs, threshold)

    def _regroup(self, data: FitData, out: np.ndarray, stranded: np.ndarray, flip: np.ndarray,
                 centrality: np.ndarray, threshold: Threshold) -> np.ndarray:
        """Reads with no representative within the cut: new clusters, most central first."""
        order = stranded[np.lexsort((stranded, -centrality[stranded], out[stranded]))]
        next_id = int(out.max(initial=-1)) + 1
        leaders: dict[int, list[int]] = {}
        for r in order.tolist():
            mine = leaders.setdefault(int(out[r]), [])
            if mine:
                d = self._distances(data, np.full(len(mine), r), np.array(mine), flip, threshold)
                if (d >= 0).any():
                    d = np.where(d >= 0, d, np.iinfo(np.int64).max)
                    out[r] = out[mine[int(np.argmin(d))]]
                    continue
            mine.append(r)
            out[r] = next_id
            next_id += 1
        return out
