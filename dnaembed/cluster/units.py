"""What partitioned clustering works on: the distinct non-empty reads ("units") of a read store.

Identical reads are collapsed before any work (:mod:`dnaembed.cluster.dedupe`);
the rest is done once per distinct sequence, weighted by its copies. The
sequences stay in the store (in memory or spilled to disk); :class:`UnitSequences`
reads them back one at a time or in blocks, as the linking and the rescue
need them, without a second copy of every read in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dnaembed.encoding import reverse_complement, reverse_complement_flat
from dnaembed.io.bases import ReadBlock
from dnaembed.io.strings import StringStore


class UnitSequences:
    """The sequence of each unit (``rows[u]`` of ``store``), or its reverse complement."""

    def __init__(self, store: StringStore, rows: np.ndarray, *, reverse: bool = False) -> None:
        self.store, self.rows, self.reverse = store, rows, reverse

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, unit: int) -> str:
        seq = self.store[self.rows.item(unit)]
        return reverse_complement(seq) if self.reverse else seq

    def take(self, units: np.ndarray) -> list[str]:
        """The sequences of ``units``, in order."""
        seqs = self.store.take(self.rows[units])
        return [reverse_complement(s) for s in seqs] if self.reverse else seqs

    def block(self, units: np.ndarray) -> ReadBlock:
        """The units' reads as a task takes them (forward sequences only)."""
        return self.store.block(self.rows[units])

    def oriented_block(self, units: np.ndarray, flips: np.ndarray) -> OrientedBlock:
        """The units' reads as a thread codes them, each reverse-complemented where
        ``flips`` (of these sequences: of the forward reads where :attr:`reverse`)."""
        return OrientedBlock(self.store.block(self.rows[units]),
                             np.asarray(flips, dtype=bool) ^ self.reverse)

    def reverses(self, other: object) -> bool:
        """Whether ``other`` holds these sequences' reverse complements (:meth:`reversed`)."""
        return isinstance(other, UnitSequences) and other.store is self.store \
            and other.rows is self.rows and other.reverse != self.reverse

    def __iter__(self) -> Iterator[str]:
        step = 1 << 16
        for start in range(0, len(self.rows), step):
            yield from self.take(np.arange(start, min(start + step, len(self.rows))))

    def reversed(self) -> UnitSequences:
        """The reverse complements, the same way."""
        return UnitSequences(self.store, self.rows, reverse=not self.reverse)


class OrientedBlock:
    """Reads of a store (a :class:`~dnaembed.io.bases.ReadBlock`), those ``flips`` marks
    to be taken reverse-complemented: :meth:`codes` decodes them where it is called (a
    task's thread), not where the block was taken."""

    __slots__ = ("reads", "flips")

    def __init__(self, reads: ReadBlock, flips: np.ndarray) -> None:
        self.reads, self.flips = reads, flips

    def __len__(self) -> int:
        return len(self.reads)

    def codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The reads' base codes back to back, oriented, and their lengths."""
        codes, lengths = self.reads.codes()
        if self.flips.any():
            codes = reverse_complement_flat(codes, lengths, self.flips)
        return codes, lengths


@dataclass
class Units:
    """Distinct non-empty reads: their sequences, lengths and copies (``weights``)."""

    seqs: UnitSequences
    lengths: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    def subset(self, units: np.ndarray) -> Units:
        """The units ``units`` (indices, in order), renumbered from 0."""
        seqs = UnitSequences(self.seqs.store, self.seqs.rows[units], reverse=self.seqs.reverse)
        return Units(seqs, self.lengths[units], self.weights[units])

    @property
    def median_length(self) -> float:
        """The units' median length (0 for none)."""
        return float(np.median(self.lengths)) if len(self.lengths) else 0.0
