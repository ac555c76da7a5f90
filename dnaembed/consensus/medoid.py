"""The starting estimate of each cluster: its medoid read (step 2 of :mod:`.engine`).

The read with the least total Levenshtein distance to the others, among the
reads whose length is within :func:`~dnaembed.consensus.strands.length_tolerance`
of the cluster's target length, so that a truncated read never starts the
estimate. Ties go to the read nearer the target length, then to the higher mean
base quality, then to the first. Big clusters use a seeded sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein as RFLevenshtein

from dnaembed.consensus.strands import length_tolerance

#: Medoid search on big clusters: candidates, and the reads each candidate is compared with.
MEDOID_CANDIDATES = 32


MEDOID_SAMPLE = 64


def target_lengths(
    lengths: np.ndarray, bounds: list[int], expected_length: int | None
) -> np.ndarray:
    """Per cluster: the expected length when given, else its reads' 75th-percentile length."""
    n = len(bounds) - 1
    if expected_length is not None:
        return np.full(n, expected_length, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    for c in range(n):
        a, b = bounds[c], bounds[c + 1]
        # Truncation only shortens reads: aim above the median.
        out[c] = int(round(np.percentile(lengths[a:b], 75)))
    return out


@dataclass(frozen=True)
class MedoidSearch:
    """What choosing a chunk's medoids reads: lengths, cluster bounds, targets, qualities, seed."""

    #: Length of each read.
    lengths: np.ndarray
    #: Cluster ``c`` holds reads ``bounds[c]`` to ``bounds[c + 1]`` (exclusive).
    bounds: list[int]
    #: Per cluster: the length a full read should have (:func:`target_lengths`).
    targets: np.ndarray
    #: Mean base quality of each read, or None.
    mean_quality: np.ndarray | None
    seed: int
    #: Number of the chunk's first cluster in the whole input.
    first_cluster: int

    def candidates(self, c: int) -> np.ndarray:
        """Reads of cluster ``c`` eligible as medoid: length near the target (else all)."""
        a, b = self.bounds[c], self.bounds[c + 1]
        lengths = self.lengths[a:b]
        target = self.targets[c]
        near = np.flatnonzero(np.abs(lengths - target) <= length_tolerance(int(target)))
        return a + (near if len(near) else np.arange(b - a))

    def rng(self, c: int) -> np.random.Generator:
        """Cluster ``c``'s own stream: its result never depends on the other clusters."""
        return np.random.default_rng([self.seed, self.first_cluster + c])

    def medoid(self, c: int, seqs: list[str]) -> int:
        """The medoid of cluster ``c`` (a read index), its reads ``seqs`` as they are turned."""
        a, b = self.bounds[c], self.bounds[c + 1]
        n = b - a
        if n == 1:
            return a
        cands = self.candidates(c)
        rng = None
        if len(cands) > MEDOID_CANDIDATES:
            rng = self.rng(c)
            cands = np.sort(rng.choice(cands, MEDOID_CANDIDATES, replace=False))
        others = np.arange(a, b)
        if n > MEDOID_SAMPLE:
            rng = rng or self.rng(c)
            others = np.sort(rng.choice(others, MEDOID_SAMPLE, replace=False))
        if len(cands) == 1:
            return int(cands[0])
        if n == 2:
            totals = np.zeros(len(cands))
        else:
            dist = process.cdist(
                [seqs[i] for i in cands.tolist()],
                [seqs[i] for i in others.tolist()],
                scorer=RFLevenshtein.distance,
                dtype=np.int32,
            )
            totals = dist.sum(axis=1)
        off_target = np.abs(self.lengths[cands] - self.targets[c])
        quality = (
            -self.mean_quality[cands] if self.mean_quality is not None else np.zeros(len(cands))
        )
        best = np.lexsort((cands, quality, off_target, totals))[0]
        return int(cands[best])
