"""The edit-distance threshold that separates reads of one strand from unrelated reads.

Chosen from the data, not from the channel or the model. The exact
Levenshtein distances of a random sample of candidate pairs (each read against
its nearest embedding neighbours) fall into two groups: pairs of reads of the
same strand (twice the per-read error budget apart, 0-50 edits at 150 nt) and
the nearest unrelated reads (60-80 edits for random strands, less where all
strands share primers). The threshold is the middle of the emptiest stretch of
the histogram between the two peaks:

1. histogram of the sampled distances, smoothed over 5 edits;
2. Otsu's split of the histogram; the tallest bin on each side is a peak;
3. between the peaks, the bins within 10% of the lowest (relative to the
   smaller peak) form the valley; its longest run's midpoint is the threshold.

Pairs where either read is much shorter than the typical read are left out
when enough others remain: a truncated read is far from everything by its
missing length and would blur the valley (truncated reads get their own
second chance, see :mod:`dnaembed.cluster.rescue`).

The cut is a rate per base, not a constant: a pair is within it when its
distance is at most ``max_dist * L / reference_length``, where ``L`` is the
longer read's length and the reference length is the median read length.
Full-length reads are held to ``max_dist``; two short reads, which agree on
their primers and differ in few other bases, are held to the same fraction of
their length instead of a distance that only separates full-length reads.

When the histogram has no second peak (a single strand, only singletons, a tiny
input) the threshold falls back to 30% of the median read length: above twice
the per-read error of the noisiest channel presets (~12%) and below the distance of
unrelated random sequences (~53% of the length). A warning says so.
More in ``docs/algorithms.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Sampled pairs whose full distance is computed to choose the threshold.
SAMPLE_PAIRS = 20_000
#: Fewer pairs than this: no histogram, the fallback rule applies.
MIN_PAIRS = 100
#: Fallback threshold as a fraction of the median read length.
FALLBACK_FRACTION = 0.30
SMOOTH = 5


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

    @property
    def rate(self) -> float:
        """The cut per base of read length."""
        return self.max_dist / self.reference_length if self.reference_length > 0 else 1.0

    @property
    def rescue_rate(self) -> float:
        """Per-base bound of the rescue's alignments: halfway from the cut to the unrelated peak.

        The rescue's evidence is its margin over the runner-up; this bound only
        keeps alignments clearly below what unrelated reads reach. Without an
        unrelated peak (fallback), the cut's own rate.
        """
        peak = self.unrelated_peak
        if peak is None or peak <= self.max_dist or self.reference_length <= 0:
            return self.rate
        return (self.max_dist + peak) / 2 / self.reference_length

    def cuts(self, longer: np.ndarray) -> np.ndarray:
        """The cut for pairs whose longer read has length ``longer`` (see the module notes)."""
        longer = np.asarray(longer, dtype=np.float64)
        if self.reference_length <= 0:
            return np.full(longer.shape, self.max_dist, dtype=np.int64)
        return np.floor(self.max_dist * longer / self.reference_length + 1e-9).astype(np.int64)

    def describe(self) -> str:
        if self.source == "data":
            return (
                f"max distance {self.max_dist} (valley between the same-strand peak at "
                f"{self.same_peak} and the unrelated peak at {self.unrelated_peak} "
                f"edits, {self.pairs:,} sampled pairs; scaled to read length from "
                f"{self.reference_length:g} nt)"
            )
        if self.source == "user":
            return f"max distance {self.max_dist} (set by the user)"
        return (
            f"max distance {self.max_dist} (fallback: {FALLBACK_FRACTION:.0%} of the median "
            f"read length; the data showed no gap between same-strand and unrelated reads)"
        )


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


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
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


def fallback_threshold(median_length: float) -> int:
    """The threshold used when the data show no gap (see the module notes)."""
    return max(1, int(round(FALLBACK_FRACTION * median_length)))


def estimate_threshold(distances: np.ndarray, median_length: float) -> Threshold:
    """Choose the cut from exact distances of sampled candidate pairs.

    ``median_length``: the median read length of the input (the reference
    length, and the base of the fallback).
    """
    d = np.asarray(distances, dtype=np.int64)
    fallback = fallback_threshold(median_length)
    ref = float(median_length)
    if len(d) < MIN_PAIRS:
        return Threshold(fallback, "fallback", pairs=len(d),
                         reference_length=ref)
    hist = np.bincount(d).astype(np.float64)
    kernel = np.ones(SMOOTH) / SMOOTH
    smooth = np.convolve(np.pad(hist, SMOOTH), kernel, mode="same")[SMOOTH:-SMOOTH]
    split = _otsu(hist)
    low_peak = int(np.argmax(smooth[: split + 1]))
    high_peak = split + 1 + int(np.argmax(smooth[split + 1 :])) if split + 1 < len(smooth) else -1
    if high_peak < 0 or high_peak - low_peak < 3:
        return Threshold(fallback, "fallback", pairs=len(d),
                         reference_length=ref)
    between = smooth[low_peak : high_peak + 1]
    floor = float(between.min())
    smaller_peak = min(smooth[low_peak], smooth[high_peak])
    if floor > 0.5 * smaller_peak:
        # No real valley: one broad population, or two that overlap too much to cut.
        return Threshold(fallback, "fallback", pairs=len(d),
                         reference_length=ref)
    start, end = _longest_run(between <= floor + 0.1 * (smaller_peak - floor))
    cut = low_peak + int(math.floor((start + end) / 2))
    return Threshold(
        cut, "data", same_peak=low_peak, unrelated_peak=high_peak, pairs=len(d),
        reference_length=ref,
    )
