"""The interface every clustering method shares, and the steps they share.

Each method is an estimator in the scikit-learn style: hyper-parameters in
``__init__``, ``fit`` / ``fit_predict(embeddings, reads)``, learned state in
attributes with a trailing underscore:

* ``labels_``: cluster of every read, ``0..n_clusters_-1`` by decreasing size
  (ties: the cluster holding the earlier read first); singletons included;
* ``orientation_``: 1 where a read is the reverse complement of its cluster's
  representative (always 0 when only one orientation is clustered);
* ``representatives_``: the representative read of each cluster (its most
  central read of full length, i.e. at least 90% of the median read length,
  when it has one), in the orientation all its reads are given relative to;
* ``threshold_``: the edit-distance cut used (a :class:`Threshold`), when the
  method needed one; ``timings_`` (seconds per stage) and ``stats_`` (counts).

Both orientations: pass ``reverse``, the embeddings of the reads' reverse
complements (same row order), or a function ``reverse(rows) -> embeddings`` of
the reverse complements of those rows only. The graph method needs the
reverse complements of only one read per cluster, so a function saves half
the embedding work (see :mod:`dnaembed.cluster.graph`).

``sample_weight`` counts identical reads collapsed into one row (see
:mod:`dnaembed.cluster.dedupe`): cluster sizes, centrality and k-means use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dnaembed.cluster.candidates import (
    CandidatePairs,
    candidate_pairs,
    distances_within_cuts,
    levenshtein_pairs,
)
from dnaembed.cluster.labels import assemble
from dnaembed.cluster.params import Interval, Options, validate_params
from dnaembed.cluster.search import PROJECTED_DIM, NeighbourIndex, Neighbours, self_neighbours
from dnaembed.cluster.threshold import (
    FULL_LENGTH_FRACTION,
    SAMPLE_PAIRS,
    Threshold,
    sample_threshold,
)
from dnaembed.encoding import reverse_complement
from dnaembed.errors import DnaembedError
from dnaembed.log import logger

#: Reads whose neighbours are checked in full to choose the threshold (in-memory
#: estimators; the partitioned path's: :data:`~dnaembed.cluster.threshold_sample.SAMPLE_READS`).
#: Why not as many here: the sample is searched among all reads, and 16,000 reads with
#: all their pairs cost kmeans 12.8 s more at 10^5 nanopore reads (80.6 against 67.8 s)
#: and dbscan 7.7 s (70.1 against 62.4; one run each), their scores the same.
THRESHOLD_SAMPLE_READS = 4_000

ReverseSource = np.ndarray | Callable[[np.ndarray], np.ndarray]


@dataclass
class FitData:
    """What one ``fit`` works on, validated, with the derived data each step may need."""

    forward: np.ndarray
    reverse_source: ReverseSource | None
    seqs: Sequence[str]
    weights: np.ndarray
    lengths: np.ndarray
    rc_seqs: list[str] | None = None
    index: NeighbourIndex | None = None
    neighbours: tuple[Neighbours, Neighbours | None] | None = None
    reverse_cache: np.ndarray | None = None
    reverse_known: np.ndarray | None = None
    cache: dict = field(default_factory=dict)
    seconds_embedding: float = 0.0

    def __len__(self) -> int:
        return len(self.seqs)

    @property
    def both(self) -> bool:
        """Whether reverse complements are clustered too (their embeddings can be had)."""
        return self.reverse_source is not None

    @property
    def median_length(self) -> float:
        """The reads' median length (0 for none)."""
        return float(np.median(self.lengths)) if len(self.lengths) else 0.0

    def reverse_rows(self, rows: np.ndarray) -> np.ndarray:
        """Embeddings of the reverse complements of ``rows`` (computed once, on demand)."""
        if self.reverse_source is None:
            raise DnaembedError("reverse-complement embeddings were not given")
        if not callable(self.reverse_source):
            return self.reverse_source[rows]
        if self.reverse_cache is None:
            self.reverse_cache = np.zeros_like(self.forward)
            self.reverse_known = np.zeros(len(self.forward), dtype=bool)
        rows = np.asarray(rows, dtype=np.int64)
        todo = np.unique(rows[~self.reverse_known[rows]])
        if len(todo):
            start = time.perf_counter()
            vectors = np.asarray(self.reverse_source(todo), dtype=np.float32)
            if vectors.shape != (len(todo), self.forward.shape[1]):
                raise DnaembedError(
                    f"reverse(rows) returned shape {vectors.shape}, expected "
                    f"{(len(todo), self.forward.shape[1])}"
                )
            self.reverse_cache[todo] = vectors
            self.reverse_known[todo] = True
            self.seconds_embedding += time.perf_counter() - start
        return self.reverse_cache[rows]

    def reverse_all(self) -> np.ndarray:
        """Embeddings of the reverse complements of every read (:meth:`reverse_rows`)."""
        return self.reverse_rows(np.arange(len(self)))


