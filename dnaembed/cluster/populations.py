"""The sampled distances' histogram read as populations: the same-strand and unrelated
peaks, the valley between, a population of related designs, the same-strand tail.

What :func:`dnaembed.cluster.threshold.estimate_threshold` reads its cut from (the
steps in :mod:`dnaembed.cluster.threshold`'s notes). Every function takes counts per
distance (bin ``d`` holds the pairs ``d`` edits apart, at the reference length).
"""

from __future__ import annotations

import math

import numpy as np

#: The smoothing of the histogram, in bins, where its peaks are found.
SMOOTH = 5
#: The cut, in decades of the same-strand tail beyond its 1% point (step 4 of
#: :mod:`dnaembed.cluster.threshold`'s notes).
TAIL_DECADES = 1.0
#: Fewer same-strand pairs than this: the tail is not measured (the valley rule decides).
MIN_TAIL_PAIRS = 500
#: A same-strand population found below the unrelated pairs' own (where few reads share a
#: strand: :func:`two_peaks`) holds at least this many pairs up to its peak's smoothing.
MIN_SEPARATE_PAIRS = 10
#: A trough that ends the same-strand population lies at most DIP_FRACTION of its peak,
#: and a population after it rises to at least BUMP_FRACTION of the peak.
DIP_FRACTION = 0.5
BUMP_FRACTION = 0.03
#: A related population rises above its trough by more than this many standard deviations.
SIGNIFICANCE = 4.0


def _otsu(hist: np.ndarray) -> int:
    """Last bin of the lower class of Otsu's two-class split."""
    bins = np.arange(len(hist), dtype=np.float64)
    w0 = np.cumsum(hist)
    total = w0[-1]
    w1 = total - w0
    m0 = np.cumsum(hist * bins)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu0 = m0 / w0
        mu1 = (m0[-1] - m0) / w1
        between = w0 * w1 * (mu0 - mu1) ** 2
    between[~np.isfinite(between)] = -1
    return int(np.argmax(between))


def longest_run(mask: np.ndarray) -> tuple[int, int]:
    """First and last index of the longest run of True in ``mask`` ((0, -1): none)."""
    best = (0, -1)
    start = None
    for i, v in enumerate(np.append(mask, False)):
        if v and start is None:
            start = i
        elif not v and start is not None:
            if i - 1 - start > best[1] - best[0]:
                best = (start, i - 1)
            start = None
    return best


def same_strand_cut(hists: tuple[np.ndarray, np.ndarray | None], peak: int, limit: int
                    ) -> tuple[int | None, str, tuple[float, float] | None, int | None]:
    """The same-strand population's cut (None: too few pairs to measure its tail), the rule
    that chose it ("tail", "trough" or "related"), its tail points (:func:`tail_points`),
    and the trough before a related population (None: none before ``limit``, or too few
    same-strand pairs to tell).

    ``hists``: the sample's histogram, and that of its pairs of equal lengths (None: too
    few), where related designs are looked for (:func:`_population_end`). The cut is the
    tail extrapolated (step 4 of :mod:`dnaembed.cluster.threshold`'s notes), never past
    that trough, nor past the related population's own lower tail. Where the two
    overlap, the tail measured up to the trough still reaches into the related pairs,
    and a related pair within the cut joins two strands (one of them read once or twice,
    too few for the split check to undo), while a same-strand pair beyond it costs
    nothing if its read has another within the cut.
    """
    hist = hists[0]
    low, trough, summit = _population_end(hists, peak, limit)
    tail = tail_points(hist[: low + 1])
    if tail is None:
        return None, "", None, None
    cut = int(math.floor(tail[1] + TAIL_DECADES * (tail[1] - tail[0])))
    if trough is None:
        return cut, "tail", tail, None
    related = _related_lower_tail(hist[: low + 1], summit - peak)
    cut, rule = min((cut, "tail"), (trough, "trough"), (related, "related"))
    return cut, rule, tail, trough


def _related_lower_tail(same: np.ndarray, shift: int) -> int:
    """The distance below which about one related pair in 1,000 lies: the same-strand
    population's lower tail (``same``: its counts), extrapolated as its upper tail is,
    moved by ``shift`` (related summit minus same-strand peak).

    Why: reads of two designs ``D`` apart differ by ``D`` plus both reads' errors, the
    errors that spread the same-strand pairs; so the related pairs are the same-strand
    population moved by ``D``, as far below their summit as those below their peak.
    """
    below = tail_points(same[::-1])
    if below is None:
        return len(same) - 1 + shift
    x10, x1 = (len(same) - 1 - x for x in below)
    return int(math.floor(x1 - TAIL_DECADES * (x10 - x1))) + shift


