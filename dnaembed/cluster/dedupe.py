"""Identical reads, collapsed before any work is done.

Real runs hold many exact copies (a third of the reads of the real set), and
at Illumina error rates most reads equal their strand. Collapsing them saves
embedding and checking time and guarantees that identical reads end in one
cluster. With both orientations, a read and a reverse-complemented copy of it
are also identical (the copy is recorded as flipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.encoding import reverse_complement


@dataclass
class UniqueReads:
    """Distinct sequences of a read list.

    ``first``: index of the first read of each distinct sequence (the one kept);
    ``inverse``: for each read, its distinct sequence; ``flipped``: 1 where the
    read is the reverse complement of the kept read; ``counts``: reads per
    distinct sequence.
    """

    first: np.ndarray
    inverse: np.ndarray
    flipped: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return len(self.first)


def unique_reads(seqs: Sequence[str], both_strands: bool) -> UniqueReads:
    """Group identical reads (and reverse-complement copies when ``both_strands``).

    Empty reads are never grouped: each is its own entry (an empty read carries
    no evidence that it belongs with another one).
    """
    n = len(seqs)
    inverse = np.empty(n, dtype=np.int64)
    flipped = np.zeros(n, dtype=np.int8)
    seen: dict[str, int] = {}
    first: list[int] = []
    for i, seq in enumerate(seqs):
        if not seq:
            inverse[i] = len(first)
            first.append(i)
            continue
        u = seen.get(seq)
        if u is not None:
            inverse[i] = u
            continue
        if both_strands:
            u = seen.get(reverse_complement(seq))
            if u is not None:
                inverse[i] = u
                flipped[i] = 1
                continue
        seen[seq] = len(first)
        inverse[i] = len(first)
        first.append(i)
    first_arr = np.asarray(first, dtype=np.int64)
    counts = np.bincount(inverse, minlength=len(first_arr)).astype(np.int64)
    return UniqueReads(first_arr, inverse, flipped, counts)
