"""DBSCAN whose links are checked: exact edit distances, split as HDBSCAN does.

1. Neighbourhoods: each read's ``neighbours`` nearest reads in embedding space, as
   read and reverse-complemented (faiss), then the exact Levenshtein distance of
   every candidate pair (C, bit-parallel, all cores); pairs over ``eps`` are
   dropped. ``eps`` is in edits for reads of the median length and scales with
   the longer read's length, like the graph method's threshold (default: that
   threshold, chosen from the data, :mod:`dnaembed.cluster.threshold`). The
   embedding only proposes; no link rests on an embedding distance.
2. DBSCAN on those exact distances: core reads have ``min_samples`` reads within
   ``eps`` (themselves and collapsed copies included); core reads within ``eps``
   of each other are linked; border reads join their nearest core read's cluster.
3. HDBSCAN's split (``min_cluster_size``; None: plain DBSCAN): links are taken in
   order of mutual reachability, and a DBSCAN cluster that is two or more dense
   groups joined at a larger distance (strands chained through a few bridging
   reads, or through what all designs share, such as primers) is split into
   them, each of at least ``min_cluster_size`` reads
   (:mod:`dnaembed.cluster.density`).
4. Noise (reads with no core read within ``eps``; loose reads that fell out of a
   cluster before it split) become singletons, and get the rescue of
   :mod:`dnaembed.cluster.rescue` like every method's leftovers.

Each read's orientation comes from the links (each pair carries its parity), so
no separate orientation step is needed.

Memory: the neighbourhoods are the candidate lists (``neighbours`` per read and
orientation), never an N x N matrix. A read with more reads within ``eps`` than
that sees only the nearest ones, which is enough to make it a core read for any
``min_samples <= neighbours + 1``. Cost: the graph method's searches and checks,
with every read's reverse complement embedded (the graph method embeds one per
cluster), and one sort of the verified pairs.
More in ``docs/algorithms.md`` and ``docs/vector-clustering.md``.
"""

from __future__ import annotations

import time

import numpy as np

from dnaembed.cluster.base import Clusterer, FitData
from dnaembed.cluster.candidates import candidate_pairs
from dnaembed.cluster.density import core_distances, density_clusters
from dnaembed.cluster.params import Interval
from dnaembed.cluster.search import PROJECTED_DIM
from dnaembed.log import logger


class DbscanClusterer(Clusterer):
    """DBSCAN on exact edit distances (see the module notes).

    Parameters: ``eps`` (edits at the median read length; None = the data-derived
    threshold), ``min_samples`` (weight within ``eps`` that makes a core read),
    ``min_cluster_size`` (smallest part a cluster is split into; None = no split),
    and the shared ones of :class:`~dnaembed.cluster.base.Clusterer`.
    """

    method = "dbscan"
    _parameter_constraints = {
        **Clusterer._parameter_constraints,
        "eps": [None, Interval(integer=False, low=0, closed="neither")],
        "min_samples": [Interval(integer=True, low=1)],
        "min_cluster_size": [None, Interval(integer=True, low=2)],
    }

    def __init__(
        self,
        eps: float | None = None,
        min_samples: int = 3,
        *,
        min_cluster_size: int | None = 5,
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
        self.min_cluster_size = min_cluster_size

    def _cluster(self, data: FitData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(data)
        if n == 1:
            return np.zeros(1, np.int64), np.zeros(1, np.int8), np.zeros(1)
        forward, reverse = self._neighbours(data)
        user = None if self.eps is None else max(0, int(np.floor(self.eps)))
        threshold = self._threshold(data, user)
        edges, dist = self._check(data, candidate_pairs(forward, reverse), threshold)
        start = time.perf_counter()
        core = core_distances(n, edges.lo, edges.hi, dist, data.weights, self.min_samples)
        found = density_clusters(n, edges, dist, core, data.weights,
                                 eps=float(threshold.max_dist),
                                 min_cluster_size=self.min_cluster_size)
        self._add_time("dbscan", start)
        w = data.weights.astype(np.float64)
        degree = (w - 1) + np.bincount(edges.lo, weights=w[edges.hi], minlength=n) + np.bincount(
            edges.hi, weights=w[edges.lo], minlength=n
        )
        self.stats_.update(eps=threshold.max_dist, core_reads=int(np.isfinite(core).sum()),
                           noise_reads=int(found.noise.sum()), split_clusters=found.splits)
        logger.info("DBSCAN eps %d edits: %d core reads, %d noise, %d clusters split",
                    threshold.max_dist, self.stats_["core_reads"], self.stats_["noise_reads"],
                    found.splits)
        return found.groups, found.parity, degree