def two_peaks(hist: np.ndarray, smooth: np.ndarray, farthest_same: float
              ) -> tuple[int, int] | None:
    """The same-strand and unrelated peaks: the tallest smoothed bin on each side of Otsu's
    split (-1 for a side without one). None: no same-strand peak within ``farthest_same``.

    Why a second look: where reads share strands rarely (a few thousand reads of a pool of
    ten thousand strands, the head of a file), the unrelated pairs form two populations of
    their own (ldpc-exp7's: strands sharing primers at ~53 edits, the rest at ~73) that
    outweigh the few same-strand pairs, and the split fell between those two: a
    "same-strand" peak at 52 edits of 145 nt and a cut of 65 that merged 2,000 reads into
    60 clusters. A lower peak farther than any channel's same-strand pairs lie (the
    fallback's fraction of the length) is no same-strand peak; one is sought below it.
    """
    split = _otsu(hist)
    low = int(np.argmax(smooth[: split + 1]))
    if low <= farthest_same:
        return low, _tallest_after(smooth, split)
    low = _separate_peak_below(hist, smooth, low, farthest_same)
    return None if low is None else (low, _tallest_after(smooth, low))


def _separate_peak_below(hist: np.ndarray, smooth: np.ndarray, limit: int,
                         farthest_same: float) -> int | None:
    """The tallest smoothed bin up to ``farthest_same`` that a valley (at most half its
    height) separates from the population at ``limit``, if it holds
    :data:`MIN_SEPARATE_PAIRS` pairs; else None. The rising side of the population at
    ``limit`` has no valley before it, however tall its bins, so it is never chosen."""
    lowest_after = np.minimum.accumulate(smooth[: limit + 1][::-1])[::-1]
    bins = np.arange(min(int(farthest_same), limit) + 1)
    separate = (smooth[bins] > 0) & (lowest_after[bins] <= 0.5 * smooth[bins])
    if not separate.any():
        return None
    peak = int(bins[separate][np.argmax(smooth[bins][separate])])
    if hist[: peak + SMOOTH].sum() < MIN_SEPARATE_PAIRS:
        return None
    return peak


def _tallest_after(smooth: np.ndarray, split: int) -> int:
    """The tallest smoothed bin past ``split`` (-1: none), whatever lies beyond: the
    unrelated peak."""
    return split + 1 + int(np.argmax(smooth[split + 1 :])) if split + 1 < len(smooth) else -1


def _population_end(hists: tuple[np.ndarray, np.ndarray | None], peak: int, limit: int
                    ) -> tuple[int, int | None, int | None]:
    """Where the same-strand population ends (the lowest point before the next population),
    the bin before the middle of the trough between them, and the next population's summit
    up to ``limit`` (None, None: no next population before ``limit``).

    The next population (related designs) is looked for among the pairs of equal lengths
    (``hists[1]``; without them, none is): pairs of a read and one that lost its last few
    bases lie as far apart as the bases lost, a population of their own at low error
    rates, which is no design. It starts where the histogram, once at most DIP_FRACTION
    of the peak, rises again to BUMP_FRACTION of it and to twice its lowest point since,
    by more than SIGNIFICANCE standard deviations of the counts (Poisson): a few stray
    pairs in the gap, or the noise of a small sample, are not a population. The
    histogram is smoothed over at most half the peak's distance (:func:`_smoothed_near`):
    at low error rates the same-strand peak lies 2-4 edits from zero and partners 8
    substitutions apart 8 edits beyond it, which a 5-edit smoothing blurs into one
    population (a cut of 18 that merged every pair of partners). Without a next
    population, the lowest point of the whole sample's histogram up to ``limit``.
    """
    hist, like = hists
    smooth = None if like is None else _smoothed_near(like, peak)
    rise = None if smooth is None else _rise(smooth, _smoothing_width(peak), peak, limit)
    if rise is None:
        whole = smoothed(hist, SMOOTH)
        return peak + int(np.argmin(whole[peak : limit + 1])), None, None
    summit = rise + int(np.argmax(smooth[rise:limit]))
    return *_trough(smooth, peak, rise), summit


