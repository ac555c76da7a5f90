"""The edit-distance threshold that separates reads of one strand from everything else.

Chosen from the data, not from the channel or the model. The exact
Levenshtein distances of a random sample of candidate pairs (each read against
its nearest embedding neighbours) fall into groups: pairs of reads of the same
strand (twice the per-read error budget apart, 0-50 edits at 150 nt), pairs of
reads of *related* designs where the pool has them (overlapping windows,
shared address regions: anywhere between), and the nearest unrelated reads
(60-80 edits for random strands, less where all strands share primers).

The cut is the **upper tail of the same-strand population**, not the middle of
the gap to the unrelated peak: related designs form a third population inside
that gap (method.md, "Design pools are not random"), and a cut in the middle
of it merges them. The same-strand population is found and measured on its
own side, below its peak, where no other population reaches:

1. distances as rates per base, expressed at the reference length (the median
   read length): ``d * reference / longer``; pairs farther apart than the
   reference length itself (outliers) are left out, so that no single extreme
   pair can move the histogram's split;
2. histogram, smoothed over 5 edits; Otsu's split; the tallest bin on each
   side is a peak: the same-strand peak ``m`` and the unrelated peak. A lower
   peak farther than the fallback's 30% of the length is no same-strand peak
   (where few reads share a strand, the unrelated pairs' own two populations
   outweigh theirs): the same-strand peak is then the tallest bin within
   that bound that a valley separates from it, and without one the fallback
   applies;
3. the same-strand population: every pair up to the lowest point of the
   histogram before the next population, else up to the lowest point before
   the valley rule's cut of step 5. The next population (related designs) is
   sought among pairs of equal lengths (a pair of a read and one that lost a
   few bases lies as far apart as the bases lost): where their histogram, once
   at most half the peak, rises again to 3% of it and to twice its lowest point
   since, by more than 4 standard deviations (a small sample's noise is no
   population); smoothed over at most half the peak's distance, as at low
   error rates the same-strand peak lies 2-4 edits from zero;
4. its upper tail, measured: ``x10`` and ``x1``, the distances that 10% and 1%
   of those pairs exceed. The cut is ``x1 + TAIL_DECADES * (x1 - x10)``: the
   tail extrapolated as exponential (each further tenth of the pairs as many
   edits farther as the last), one decade on, so about one same-strand pair
   in a thousand lies beyond it. An exponential tail is what real reads show
   (a few reads carry many errors); a Poisson-like one (simulated channels)
   falls faster, so the cut is generous there. A read needs only one
   same-strand read within the cut to join its cluster, and reads left alone
   get the rescue (:mod:`dnaembed.cluster.rescue`);
5. the cut never passes the old valley rule: the middle of the emptiest stretch
   between the two peaks (bins within 10% of the lowest, relative to the
   smaller peak; the longest run's midpoint). With fewer than
   :data:`MIN_TAIL_PAIRS` same-strand pairs the tail is not measured and the
   valley rule decides. Where step 3 found a related population, the cut
   passes neither the bin before the middle of the trough between them nor
   the related pairs' own lower tail (the same-strand population's, moved to
   their summit: ~1 related pair in 1,000 within the cut), since one related
   pair within the cut joins two strands. The rule is then ``trough`` or
   ``related`` (:func:`~dnaembed.cluster.populations.same_strand_cut`).
   Related designs past the valley (partners 40 substitutions apart at nanopore
   rates) leave the cut as it is, but bound the rescue
   (:attr:`Threshold.rescue_rate`) where they stand apart from the unrelated
   pairs too (:func:`~dnaembed.cluster.populations.related_past_valley`).

The log line gives the peak, the per-read error rate it shows (half a pair's
edits per base, ``m / (2 * reference)``), the tail's two points and the cut.

Pairs where either read is much shorter or much longer than the typical read
are left out when enough others remain (:mod:`dnaembed.cluster.base`): a
truncated read is far from everything by its missing length, and a read far
longer than the rest is far from everything by its extra length.

The cut is a rate per base, not a constant: a pair is within it when its
distance is at most ``max_dist * L / reference_length``, where ``L`` is the
longer read's length. Full-length reads are held to ``max_dist``; two short
reads, which agree on their primers and differ in few other bases, are held to
the same fraction of their length instead of a distance that only separates
full-length reads.

When the histogram has no second peak, or no valley between its two, and its
peak is plausible (within the bound of step 2: at high coverage every
neighbour of a read is its own strand's), the cut is that population's tail as
in step 4, where it lies below the fallback. Otherwise (only singletons, a tiny
input, a population that reaches past it) the threshold falls back to 30% of
the median read length: above twice
the per-read error of the noisiest channel presets (~12%) and below the distance of
unrelated random sequences (~53% of the length). A warning says so.
The histogram's populations are read in :mod:`dnaembed.cluster.populations`.
More in ``docs/algorithms.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dnaembed.cluster.populations import (
    MIN_TAIL_PAIRS,
    SMOOTH,
    longest_run,
    related_past_valley,
    same_strand_cut,
    smoothed,
    two_peaks,
)

#: Sampled pairs whose full distance is computed to choose the threshold, in the
#: in-memory estimators (the partitioned path's sample is larger:
#: :mod:`dnaembed.cluster.threshold_sample`).
SAMPLE_PAIRS = 20_000
#: The fallback's reason where the sampled pairs hold no same-strand population.
_NO_SAME_STRAND_PEAK = ("the sampled pairs show no reads of one strand: their nearest "
                        "population lies farther apart than reads of one strand do")
#: Fewer pairs than this: no histogram, the fallback rule applies.
MIN_PAIRS = 100
#: Fallback threshold as a fraction of the median read length.
FALLBACK_FRACTION = 0.30
#: Pairs whose lengths differ by at most this fraction of the reference (or 2 nt) are of
#: equal lengths: indels alone, no lost ends.
EQUAL_LENGTHS = 0.02


@dataclass
class Threshold:
    """The chosen edit-distance cut and how it was found.

    ``reference_length``: the read length ``max_dist`` applies to (0: the same
    cut for every length).
    """

    max_dist: int
    source: str  # "data", "fallback" or "user"
    same_peak: int | None = None
    unrelated_peak: int | None = None
    pairs: int = 0
    reference_length: float = 0.0
    #: The same-strand tail: distances that 10% and 1% of its pairs exceed; the valley
    #: rule's cut; which rule won ("tail" or "valley").
    tail: tuple[float, float] | None = None
    valley: int | None = None
    rule: str = ""
    #: The cut the data chose, kept when the user overrides ``max_dist``: what separates
    #: reads of one strand from the rest, for checks that must not move with the override.
    data_cut: int | None = None
    #: Why the fallback applies, for the log ("" : the data showed no gap).
    why: str = ""
    #: The trough before a population of related designs, between the same-strand and the
    #: unrelated pairs (None: none found); the cut never passes it.
    related_trough: int | None = None

    def same_strand(self) -> Threshold:
        """This threshold with the cut the data chose (itself when there is none)."""
        if self.data_cut is None or self.data_cut == self.max_dist:
            return self
        return dataclasses.replace(self, max_dist=self.data_cut)

    @property
    def rate(self) -> float:
        """The cut per base of read length."""
        return self.max_dist / self.reference_length if self.reference_length > 0 else 1.0

    @property
    def rescue_rate(self) -> float:
        """Per-base bound of the rescue's alignments: halfway from the cut to the next
        population, related designs' trough or else the unrelated peak.

        The rescue's evidence is its margin over the runner-up; this bound only
        keeps alignments clearly below what other strands' reads reach. A related
        design is the runner-up by a wide margin when its partner has one or two
        reads: halfway to the unrelated peak, the rescue moved such reads to their
        partner's cluster. Past the valley, related designs count only where they
        fall again before the unrelated peak
        (:func:`~dnaembed.cluster.populations.related_past_valley`): a looser
        population there (at ~30 edits in a real run's first 10,000-50,000 reads)
        halved the bound, and truncated reads lost their rescue (A_0.9 0.98 to
        0.88). Without either (fallback), the cut's own rate.
        """
        beyond = [p for p in (self.related_trough, self.unrelated_peak) if p is not None]
        if not beyond or min(beyond) <= self.max_dist or self.reference_length <= 0:
            return self.rate
        return (self.max_dist + min(beyond)) / 2 / self.reference_length

    def cuts(self, longer: np.ndarray) -> np.ndarray:
        """The cut for pairs whose longer read has length ``longer`` (see the module notes)."""
        longer = np.asarray(longer, dtype=np.float64)
        if self.reference_length <= 0:
            return np.full(longer.shape, self.max_dist, dtype=np.int64)
        return np.floor(self.max_dist * longer / self.reference_length + 1e-9).astype(np.int64)

    @property
    def error_rate(self) -> float | None:
        """Per-read error rate that the same-strand peak shows (half a pair's edits per base)."""
        if self.same_peak is None or self.reference_length <= 0:
            return None
        return self.same_peak / 2 / self.reference_length

    def describe(self) -> str:
        """One log line: the cut, and what it was chosen from."""
        if self.source == "data":
            peak = f"peak {self.same_peak} (~{self.error_rate:.1%} errors per read)"
            if self.tail is not None:
                peak += (f", 10% of same-strand pairs beyond {self.tail[0]:.1f} and 1% beyond "
                         f"{self.tail[1]:.1f}")
            if self.rule == "tail":
                why = (f"upper tail of the same-strand distances: {peak}; cut where about 1 "
                       f"pair in 1,000 lies beyond")
            elif self.rule == "trough":
                why = (f"trough before a population of related designs; the same-strand "
                       f"tail ({peak}) reaches into it")
            elif self.rule == "related":
                why = (f"below the lower tail of a population of related designs (about 1 "
                       f"of their pairs in 1,000 within it); the same-strand tail ({peak}) "
                       f"reaches into it")
            else:
                why = (f"valley before the unrelated peak; the same-strand tail ({peak}) "
                       f"reaches it")
            unrelated = (f"unrelated peak at {self.unrelated_peak} edits"
                         if self.unrelated_peak is not None
                         else "no unrelated peak in the sample")
            if self.related_trough is not None and self.rule not in ("trough", "related"):
                unrelated = (f"related designs beyond a trough at {self.related_trough} "
                             f"edits; {unrelated}")
            return (
                f"max distance {self.max_dist} ({why}; {unrelated}; {self.pairs:,} sampled "
                f"pairs; scaled to read length from {self.reference_length:g} nt)"
            )
        if self.source == "user":
            own = f"; the data's own cut: {self.data_cut}" if self.data_cut is not None else ""
            return f"max distance {self.max_dist} (set by the user{own})"
        why = self.why or "the data showed no gap between same-strand and unrelated reads"
        return (f"max distance {self.max_dist} (fallback: {FALLBACK_FRACTION:.0%} of the median "
                f"read length; {why})")


#: Reads shorter than this fraction of the median length are not of full length: left out of
#: the threshold's sample, and not chosen as representatives while a full-length read is there.
FULL_LENGTH_FRACTION = 0.9


def sample_threshold(distances: np.ndarray, shorter: np.ndarray, longer: np.ndarray,
                     median_length: float, user_value: int | None = None
                     ) -> tuple[Threshold, np.ndarray]:
    """The cut from sampled pairs' exact distances, and the mask of the pairs it used.

    ``shorter``/``longer``: each pair's read lengths. Only pairs of typical lengths
    count (extreme lengths are far from everything), unless fewer than 100 are.
    ``user_value``: the user's cut, which replaces the data's (the data's stays
    known, for the split check and the summary).
    """
    typical = (shorter >= FULL_LENGTH_FRACTION * median_length) & (
        longer <= median_length / FULL_LENGTH_FRACTION)
    use = typical if typical.sum() >= 100 else np.ones(len(distances), dtype=bool)
    est = estimate_threshold(distances[use], median_length, longer[use], shorter[use])
    if user_value is not None:
        est = dataclasses.replace(est, max_dist=int(user_value), source="user")
    return est, use


def _equal_lengths(longer: np.ndarray | None, shorter: np.ndarray | None, reference: float,
                   n: int) -> np.ndarray:
    """Which pairs are of equal lengths (every pair, without both lengths)."""
    if longer is None or shorter is None:
        return np.ones(n, dtype=bool)
    gap = np.asarray(longer, dtype=np.float64) - np.asarray(shorter, dtype=np.float64)
    return gap <= max(2.0, EQUAL_LENGTHS * reference)


def fallback_threshold(median_length: float) -> int:
    """The threshold used when the data show no gap (see the module notes)."""
    return max(1, int(round(FALLBACK_FRACTION * median_length)))


def estimate_threshold(distances: np.ndarray, median_length: float,
                       longer: np.ndarray | None = None,
                       shorter: np.ndarray | None = None) -> Threshold:
    """Choose the cut from exact distances of sampled candidate pairs.

    ``median_length``: the median read length of the input (the reference
    length, and the base of the fallback). ``longer``: the longer read's
    length of each pair, to express the distances as rates per base (default:
    every pair at the reference length). ``shorter``: the shorter read's length,
    to look for related designs among pairs of equal lengths only
    (:func:`_equal_lengths`; default: among all pairs).
    """
    ref = float(median_length)
    d = np.asarray(distances, dtype=np.float64)
    if longer is not None and ref > 0:
        d = d * ref / np.maximum(np.asarray(longer, dtype=np.float64), 1.0)
    d = np.rint(d).astype(np.int64)
    equal = _equal_lengths(longer, shorter, ref, len(d))
    if ref > 0:
        equal = equal[d <= ref]
        d = d[d <= ref]  # farther apart than a read is long: an outlier pair
    fallback = Threshold(fallback_threshold(median_length), "fallback", pairs=len(d),
                         reference_length=ref)
    if len(d) < MIN_PAIRS:
        return fallback
    hist = np.bincount(d).astype(np.float64)
    like = np.bincount(d[equal], minlength=len(hist)).astype(np.float64)
    hists = (hist, like if like.sum() >= MIN_TAIL_PAIRS else None)
    smooth = smoothed(hist, SMOOTH)
    peaks = two_peaks(hist, smooth, FALLBACK_FRACTION * ref if ref > 0 else math.inf)
    if peaks is None:
        return dataclasses.replace(fallback, why=_NO_SAME_STRAND_PEAK)
    low_peak, high_peak = peaks
    if high_peak < 0 or high_peak - low_peak < 3:
        return _one_population(hists, low_peak, fallback)
    between = smooth[low_peak : high_peak + 1]
    floor = float(between.min())
    smaller_peak = min(smooth[low_peak], smooth[high_peak])
    if floor > 0.5 * smaller_peak:
        # No real valley: one broad population, or two that overlap too much to cut.
        return _one_population(hists, low_peak, fallback)
    start, end = longest_run(between <= floor + 0.1 * (smaller_peak - floor))
    valley = low_peak + int(math.floor((start + end) / 2))
    # The same-strand population ends at the first lowest point before the valley's cut.
    cut, rule, tail, trough = same_strand_cut(hists, low_peak, valley)
    if cut is None or cut >= valley:
        cut, rule = valley, "valley"
    if trough is None and tail is not None:
        trough = related_past_valley(hists, low_peak, high_peak)
    return Threshold(
        cut, "data", same_peak=low_peak, unrelated_peak=high_peak, pairs=len(d),
        reference_length=ref, tail=tail, valley=valley, rule=rule, data_cut=cut,
        related_trough=trough,
    )


def _one_population(hists: tuple[np.ndarray, np.ndarray | None], peak: int,
                    fallback: Threshold) -> Threshold:
    """The cut of a sample with no gap to a second population and a plausible same-strand
    peak (within the fallback's bound, :func:`~dnaembed.cluster.populations.two_peaks`):
    its upper tail, as
    :func:`estimate_threshold` measures the same-strand tail, where that lies below the
    fallback; else the fallback.

    Why: at high coverage every one of a read's neighbours is its own strand's, so the
    sample holds no unrelated pair; the fallback (30% of the length, 45 edits at 150 nt)
    then merged designs 20 edits apart (partners, shifted windows), 10 strands of 500
    reads into 5 clusters, although the sample measured its one population well. Two
    populations that overlap too much to cut reach past the fallback, which stays.
    """
    cut, rule, tail, trough = same_strand_cut(hists, peak, len(hists[0]))
    if cut is None or cut >= fallback.max_dist:
        return fallback
    return Threshold(cut, "data", same_peak=peak, pairs=fallback.pairs,
                     reference_length=fallback.reference_length, tail=tail, rule=rule,
                     data_cut=cut, related_trough=trough)
