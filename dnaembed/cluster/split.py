"""A check after linking: split a cluster whose reads form two groups.

Why: two related designs (a shifted window, a partner a few dozen edits away)
are farther apart than any two reads of one strand, but a single close pair
of reads between them (two reads whose errors happen to meet) is enough to
link them, and their representatives are close enough for the linking guard
(:mod:`dnaembed.cluster.graph`). The threshold keeps such pairs rare
(:mod:`dnaembed.cluster.threshold`); this check undoes the merges that remain.

The rule, per cluster (``cut``: the cut the data chose, scaled to the longer
read of a pair, even where the user set another for linking
(:meth:`Threshold.same_strand`); reads of full length: at least
:data:`FULL_LENGTH_FRACTION` of the median read length; sizes count collapsed
copies):

1. **Screen** (one exact distance per read): a cluster with at least
   ``2 * MIN_GROUP`` full-length reads has the distance of each of them to its
   centre ``a`` (its most central full-length read) computed. Reads of one
   strand lie within the cut of its centre but for its rare noisiest reads, so
   only a cluster with at least :data:`MIN_GROUP` full-length reads beyond the
   cut is tested.
2. **Test**: ``b`` is the medoid of those far reads (the one with the least
   total distance to the others, among at most :data:`MEDOID_SAMPLE` of them).
   Every read of the cluster goes to the nearer of ``a`` and ``b`` (ties: ``a``).
   The cluster is split in two when
   * each group has at least :data:`MIN_GROUP` full-length reads,
   * ``a`` and ``b`` are farther apart than the cut (they are not one strand),
   * each medoid explains its own group far better than the other one does:
     the median distance of a group's full-length reads (its medoid left out)
     to their own medoid is within the cut, and to the other medoid beyond it.
   Noisy reads of a single strand fail the third condition: they are far from
   each other too, not only from the centre.
3. Each part is checked again (a chain of windows can merge several designs),
   up to :data:`MAX_PARTS` parts per cluster.

Cost: one exact distance per read of a large enough cluster (a fraction of the
linking check's 16 per read), and the test's two distances per read of the
few clusters that show two groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnaembed.cluster.candidates import CandidatePairs, levenshtein_pairs
from dnaembed.cluster.threshold import FULL_LENGTH_FRACTION, Threshold

#: Fewest reads (collapsed copies counted) that make a group of their own.
MIN_GROUP = 3
#: Far reads among which the second medoid is chosen (all pairs among them are checked).
MEDOID_SAMPLE = 24
#: Most parts one cluster is split into.
MAX_PARTS = 16


class _Distances:
    """Exact distances between reads of one cluster, each in its cluster orientation."""

    def __init__(self, seqs: Sequence[str], rc_seqs: Sequence[str] | None,
                 parity: np.ndarray, lengths: np.ndarray, threshold: Threshold,
                 workers: int) -> None:
        self.seqs, self.rc = seqs, rc_seqs
        self.parity, self.lengths = parity, lengths
        self.threshold, self.workers = threshold, workers
        self.computed = 0

    def to(self, reads: np.ndarray, centre: int | np.ndarray,
           cutoff: int | None = None) -> np.ndarray:
        """Distance of each read of ``reads`` to ``centre`` (one, or one per read; 0 to itself)."""
        reads = np.asarray(reads, dtype=np.int64)
        centre = np.broadcast_to(np.asarray(centre, dtype=np.int64), reads.shape)
        other = reads != centre
        out = np.zeros(len(reads), dtype=np.int64)
        if other.any():
            x, c = reads[other], centre[other]
            pairs = CandidatePairs(
                np.minimum(x, c), np.maximum(x, c),
                (self.parity[x] ^ self.parity[c]).astype(np.int8),
                np.zeros(len(x), dtype=np.float32),
            )
            rc = self.rc if pairs.parity.any() else None
            out[other] = levenshtein_pairs(self.seqs, rc, pairs, cutoff=cutoff,
                                           workers=self.workers)
            self.computed += len(x)
        return out

    def cuts(self, reads: np.ndarray, centre: int | np.ndarray) -> np.ndarray:
        """The threshold's cut for each pair of a read of ``reads`` and ``centre``."""
        return self.threshold.cuts(np.maximum(self.lengths[reads], self.lengths[centre]))