class Clusterer:
    """Base class of the clustering estimators (see the module notes)."""

    method = "base"
    #: The values each hyper-parameter accepts (:mod:`dnaembed.cluster.params`).
    _parameter_constraints: dict[str, list] = {
        "neighbours": [Interval(integer=True, low=1)],
        "index": [Options(("auto", "exact", "hnsw"))],
        "index_dim": [Interval(integer=True, low=0)],
        "rescue": ["boolean"],
        "rescue_max_size": [Interval(integer=True, low=1)],
        "threads": [Interval(integer=True, low=0)],
        "seed": [Interval(integer=True, low=0)],
    }

    def __init__(
        self,
        *,
        neighbours: int = 16,
        index: str = "auto",
        index_dim: int = PROJECTED_DIM,
        rescue: bool = True,
        rescue_max_size: int = 2,
        threads: int = 0,
        seed: int = 0,
    ) -> None:
        self.neighbours = neighbours
        self.index = index
        self.index_dim = index_dim
        self.rescue = rescue
        self.rescue_max_size = rescue_max_size
        self.threads = threads
        self.seed = seed

    # ------------------------------------------------------------ interface

    def fit(
        self,
        embeddings: np.ndarray,
        reads: Sequence[str],
        *,
        reverse: ReverseSource | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> Clusterer:
        """Cluster ``reads`` (upper-case ACGTN strings) given their embeddings.

        Reads far longer than the rest are set apart first, so that they change
        no other read's cluster (:mod:`dnaembed.cluster.extreme`).
        """
        from dnaembed.cluster.extreme import far_longer, fit_set_apart

        validate_params(self, self._parameter_constraints)
        data = self._validate(embeddings, reads, reverse, sample_weight)
        apart = far_longer(data.lengths)
        if apart.any():
            return fit_set_apart(self, data, apart)
        return self._fit_data(data)

    def _fit_data(self, data: FitData) -> Clusterer:
        """``fit`` on validated data."""
        self.timings_: dict[str, float] = {}
        self.stats_: dict[str, object] = {}
        self.threshold_: Threshold | None = None
        n = len(data)
        if n == 0:
            self.labels_ = np.zeros(0, dtype=np.int64)
            self.orientation_ = np.zeros(0, dtype=np.int8)
            self.representatives_ = np.zeros(0, dtype=np.int64)
            self.n_clusters_ = 0
            return self
        groups, parity, centrality = self._cluster(data)
        # Representatives are full-length reads wherever a cluster has one: the rescue aligns
        # reads into them, and consensus starts from them.
        full_length = FULL_LENGTH_FRACTION * data.median_length
        centrality = np.asarray(centrality, dtype=np.float64)
        lift = float(np.abs(centrality).max(initial=0.0)) * 2 + 1
        centrality = centrality + lift * (data.lengths >= full_length)
        labels, orient, reps = assemble(groups, parity, centrality, data.weights)
        if self.rescue and n > 2:
            from dnaembed.cluster.rescue import rescue_reads
            from dnaembed.cluster.rescue_rule import rescue_settings

            start = time.perf_counter()
            embedded_before = data.seconds_embedding
            max_size, search = rescue_settings(self._threshold(data).error_rate,
                                               self.rescue_max_size)
            labels, orient, reps, rescued = rescue_reads(
                data.seqs,
                self._rc_seqs(data),
                labels,
                orient,
                centrality,
                data.weights,
                self._rescue_candidates(data),
                rate=self._threshold(data).rescue_rate,
                max_size=max_size,
                full_length=full_length,
                seed=self.seed,
                search=search,
            )
            self.stats_["rescued"] = rescued
            self._add_time("rescue", start)
            # Reverse complements embedded on demand for the rescue count as embedding.
            self.timings_["rescue"] -= data.seconds_embedding - embedded_before
        if data.seconds_embedding:
            self.timings_["embed"] = data.seconds_embedding
        self.labels_ = labels
        self.orientation_ = orient
        self.representatives_ = reps
        self.n_clusters_ = len(reps)
        return self

    def fit_predict(
        self,
        embeddings: np.ndarray,
        reads: Sequence[str],
        *,
        reverse: ReverseSource | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> np.ndarray:
        """``fit`` and return ``labels_``."""
        return self.fit(embeddings, reads, reverse=reverse, sample_weight=sample_weight).labels_

    def get_params(self) -> dict[str, object]:
        """Hyper-parameters (for the provenance line of output files)."""
        return {k: v for k, v in vars(self).items() if not k.endswith("_")}

    # ------------------------------------------------------------ for subclasses

    def _cluster(self, data: FitData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Group the reads: a group id per read, its parity relative to the group, centrality."""
        raise NotImplementedError

    # ------------------------------------------------------------ shared steps

    def _validate(self, embeddings, reads, reverse, sample_weight) -> FitData:
        x = np.asarray(embeddings, dtype=np.float32)
        n = len(reads)
        if x.ndim != 2 or len(x) != n:
            raise DnaembedError(
                f"embeddings must be (n_reads, dim) with one row per read: got shape "
                f"{x.shape} for {n} reads"
            )
        if not np.isfinite(x).all():
            raise DnaembedError("embeddings contain NaN or infinite values")
        if reverse is not None and not callable(reverse):
            reverse = np.asarray(reverse, dtype=np.float32)
            if reverse.shape != x.shape:
                raise DnaembedError(
                    f"reverse embeddings must have the shape of the embeddings {x.shape}, "
                    f"got {reverse.shape}"
                )
        if sample_weight is None:
            w = np.ones(n, dtype=np.int64)
        else:
            w = np.asarray(sample_weight, dtype=np.int64)
            if w.shape != (n,) or (w < 1).any():
                raise DnaembedError("sample_weight must be one positive count per read")
        lengths = np.fromiter((len(s) for s in reads), dtype=np.int64, count=n)
        return FitData(x, reverse, reads, w, lengths)

    def _k(self, data: FitData) -> int:
        return min(self.neighbours, max(len(data) - 1, 1))

    def _rc_seqs(self, data: FitData) -> list[str] | None:
        if data.both and data.rc_seqs is None:
            data.rc_seqs = [reverse_complement(s) for s in data.seqs]
        return data.rc_seqs

    def _index(self, data: FitData) -> NeighbourIndex:
        if data.index is None:
            start = time.perf_counter()
            data.index = NeighbourIndex(
                data.forward, kind=self.index, projected_dim=self.index_dim
            )
            self.stats_["index_dim"] = data.index.search_dim
            self._add_time("search", start)
        return data.index

    def _neighbours(
        self, data: FitData, *, reverse: bool = True
    ) -> tuple[Neighbours, Neighbours | None]:
        """Each read's nearest reads, as read and (``reverse`` and both) reverse-complemented."""
        if data.neighbours is None:
            index = self._index(data)
            k = self._k(data)
            start = time.perf_counter()
            forward = self_neighbours(index, data.forward, k)
            self._add_time("search", start)
            rev = None
            if reverse and data.both:
                vectors = data.reverse_all()
                start = time.perf_counter()
                rev = index.search(vectors, k)
                self._add_time("search", start)
            data.neighbours = (forward, rev)
            logger.debug(
                "searched %d nearest neighbours (%s index, %d-d)", k, index.kind, index.search_dim
            )
        return data.neighbours

    def _search_rows(self, data: FitData, rows: np.ndarray, k: int | None = None
                     ) -> tuple[Neighbours, Neighbours | None]:
        """Neighbours of a few rows only (self included in the forward list), ``k`` of them
        (default: the clusterer's).

        Uses the index when there is one, else searches exactly: for a sample
        that costs less than building a graph index over all reads.
        """
        if data.index is None and "exact" not in data.cache:
            data.cache["exact"] = NeighbourIndex(data.forward, kind="exact")
        index = data.index if data.index is not None else data.cache["exact"]
        k = self._k(data) if k is None else k
        start = time.perf_counter()
        found = index.search(data.forward[rows], k + 1)
        self._add_time("search", start)
        rev = None
        if data.both:
            vectors = data.reverse_rows(rows)
            start = time.perf_counter()
            rev = index.search(vectors, k)
            self._add_time("search", start)
        return Neighbours(found.distances, found.indices), rev

    def _sample_rows(self, data: FitData, size: int) -> np.ndarray:
        n = len(data)
        if n <= size:
            return np.arange(n)
        rng = np.random.default_rng([self.seed, 7])
        return np.sort(rng.choice(n, size, replace=False))

    def _sample_pairs(self, data: FitData) -> tuple[CandidatePairs, np.ndarray]:
        """Candidate pairs of a sample of reads, with their full exact distances (cached)."""
        if "sample" in data.cache:
            return data.cache["sample"]
        rows = self._sample_rows(data, THRESHOLD_SAMPLE_READS)
        if data.neighbours is not None:
            fwd, rev = data.neighbours
            fwd = Neighbours(fwd.distances[rows], fwd.indices[rows])
            rev = Neighbours(rev.distances[rows], rev.indices[rows]) if rev is not None else None
        else:
            fwd, rev = self._search_rows(data, rows)
        sample = candidate_pairs(fwd, rev, rows=rows)
        nonempty = (data.lengths[sample.lo] > 0) & (data.lengths[sample.hi] > 0)
        sample = sample.subset(nonempty)
        if len(sample) > SAMPLE_PAIRS:
            rng = np.random.default_rng([self.seed, 8])
            sample = sample.subset(np.sort(rng.choice(len(sample), SAMPLE_PAIRS, replace=False)))
        start = time.perf_counter()
        rc = self._rc_seqs(data) if sample.parity.any() else None
        dist = levenshtein_pairs(data.seqs, rc, sample, workers=self._workers()).astype(np.int64)
        self._add_time("check", start)
        data.cache["sample"] = (sample, dist)
        return sample, dist

    def _threshold(self, data: FitData, user_value: int | None = None) -> Threshold:
        """The edit-distance cut: the user's, or chosen from the data (cached)."""
        if self.threshold_ is not None:
            return self.threshold_
        sample, dist = self._sample_pairs(data)
        lo, hi = data.lengths[sample.lo], data.lengths[sample.hi]
        est, use = sample_threshold(dist, np.minimum(lo, hi), np.maximum(lo, hi),
                                    data.median_length, user_value)
        # The sampled distances behind the cut, for the summary and its plot.
        self.stats_["distance_histogram"] = np.bincount(dist[use])
        self.threshold_ = est
        noisy = est.source == "fallback" and len(data) > 50
        (logger.warning if noisy else logger.info)("%s", est.describe())
        return est

    def _check(self, data: FitData, pairs: CandidatePairs, threshold: Threshold
               ) -> tuple[CandidatePairs, np.ndarray]:
        """The pairs within the threshold (exact Levenshtein, cut per length), and distances."""
        dist = self._exact_distances(data, pairs, threshold)
        close = dist >= 0
        self.stats_["verified_pairs"] = int(self.stats_.get("verified_pairs", 0)) + int(close.sum())
        return pairs.subset(close), dist[close]

    def _exact_distances(self, data: FitData, pairs: CandidatePairs, threshold: Threshold
                         ) -> np.ndarray:
        """Each pair's exact distance where within the threshold's cut, else -1."""
        lengths = data.lengths
        cuts = threshold.cuts(np.maximum(lengths[pairs.lo], lengths[pairs.hi]))
        # A length difference over the cut already rules a pair out; empty reads never link.
        possible = (np.abs(lengths[pairs.lo] - lengths[pairs.hi]) <= cuts) & (
            np.minimum(lengths[pairs.lo], lengths[pairs.hi]) > 0
        )
        checked = pairs.subset(possible)
        cuts = cuts[possible]
        start = time.perf_counter()
        rc = self._rc_seqs(data) if checked.parity.any() else None
        dist = distances_within_cuts(data.seqs, rc, checked, cuts, workers=self._workers())
        self._add_time("check", start)
        out = np.full(len(pairs), -1, dtype=np.int64)
        out[np.flatnonzero(possible)[dist <= cuts]] = dist[dist <= cuts]
        for key, value in (("candidate_pairs", len(pairs)), ("checked_pairs", len(checked))):
            self.stats_[key] = int(self.stats_.get(key, 0)) + value
        return out

    def _rescue_candidates(self, data: FitData) -> Callable[[np.ndarray], tuple]:
        """Nearest reads (by embedding, both orientations) of given rows: (indices, distances)."""

        def neighbours_of(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if data.neighbours is not None:
                fwd, rev = data.neighbours
                fwd = Neighbours(fwd.distances[rows], fwd.indices[rows])
                if rev is not None:
                    rev = Neighbours(rev.distances[rows], rev.indices[rows])
                elif data.both:
                    vectors = data.reverse_rows(rows)
                    start = time.perf_counter()
                    rev = self._index(data).search(vectors, self._k(data))
                    self._add_time("search", start)
            else:
                fwd, rev = self._search_rows(data, rows)
            if rev is None:
                return fwd.indices, fwd.distances
            return (
                np.concatenate([fwd.indices, rev.indices], axis=1),
                np.concatenate([fwd.distances, rev.distances], axis=1),
            )

        return neighbours_of

    def _workers(self) -> int:
        from dnaembed.log import set_threads

        return self.threads if self.threads > 0 else set_threads(None)

    def _add_time(self, stage: str, start: float) -> None:
        self.timings_[stage] = self.timings_.get(stage, 0.0) + time.perf_counter() - start
