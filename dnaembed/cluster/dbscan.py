"""DBSCAN (scikit-learn) on the embedding-neighbour graph, for comparison.

``eps`` is in Levenshtein units (default: the data-derived threshold of
:mod:`dnaembed.cluster.threshold`). It is converted to the embedding's
squared-distance scale by matching quantiles on sampled candidate pairs (each
with its exact distance and its embedding distance): if a fraction q of the
pairs are within eps edits, eps in embedding units is the q-quantile of their
squared embedding distances. A perfectly calibrated model gives back eps; a
biased one (distances compressed, say) gets the eps that keeps the same pairs.
The quantile is the midpoint between the m-th and (m+1)-th smallest embedding
distances, m the number of pairs within eps: eps usually falls in the gap
between one strand's pairs and unrelated pairs, and an interpolated quantile
there lands next to the nearest unrelated pair (with 12 strands it merged two).

Memory: DBSCAN's eps-neighbourhoods are taken from the faiss candidate lists
(``neighbours`` per read and orientation) as a sparse graph, never from an N x N
matrix, so memory grows as N x neighbours whatever the input size. A read with
more than ``neighbours`` reads within eps sees only the nearest ones, which is
enough to make it a core point for any ``min_samples <= neighbours + 1``.

Reads DBSCAN calls noise become singletons. With both orientations, reads are
oriented first (:mod:`dnaembed.cluster.orientation`).
More in ``docs/algorithms.md``.
"""

from __future__ import annotations

import time

import numpy as np

from dnaembed.cluster.base import Clusterer, FitData
from dnaembed.cluster.candidates import candidate_pairs
from dnaembed.cluster.orientation import orient_by_neighbours, oriented
from dnaembed.cluster.params import Interval
from dnaembed.cluster.search import PROJECTED_DIM
from dnaembed.log import logger

# Stored graph entries must be non-zero for scikit-learn (a sparse zero is "no edge").
_TINY = 1e-6


def _squared_distances(x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                       batch: int = 65536) -> np.ndarray:
    """Row-pair squared distances, in slices (a pair per row of x would not fit in memory)."""
    out = np.empty(len(lo), dtype=np.float32)
    for start in range(0, len(lo), batch):
        diff = x[lo[start : start + batch]] - x[hi[start : start + batch]]
        out[start : start + len(diff)] = np.einsum("ij,ij->i", diff, diff)
    return out


class DbscanClusterer(Clusterer):
    """scikit-learn DBSCAN: ``eps`` in edits (None = from the data), ``min_samples``."""

    method = "dbscan"
    _parameter_constraints = {
        **Clusterer._parameter_constraints,
        "eps": [None, Interval(integer=False, low=0, closed="neither")],
        "min_samples": [Interval(integer=True, low=1)],
    }

    def __init__(
        self,
        eps: float | None = None,
        min_samples: int = 3,
        *,
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
        self.eps = eps
        self.min_samples = min_samples

    def embedding_eps(self, data: FitData, eps: float) -> float:
        """``eps`` edits in squared embedding distance (quantile matching, see the module notes)."""
        sample, dist = self._sample_pairs(data)
        if len(dist) == 0:
            return eps
        left = np.where(
            sample.parity[:, None].astype(bool),
            data.reverse_rows(sample.lo) if data.both else data.forward[sample.lo],
            data.forward[sample.lo],
        )
        embedded = np.sum((left - data.forward[sample.hi]) ** 2, axis=1)
        within = int(np.sum(dist <= eps))
        ordered = np.sort(embedded)
        if within == 0:
            return float(ordered[0]) / 2
        if within == len(ordered):
            return float(ordered[-1])
        return float(ordered[within - 1] + ordered[within]) / 2

    def _cluster(self, data: FitData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from scipy import sparse
        from sklearn.cluster import DBSCAN

        n = len(data)
        if n == 1:
            return np.zeros(1, np.int64), np.zeros(1, np.int8), np.zeros(1)
        forward, reverse = self._neighbours(data)
        if data.both:
            flip = orient_by_neighbours(forward, reverse)
            x = oriented(data.forward, data.reverse_all(), flip)
        else:
            flip = np.zeros(n, dtype=np.int8)
            x = data.forward
        eps = float(self.eps) if self.eps is not None else float(self._threshold(data).max_dist)
        eps_sq = self.embedding_eps(data, eps)
        self.stats_.update(eps=eps, eps_embedding=eps_sq)
        logger.info("DBSCAN eps %.1f edits = %.2f in squared embedding distance", eps, eps_sq)
        start = time.perf_counter()
        pairs = candidate_pairs(forward, reverse)
        pairs = pairs.subset(pairs.parity == (flip[pairs.lo] ^ flip[pairs.hi]))
        d = _squared_distances(x, pairs.lo, pairs.hi)
        close = d <= eps_sq
        lo, hi, d = pairs.lo[close], pairs.hi[close], d[close] + _TINY
        graph = sparse.coo_matrix(
            (np.concatenate([d, d]), (np.concatenate([lo, hi]), np.concatenate([hi, lo]))),
            shape=(n, n),
        ).tocsr()
        graph.sum_duplicates()
        model = DBSCAN(eps=eps_sq + _TINY, min_samples=self.min_samples, metric="precomputed")
        labels = model.fit_predict(graph, sample_weight=data.weights)
        noise = labels < 0
        # Noise reads: each its own cluster, numbered after the real ones.
        labels = labels.astype(np.int64)
        labels[noise] = labels.max(initial=-1) + 1 + np.arange(int(noise.sum()))
        degree = np.asarray((graph > 0).sum(axis=1)).ravel().astype(np.float64)
        self._add_time("dbscan", start)
        return labels, flip.astype(np.int8), degree