def split_clusters(
    seqs: Sequence[str],
    rc_seqs: Sequence[str] | None,
    groups: np.ndarray,
    parity: np.ndarray,
    centrality: np.ndarray,
    weights: np.ndarray,
    threshold: Threshold,
    *,
    lengths: np.ndarray | None = None,
    workers: int = 1,
) -> tuple[np.ndarray, dict[str, int]]:
    """Split clusters whose reads form two groups (see the module notes).

    ``groups``: a group id per read (read indices, as union-find roots are);
    ``parity``: each read's orientation relative to its group. Returns the new
    group ids (a split-off part takes its medoid's read index, which no other
    group uses) and counts: clusters screened, tested and split, distances
    computed. Parities stay valid: they are relative to a frame shared by all parts.
    ``lengths``: the reads' lengths, when known (else measured from ``seqs``).
    """
    groups = np.asarray(groups, dtype=np.int64).copy()
    threshold = threshold.same_strand()  # the data's yardstick, whatever the user's cut
    weights = np.asarray(weights)
    centrality = np.asarray(centrality, dtype=np.float64)
    if lengths is None:
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    lengths = np.asarray(lengths, dtype=np.int64)
    full = lengths >= FULL_LENGTH_FRACTION * float(np.median(lengths)) if len(seqs) else lengths
    dist = _Distances(seqs, rc_seqs, np.asarray(parity, dtype=np.int64), lengths, threshold,
                      workers)
    flagged, screened = _screen(groups, full, centrality, weights, dist)
    splits = 0
    rows = np.flatnonzero(np.isin(groups, flagged))
    rows = rows[np.argsort(groups[rows], kind="stable")]
    bounds = np.flatnonzero(np.diff(groups[rows])) + 1
    for members in (np.split(rows, bounds) if len(rows) else []):
        parts = [members]
        while parts and splits < MAX_PARTS * len(flagged):
            part = parts.pop()
            halves = _split_once(part, dist, full, centrality, weights)
            if halves is None:
                continue
            keep, away, medoid = halves
            groups[away] = medoid
            splits += 1
            if len(parts) + 2 <= MAX_PARTS:
                parts += [keep, away]
    counts = {"split_screened": screened, "split_tested": len(flagged), "splits": splits,
              "split_distances": dist.computed}
    return groups, counts


def _screen(groups: np.ndarray, full: np.ndarray, centrality: np.ndarray, weights: np.ndarray,
            dist: _Distances) -> tuple[np.ndarray, int]:
    """The groups with at least MIN_GROUP full-length reads beyond the cut from their centre.

    One batch of exact distances, each full-length read of a large enough group to
    its group's centre (its most central full-length read; ties: the earliest).
    """
    rows = np.flatnonzero(full)
    ids, inverse = np.unique(groups[rows], return_inverse=True)
    inverse = inverse.reshape(-1)
    sizes = np.bincount(inverse, weights=weights[rows], minlength=len(ids))
    keep = sizes[inverse] >= 2 * MIN_GROUP
    rows, inverse = rows[keep], inverse[keep]
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64), 0
    order = np.lexsort((rows, -centrality[rows], inverse))
    first = np.ones(len(order), dtype=bool)
    first[1:] = inverse[order][1:] != inverse[order][:-1]
    centre = np.zeros(len(ids), dtype=np.int64)
    centre[inverse[order][first]] = rows[order][first]
    cuts = dist.cuts(rows, centre[inverse])
    far = dist.to(rows, centre[inverse], cutoff=int(cuts.max()) + 1) > cuts
    far_weight = np.bincount(inverse[far], weights=weights[rows[far]], minlength=len(ids))
    return ids[far_weight >= MIN_GROUP], int(first.sum())


def _split_once(members: np.ndarray, dist: _Distances, full: np.ndarray,
                centrality: np.ndarray, weights: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The two groups of ``members`` and the second group's medoid, or None (one group)."""
    whole = members[full[members]]
    if weights[whole].sum() < 2 * MIN_GROUP:
        return None
    a = int(whole[np.lexsort((whole, -centrality[whole]))[0]])
    cuts = dist.cuts(whole, a)
    to_a = dist.to(whole, a, cutoff=int(2 * cuts.max()))
    far = whole[to_a > cuts]
    if weights[far].sum() < MIN_GROUP:
        return None
    b = _medoid(far, dist)
    to_a_all = dist.to(members, a)
    to_b_all = dist.to(members, b)
    in_b = to_b_all < to_a_all
    group_b, group_a = members[in_b], members[~in_b]
    full_b, full_a = in_b & full[members], ~in_b & full[members]
    if weights[members[full_b]].sum() < MIN_GROUP or weights[members[full_a]].sum() < MIN_GROUP:
        return None
    cut_ab = int(dist.cuts(np.array([b]), a)[0])
    if dist.to(np.array([b]), a)[0] <= cut_ab:
        return None
    cut = dist.cuts(members, a)  # per pair; a and b are both of full length
    if not (_explains(members, full_b, b, to_b_all, to_a_all, cut)
            and _explains(members, full_a, a, to_a_all, to_b_all, cut)):
        return None
    return group_a, group_b, b


def _explains(members: np.ndarray, mask: np.ndarray, medoid: int, own: np.ndarray,
              other: np.ndarray, cut: np.ndarray) -> bool:
    """A group's full-length reads are within the cut of their medoid and beyond the other's."""
    use = mask & (members != medoid)
    if not use.any():
        return False
    return bool(np.median(own[use] - cut[use]) <= 0 < np.median(other[use] - cut[use]))


def _medoid(reads: np.ndarray, dist: _Distances) -> int:
    """The read of ``reads`` (at most MEDOID_SAMPLE of them, evenly spaced) nearest the others."""
    if len(reads) > MEDOID_SAMPLE:
        reads = reads[np.linspace(0, len(reads) - 1, MEDOID_SAMPLE).round().astype(np.int64)]
    totals = [int(dist.to(reads, int(r)).sum()) for r in reads.tolist()]
    return int(reads[int(np.argmin(totals))])
