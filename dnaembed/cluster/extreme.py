"""Reads far longer than the rest: set apart, so that they change no other read's cluster.

A read of 10,000 nt among reads of 150 (a concatemer, a stray molecule, a
sequencer artefact) is no strand's read, yet in the clustering it takes a
place in other reads' neighbour lists and in the threshold's sample, so its
presence alone could move other reads. Reads longer than
:data:`EXTREME_FACTOR` times the 95th percentile of read lengths are therefore
taken out before the clustering: the others are clustered exactly as if these
reads were not there. Then the reads set apart are linked among themselves,
every pair checked exactly (both orientations when both are clustered) under
the cut the others chose, scaled to their length (:meth:`Threshold.cuts`): a
few copies of one long design form a cluster, a lone long read is a singleton.
They never join the other reads' clusters: a read several times longer than a
strand is that many edits from each of its reads.

At most :data:`MAX_APART` reads are set apart; more than that is a population
of long designs, not a few outliers, and everything is clustered together (the
cut is per base of read length, and the threshold's sample leaves pairs of
unusual lengths out).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dnaembed.cluster.labels import assemble
from dnaembed.cluster.threshold import Threshold, fallback_threshold
from dnaembed.cluster.unionfind import ParityUnionFind

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dnaembed.cluster.base import Clusterer, FitData
    from dnaembed.cluster.units import UnitSequences

#: A read longer than this multiple of the 95th percentile of read lengths is set apart.
EXTREME_FACTOR = 1.5
#: Most reads set apart (all their pairs are checked).
MAX_APART = 1000


def far_longer(lengths: np.ndarray) -> np.ndarray:
    """Mask of the reads to set apart (see the module notes); all False when none or too many."""
    lengths = np.asarray(lengths)
    if len(lengths) < 3:
        return np.zeros(len(lengths), dtype=bool)
    mask = lengths > EXTREME_FACTOR * float(np.percentile(lengths, 95))
    if mask.sum() > MAX_APART:
        mask[:] = False
    return mask


def subset(data: FitData, rows: np.ndarray) -> FitData:
    """``data`` restricted to ``rows`` (derived data rebuilt on demand)."""
    from dnaembed.cluster.base import FitData

    source = data.reverse_source
    if callable(source):
        full = source

        def source(sub_rows: np.ndarray) -> np.ndarray:
            return full(rows[sub_rows])
    elif source is not None:
        source = source[rows]
    return FitData(data.forward[rows], source, [data.seqs[i] for i in rows.tolist()],
                   data.weights[rows], data.lengths[rows])


def fit_set_apart(est: Clusterer, data: FitData, apart: np.ndarray) -> Clusterer:
    """Fit ``est`` on the reads not ``apart``, then add those as clusters of their own."""
    rest = np.flatnonzero(~apart)
    sub = subset(data, rest)
    est._fit_data(sub)
    if sub.seconds_embedding:
        data.seconds_embedding += sub.seconds_embedding
    labels, orient, reps = join_set_apart(
        data.seqs, data.lengths, data.weights, apart, est.labels_, est.orientation_,
        est.representatives_, est.threshold_, both=data.both)
    est.labels_, est.orientation_, est.representatives_ = labels, orient, reps
    est.n_clusters_ = len(reps)
    est.stats_["set_apart"] = int(apart.sum())
    return est


def join_set_apart(seqs: Sequence[str] | UnitSequences, lengths: np.ndarray,
                   weights: np.ndarray, apart: np.ndarray,
                   labels: np.ndarray, orientation: np.ndarray, representatives: np.ndarray,
                   threshold: Threshold | None, *, both: bool
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The others' clusters (``labels``, ``orientation``, ``representatives``: of the reads
    not ``apart``, in order) with the reads set apart linked among themselves, as clusters
    after theirs. Returns labels, orientations and representatives of every read."""
    rest = np.flatnonzero(~apart)
    away = np.flatnonzero(apart)
    if threshold is None:
        median = float(np.median(lengths[away]))
        threshold = Threshold(fallback_threshold(median), "fallback", reference_length=median)
    groups, parity = link_among(seqs, away, threshold, both=both)
    n = len(apart)
    all_groups = np.empty(n, dtype=np.int64)
    all_parity = np.zeros(n, dtype=np.int8)
    all_groups[rest] = labels
    all_parity[rest] = orientation
    all_groups[away] = len(representatives) + groups
    all_parity[away] = parity
    # The clusters of the others keep their representatives; those set apart get their first.
    centrality = np.zeros(n)
    centrality[rest[representatives]] = 1.0
    return assemble(all_groups, all_parity, centrality, weights)


def link_among(seqs: Sequence[str] | UnitSequences, rows: np.ndarray, threshold: Threshold,
               *, both: bool
               ) -> tuple[np.ndarray, np.ndarray]:
    """Groups (0..) and parities of the reads ``rows``, every pair within the cut linked."""
    from rapidfuzz.distance import Levenshtein

    from dnaembed.encoding import reverse_complement

    reads = [seqs[i] for i in rows.tolist()]
    rc = [reverse_complement(s) for s in reads] if both else None
    found = []
    for i in range(len(reads)):
        for j in range(i + 1, len(reads)):
            cut = int(threshold.cuts(np.array([max(len(reads[i]), len(reads[j]))]))[0])
            d = Levenshtein.distance(reads[i], reads[j], score_cutoff=cut)
            p = 0
            if rc is not None:
                d_rc = Levenshtein.distance(rc[i], reads[j], score_cutoff=cut)
                d, p = (d_rc, 1) if d_rc < d else (d, 0)
            if d <= cut:
                found.append((d, i, j, p))
    uf = ParityUnionFind(len(reads))
    for _, i, j, p in sorted(found):
        ri, pi = uf.find(i)
        rj, pj = uf.find(j)
        if ri != rj:
            uf.union_roots(ri, rj, pi ^ p ^ pj)
    roots, parity = uf.labels()
    _, groups = np.unique(roots, return_inverse=True)
    return groups.reshape(-1).astype(np.int64), parity