def _trough(smooth: np.ndarray, peak: int, rise: int) -> tuple[int, int]:
    """The lowest point between the population at ``peak`` and the one rising at ``rise``,
    and the bin before the middle of the trough there.

    The trough's floor: the bins within a tenth of the rise above its lowest point. The
    cut stops one bin short of its middle: where the populations overlap, pairs at the
    floor are of both, and one related pair within the cut joins two strands, while a
    same-strand pair beyond it costs nothing if its read has another within the cut.
    """
    low = peak + int(np.argmin(smooth[peak : rise + 1]))
    floor = float(smooth[low])
    start, stop = longest_run(smooth[low:rise] <= floor + 0.1 * (smooth[rise] - floor))
    return low, low + (start + stop) // 2 - 1


def related_past_valley(hists: tuple[np.ndarray, np.ndarray | None], peak: int,
                        unrelated_peak: int) -> int | None:
    """The bin before the middle of the trough before a population of related designs
    that stands apart from both its neighbours, past the valley: None if none does.

    Sought as :func:`_population_end` seeks one below the valley (among the pairs of
    equal lengths, rising from a dip after the same-strand ``peak``), and kept only if
    it falls again, before the ``unrelated_peak``, to DIP_FRACTION of its summit, by
    more than SIGNIFICANCE standard deviations: the rising side of the unrelated
    population, however it starts, never falls before its peak. Why: partners 40
    substitutions apart at nanopore rates (same-strand pairs ~16 edits apart at 150 nt,
    partners' ~49, unrelated ~79) lie past the valley; the cut is below them, but the
    rescue's bound, halfway to the unrelated peak, reached them and moved the reads of
    strands read once or twice into their partners' clusters.
    """
    if hists[1] is None or unrelated_peak <= peak:
        return None
    width = _smoothing_width(peak)
    smooth = smoothed(hists[1], width)
    rise = _rise(smooth, width, peak, unrelated_peak)
    if rise is None or not _falls_again(smooth, width, rise, unrelated_peak):
        return None
    return _trough(smooth, peak, rise)[1]


def _falls_again(smooth: np.ndarray, width: int, rise: int, limit: int) -> bool:
    """Whether the population rising at ``rise`` falls to DIP_FRACTION of its summit,
    significantly, before ``limit``."""
    top = 0.0
    for i in range(rise, min(limit, len(smooth))):
        level = float(smooth[i])
        top = max(top, level)
        if (level <= DIP_FRACTION * top
                and (top - level) * width > SIGNIFICANCE * math.sqrt((top + level) * width)):
            return True
    return False


def _rise(smooth: np.ndarray, width: int, peak: int, limit: int) -> int | None:
    """Where a population after the one at ``peak`` starts (see :func:`_population_end`);
    ``smooth``: the histogram smoothed over ``width`` bins."""
    height = float(smooth[peak])
    lowest = np.inf
    for i in range(peak + 1, min(limit, len(smooth))):
        level = float(smooth[i])
        if (lowest <= DIP_FRACTION * height and level >= BUMP_FRACTION * height
                and level > 2 * lowest
                and (level - lowest) * width > SIGNIFICANCE * math.sqrt((level + lowest) * width)):
            return i
        lowest = min(lowest, level)
    return None


def _smoothing_width(peak: int) -> int:
    """SMOOTH bins, or fewer: odd, at most half ``peak``."""
    return max(1, min(SMOOTH, (peak // 2) - (1 - (peak // 2) % 2)))


def _smoothed_near(hist: np.ndarray, peak: int) -> np.ndarray:
    """``hist`` smoothed over :func:`_smoothing_width` bins."""
    return smoothed(hist, _smoothing_width(peak))


def smoothed(hist: np.ndarray, width: int) -> np.ndarray:
    """``hist`` averaged over ``width`` bins around each."""
    kernel = np.ones(width) / width
    return np.convolve(np.pad(hist, width), kernel, mode="same")[width:-width]


def tail_points(hist: np.ndarray) -> tuple[float, float] | None:
    """The distances that 10% and 1% of a population's pairs exceed (None: too few pairs).

    ``hist``: the population's counts per distance; each bin is spread evenly
    over its unit interval, so the points interpolate within bins.
    """
    total = float(hist.sum())
    if total < MIN_TAIL_PAIRS:
        return None
    beyond = total - np.cumsum(hist)  # pairs above each bin

    def exceeded_by(fraction: float) -> float:
        target = fraction * total
        i = int(np.searchsorted(-beyond, -target))  # first bin with at most target above it
        above_bin = beyond[i] + hist[i]
        inside = (above_bin - target) / hist[i] if hist[i] > 0 else 1.0
        return i - 0.5 + inside

    return exceeded_by(0.10), exceeded_by(0.01)
