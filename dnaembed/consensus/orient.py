"""Each read turned to its strand's orientation (step 1 of :mod:`.engine`).

Given orientations are taken as they are. Otherwise every read is compared, as
read and as its reverse complement, with a pivot (the read whose length is
nearest the target), then with the medoid, and turned to the closer; the strand
is written in the orientation most reads were read in (ties: the medoid's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein as RFLevenshtein

from dnaembed.consensus.medoid import MedoidSearch
from dnaembed.encoding import reverse_complement


@dataclass(frozen=True)
class Orientation:
    """A chunk's reads turned to one orientation per cluster, and each cluster's medoid."""

    #: The reads, reverse-complemented where ``flips`` says so.
    seqs: list[str]
    #: Per read: True = reverse-complemented.
    flips: np.ndarray
    #: Per cluster: the index of its medoid read.
    medoids: list[int]
    #: Per cluster: True = the strand is written reverse-complemented.
    output_flip: np.ndarray


def orient_reads(
    raw: list[str], given_flips: np.ndarray | None, search: MedoidSearch
) -> Orientation:
    """Turn the reads (``given_flips``, or inferred) and choose every cluster's medoid."""
    n_clusters = len(search.bounds) - 1
    output_flip = np.zeros(n_clusters, dtype=bool)
    if given_flips is not None:
        seqs = [reverse_complement(s) if f else s for s, f in zip(raw, given_flips)]
        medoids = [search.medoid(c, seqs) for c in range(n_clusters)]
        return Orientation(seqs, given_flips.copy(), medoids, output_flip)
    flips = np.zeros(len(raw), dtype=bool)
    seqs = list(raw)
    medoids = [
        _orient_and_medoid(c, raw, seqs, flips, output_flip, search) for c in range(n_clusters)
    ]
    return Orientation(seqs, flips, medoids, output_flip)


def _orient_and_medoid(
    c: int,
    raw: list[str],
    seqs: list[str],
    flips: np.ndarray,
    output_flip: np.ndarray,
    search: MedoidSearch,
) -> int:
    """Orient cluster ``c``'s reads in ``seqs``/``flips``, set ``output_flip[c]``; its medoid."""
    a, b = search.bounds[c], search.bounds[c + 1]
    if b - a == 1:
        return a
    cands = search.candidates(c)
    target = search.targets[c]
    pivot = int(cands[np.argmin(np.abs(search.lengths[cands] - target))])
    _orient_to(raw, seqs, flips, a, b, raw[pivot])
    medoid = search.medoid(c, seqs)
    # Orient again to the medoid, unless every read already agreed with the pivot.
    if medoid != pivot and flips[a:b].any():
        _orient_to(raw, seqs, flips, a, b, seqs[medoid])
    # Output in the orientation most reads were read in (ties: the medoid's).
    flipped = int(flips[a:b].sum())
    ref_flipped = bool(flips[medoid])
    majority_flipped = flipped * 2 > (b - a) or (flipped * 2 == (b - a) and ref_flipped)
    # Express everything relative to the majority's orientation.
    if majority_flipped:
        output_flip[c] = True
    return medoid


def _orient_to(
    raw: list[str], seqs: list[str], flips: np.ndarray, a: int, b: int, reference: str
) -> None:
    """Turn each read of [a, b) to whichever of its orientations is nearer ``reference``."""
    reads = raw[a:b]
    rcs = [reverse_complement(s) for s in reads]
    dist = process.cdist([reference], reads + rcs, scorer=RFLevenshtein.distance)[0]
    flip = dist[len(reads) :] < dist[: len(reads)]
    flips[a:b] = flip
    for j, f in enumerate(flip.tolist()):
        seqs[a + j] = rcs[j] if f else reads[j]
