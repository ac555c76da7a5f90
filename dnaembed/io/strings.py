"""Strings (sequences, read ids) kept as one byte array with offsets, in memory or spilled.

:class:`PackedStrings` appends strings in blocks and reads them back by row: as
strings (``take``), as the bytes and lengths a task carries (``packed``, ``block``),
or one at a time. Its bytes are a :class:`~dnaembed.io.spill.SpillArray`, so they
follow the memory budget as the vectors do. :class:`StringStore` is what any read
store shares (:class:`~dnaembed.io.bases.PackedBases` keeps sequences at two bits per
base); :func:`strings_of` and :func:`oriented_strings` take rows in bulk from a store or
from a plain list alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.io.spill import SpillArray

if TYPE_CHECKING:  # bases builds on this module
    from dnaembed.io.bases import ReadBlock

#: Strings decoded at a time when a store is iterated.
ITER_CHUNK = 1 << 16


class StringStore:
    """What a store of strings read back by row shares: :meth:`take` and iteration
    through its :meth:`packed` form (``(bytes, lengths)``)."""

    encoding = "ascii"

    def __len__(self) -> int:
        raise NotImplementedError

    def packed(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The given rows' bytes, back to back, and their lengths (each store's own)."""
        raise NotImplementedError

    def block(self, rows: np.ndarray) -> ReadBlock:
        """The given rows as a task takes them (a :class:`~dnaembed.io.bases.ReadBlock`):
        here, one byte per base."""
        from dnaembed.io.bases import ReadBlock  # bases builds on this module

        return ReadBlock(*self.packed(rows))

    def take(self, rows: np.ndarray) -> list[str]:
        """The given rows as strings (through :meth:`block` where each character is a byte)."""
        if self.encoding == "ascii":
            return self.block(rows).strings()
        data, lengths = self.packed(rows)
        return unpack_strings(data, lengths, self.encoding)

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), ITER_CHUNK):
            yield from self.take(np.arange(start, min(start + ITER_CHUNK, len(self))))


class PackedStrings(StringStore):
    """Strings as bytes, one after the other, with their offsets; in memory or spilled.

    ``take(rows)`` gives them back as strings; :meth:`packed` as one byte array
    and lengths (the compact form tasks travel in); ``store[i]`` one string.
    ``encoding``: 'ascii' for sequences (one byte per base), 'utf-8' for read ids.
    """

    def __init__(self, *, spill_to: Path | None = None, spill_after: int | None = None,
                 encoding: str = "ascii") -> None:
        self.encoding = encoding
        self._bytes = SpillArray((), np.uint8, spill_to=spill_to, spill_after=spill_after)
        self._lengths: list[np.ndarray] = []
        self.offsets: np.ndarray | None = None
        self.lengths: np.ndarray | None = None

    @property
    def spilled(self) -> bool:
        """Whether the bytes went to the spill file."""
        return self._bytes.spilled

    @property
    def nbytes(self) -> int:
        """Bytes of the strings as stored."""
        return self._bytes.nbytes

    def __len__(self) -> int:
        return len(self.lengths) if self.lengths is not None else sum(map(len, self._lengths))

    def append(self, strings: Sequence[str]) -> None:
        """Adds ``strings`` after the others."""
        joined = "".join(strings)
        data = joined.encode(self.encoding)
        if len(data) == len(joined):  # one byte per character: the sizes are the lengths
            sizes = map(len, strings)
        else:
            encoded = [s.encode(self.encoding) for s in strings]
            data, sizes = b"".join(encoded), map(len, encoded)
        self._bytes.append(np.frombuffer(data, dtype=np.uint8))
        self._lengths.append(np.fromiter(sizes, dtype=np.int32, count=len(strings)))

    def finish(self) -> PackedStrings:
        """Ends the appending: the lengths and offsets are known from here on. Returns
        the store."""
        self._bytes.finish()
        self.lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int32)
        self._lengths = []
        self.offsets = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=self.offsets[1:])
        return self

    def spill(self) -> bool:
        """Move the strings to their file now, if held in memory (:meth:`SpillArray.spill`)."""
        return self._bytes.spill()

    def packed(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(bytes, lengths)`` of the given rows, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.lengths[rows]
        if len(rows) == 0:
            return np.zeros(0, np.uint8), lengths
        return self._bytes.gather(self.offsets[rows], lengths), lengths

    def block(self, rows: np.ndarray) -> ReadBlock:
        """The given rows as a task takes them: one byte per base, as rows of one width
        where they are of similar lengths (see :class:`~dnaembed.io.bases.ReadBlock`)."""
        from dnaembed.io.bases import ReadBlock  # bases builds on this module

        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.lengths[rows]
        if self.encoding == "ascii" and len(rows):
            padded = self._bytes.gather_padded(self.offsets[rows], lengths)
            if padded is not None:
                return ReadBlock(padded.reshape(-1), lengths, width=padded.shape[1])
        return ReadBlock(*self.packed(rows))

    def __getitem__(self, row: int) -> str:
        offsets = self.offsets
        return self._bytes.row_bytes(offsets.item(row), offsets.item(row + 1)).decode(
            self.encoding)

    def close(self) -> None:
        """Frees the strings (and closes any spill file)."""
        self._bytes.close()


def strings_of(seqs: Sequence[str], rows: np.ndarray) -> list[str]:
    """``[seqs[i] for i in rows]``, by one bulk ``take`` where ``seqs`` is a read store
    (:class:`PackedStrings`, :class:`~dnaembed.cluster.units.UnitSequences`): one string
    at a time from a store cost the split check most of its time."""
    if isinstance(seqs, (list, tuple, np.ndarray)) or not hasattr(seqs, "take"):
        return [seqs[i] for i in np.asarray(rows).tolist()]
    return seqs.take(np.asarray(rows, dtype=np.int64))


def oriented_strings(seqs: Sequence[str], rc_seqs: Sequence[str] | None, rows: np.ndarray,
                     flip: np.ndarray) -> list[str]:
    """Row ``rows[i]`` of ``rc_seqs`` where ``flip[i]`` (and ``rc_seqs`` is given), else of
    ``seqs``, in bulk (:func:`strings_of`)."""
    rows = np.asarray(rows, dtype=np.int64)
    out = strings_of(seqs, rows)
    at = np.flatnonzero(flip) if rc_seqs is not None else np.zeros(0, np.int64)
    if len(at):
        for i, seq in zip(at.tolist(), strings_of(rc_seqs, rows[at])):
            out[i] = seq
    return out


def pack_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """ASCII strings as ``(bytes, lengths)``, as :meth:`PackedStrings.packed` gives them."""
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    return np.frombuffer("".join(strings).encode("ascii"), dtype=np.uint8), lengths


def unpack_strings(data: np.ndarray, lengths: np.ndarray, encoding: str = "ascii") -> list[str]:
    """Strings back from :meth:`PackedStrings.packed`."""
    raw = data.tobytes()
    ends = np.cumsum(lengths, dtype=np.int64).tolist()
    starts = [0, *ends[:-1]]
    if encoding == "ascii":
        text = raw.decode("ascii")  # one character per byte: slice the decoded text
        return [text[a:b] for a, b in zip(starts, ends)]
    return [raw[a:b].decode(encoding) for a, b in zip(starts, ends)]
