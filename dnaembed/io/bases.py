"""Sequences at two bits per base: a read store's sequences in a quarter of the bytes.

Under a memory budget the sequences are the largest thing a run keeps per
read (a byte per base). Spilled to a file, every read-back of them faults
pages in: at 3 x 10^6 reads under ``--memory 2G`` that cost about 12 s of the
run (docs/scaling.md). :class:`PackedBases` keeps A, C, G and T in two bits
each, every read from a byte boundary (padded to a multiple of four bases),
so that the sequences of 3 x 10^6 reads of 150 nt take 114 MB and may stay
in memory where 450 MB could not. A read with any other base (N) is kept
whole, aside, in a :class:`~dnaembed.io.strings.PackedStrings`. It reads back
as that store does: :meth:`~PackedBases.packed`, ``take``, ``store[i]``.

Tasks take their reads as a :class:`ReadBlock`, in the store's own form: from
this store, the two-bit codes, decoded where the task runs. On Dask that is a
third fewer bytes to the workers: 1,333 MB against 2,072 at 10^6 reads under
``--memory 2G`` (two workers, 79.7 s against 81.0, one run each). In one process
it moves work, not saves it: at 3 x 10^6 reads under 2G the client's thread
spent ~4.7 s less CPU and the tasks ~4.3 s more (249.3 s against 248.6).
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dnaembed.arrays import drop_filler
from dnaembed.encoding import encode_bytes
from dnaembed.io.spill import SpillArray
from dnaembed.io.strings import PackedStrings, StringStore, unpack_strings

_BASES = b"ACGT"
#: Each byte's two-bit code (as a byte); 4 for any but A, C, G, T.
_CODE = bytes(_BASES.index(b) if b in _BASES else 4 for b in range(256))
#: The four bases of each packed byte (the first in its highest bits), as a string and as
#: one little-endian uint32 whose bytes are the bases in order.
_DECODE_STR = ["".join(chr(_BASES[(b >> s) & 3]) for s in (6, 4, 2, 0)) for b in range(256)]
_DECODE = np.frombuffer("".join(_DECODE_STR).encode("ascii"), dtype="<u4")
#: The same four as codes (A=0 ... T=3, :mod:`dnaembed.encoding`'s), one a byte.
_UNPACK = np.frombuffer(bytes((b >> s) & 3 for b in range(256) for s in (6, 4, 2, 0)),
                        dtype="<u4")
#: One read decoded by two hex expansions: a hex digit of the packed bytes (two bases,
#: ``c0 c1``) becomes the byte ``c0 << 4 | c1``, whose hex digits are the two codes.
_HEX = b"0123456789abcdef"
_HEX_TO_PAIR = bytes((_HEX.index(b) >> 2) << 4 | (_HEX.index(b) & 3) if b in _HEX else 0
                     for b in range(256))
_DIGIT_TO_BASE = bytes.maketrans(b"0123", _BASES)
#: Padding that brings a read of length n to a multiple of 4: ``_PADDING[-n & 3]``.
_PADDING = ["", "A", "AA", "AAA"]


def padded_codes(strings: Sequence[str]) -> bytes:
    """The two-bit code of every base (a byte each; 4 for one other than A, C, G, T),
    each read padded to a multiple of four bases."""
    return "".join([s + _PADDING[-len(s) & 3] for s in strings]).encode("ascii").translate(_CODE)


def pack_codes(codes: bytes) -> np.ndarray:
    """Four codes of :func:`padded_codes` to a byte, the first in the highest bits."""
    quads = np.frombuffer(codes, dtype="<u4")  # four codes, the first in the lowest byte
    return ((quads << 6) | (quads >> 4) | (quads >> 14) | (quads >> 24)).astype(np.uint8)


def unpack_one(codes: bytes | bytearray, length: int) -> str:
    """One read of ``length`` bases from its two-bit form: four passes in C over its
    bytes (a one-off check: 0.6-0.7 us at 150 nt, against 1.4 us by a string looked up
    per byte and joined)."""
    pairs = binascii.hexlify(codes).translate(_HEX_TO_PAIR)
    return binascii.hexlify(pairs).translate(_DIGIT_TO_BASE)[:length].decode("ascii")


def unpack_bases(codes: np.ndarray, lengths: np.ndarray, table: np.ndarray = _DECODE
                 ) -> np.ndarray:
    """Bytes (ASCII) of reads of ``lengths`` from their joined two-bit form; with
    ``table`` :data:`_UNPACK`, their codes."""
    bases = np.take(table, codes).view(np.uint8)  # take: half the time of codes as an index
    padding = -lengths & 3
    if not padding.any():
        return bases
    keep = np.ones(len(bases), dtype=bool)
    ends = np.cumsum(lengths + padding)
    for k in (1, 2, 3):
        keep[ends[padding >= k] - k] = False
    return bases[keep]


def _padded_sizes(lengths: np.ndarray) -> np.ndarray:
    """Bytes of each read's two-bit form (padded to a multiple of four bases)."""
    return (lengths.astype(np.int64) + 3) >> 2


@dataclass
class ReadBlock:
    """Reads as a task carries them, in their store's form: one byte per base, back to
    back (``two_bit`` False); or their two-bit codes, each read from a byte boundary
    (:class:`PackedBases`), with the reads holding another base (positions ``whole``)
    one byte per base in ``whole_data`` instead. ``width`` > 0: each read's bytes (or
    codes) in a row of ``width`` bytes, the rest of the row filler. :meth:`strings`
    decodes them.

    Why rows of one width: the store gathers them in one step, and dropping the filler
    cost the client more than the gather itself (:func:`~dnaembed.arrays.gather_padded`);
    the task slices each read from its row as it would from the joined bytes. The
    filler costs ~7% more bytes for reads of 130-163 nt.
    """

    data: np.ndarray
    lengths: np.ndarray
    two_bit: bool = False
    whole: np.ndarray | None = None
    whole_data: np.ndarray | None = None
    width: int = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def strings(self) -> list[str]:
        """The reads, in order, as strings."""
        if not self.two_bit:
            if not self.width:
                return unpack_strings(self.data, self.lengths)
            text = self.data.tobytes().decode("ascii")
            return _slices(text, self.width * np.arange(len(self.lengths)), self.lengths)
        if self.width:
            starts = 4 * self.width * np.arange(len(self.lengths))
        else:
            sizes = _padded_sizes(self.lengths)
            if self.whole is not None:
                sizes[self.whole] = 0
            starts = 4 * (np.cumsum(sizes) - sizes)
        # Four bases per byte, padding and all: each read is sliced from its first base.
        out = _slices(np.take(_DECODE, self.data).tobytes().decode("ascii"), starts,
                      self.lengths)
        if self.whole is not None and len(self.whole):
            whole = unpack_strings(self.whole_data, self.lengths[self.whole])
            for i, seq in zip(self.whole.tolist(), whole):
                out[i] = seq
        return out

    def codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The reads' base codes back to back (:func:`~dnaembed.encoding.encode_flat` of
        :meth:`strings`), and their lengths, without a string made.

        Why: the rescue's k-mer search codes a few reads of every cluster, a block of
        them at a time; decoded to strings, the blocks were made on the one thread that
        hands them out (~1.3 s of that thread's time in a rescue of 6.4 s at 10^6 reads
        on two workers; the rescue ~0.5 s faster with the codes made on the threads).
        """
        lengths = self.lengths.astype(np.int64)
        if len(lengths) == 0:
            return np.zeros(0, np.uint8), lengths
        if not self.two_bit:
            data = drop_filler(self.data.reshape(-1, self.width), lengths) if self.width \
                else self.data
            return encode_bytes(data), lengths
        whole = np.zeros(len(lengths), dtype=bool)
        if self.whole is not None:
            whole[self.whole] = True
        packed = np.where(whole, 0, lengths)  # a read kept whole has no two-bit codes
        if self.width:
            unpacked = np.take(_UNPACK, self.data).view(np.uint8)
            out = drop_filler(unpacked.reshape(len(lengths), -1), packed)
        else:
            out = unpack_bases(self.data, packed, _UNPACK)
        if whole.any():
            in_whole = np.repeat(whole, lengths)
            joined = np.empty(len(in_whole), dtype=np.uint8)
            joined[~in_whole], joined[in_whole] = out, encode_bytes(self.whole_data)
            out = joined
        return out, lengths


def _slices(text: str, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
    """``text[a : a + n]`` for each start and length."""
    return [text[a : a + n] for a, n in zip(starts.tolist(), lengths.tolist())]


def _is_acgt(seq: str) -> bool:
    return not seq.encode("ascii", "replace").translate(None, _BASES)


class PackedBases(StringStore):
    """Sequences at two bits per base (see the module notes); in memory or spilled.

    ``spill_to``/``spill_after`` as :class:`~dnaembed.io.strings.PackedStrings`'
    (the reads with other bases go to a second file beside ``spill_to``).
    Call :meth:`finish` after the last :meth:`append`.
    """

    def __init__(self, *, spill_to: Path | None = None, spill_after: int | None = None) -> None:
        self._codes = SpillArray((), np.uint8, spill_to=spill_to, spill_after=spill_after)
        other = None if spill_to is None else spill_to.with_name(spill_to.name + "-other")
        self._other = PackedStrings(spill_to=other, spill_after=spill_after)
        self._lengths: list[np.ndarray] = []
        self._other_rows: list[np.ndarray] = []
        self._count = 0
        self.lengths: np.ndarray | None = None
        #: Each read's first byte in the codes (a read with other bases has none).
        self.offsets: np.ndarray | None = None
        #: The reads kept whole, in order (row i of them is ``other_rows[i]``).
        self.other_rows = np.zeros(0, np.int64)

    @property
    def spilled(self) -> bool:
        """Whether the codes went to the spill file."""
        return self._codes.spilled

    @property
    def nbytes(self) -> int:
        """Bytes of the sequences as stored (codes, and the reads kept whole)."""
        return self._codes.nbytes + self._other.nbytes

    def __len__(self) -> int:
        return len(self.lengths) if self.lengths is not None else self._count

    def append(self, strings: Sequence[str]) -> None:
        """Adds ``strings`` after the others (those with a base other than A, C, G, T
        whole, aside)."""
        codes = padded_codes(strings)
        if b"\x04" in codes:  # an N somewhere: those reads are kept whole
            other = [i for i, s in enumerate(strings) if not _is_acgt(s)]
            self._other.append([strings[i] for i in other])
            self._other_rows.append(np.array(other, dtype=np.int64) + self._count)
            aside = set(other)
            codes = padded_codes([s for i, s in enumerate(strings) if i not in aside])
        self._codes.append(pack_codes(codes))
        self._lengths.append(np.fromiter(map(len, strings), dtype=np.int32, count=len(strings)))
        self._count += len(strings)

    def finish(self) -> PackedBases:
        """Ends the appending: the lengths and offsets are known from here on. Returns
        the store."""
        self._codes.finish()
        self._other.finish()
        self.lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int32)
        self._lengths = []
        if self._other_rows:
            self.other_rows = np.concatenate(self._other_rows)
        self._other_rows = []
        sizes = _padded_sizes(self.lengths)
        sizes[self.other_rows] = 0
        self.offsets = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.offsets[1:])
        return self

    def spill(self) -> bool:
        """Move the codes (and the reads kept whole) to their files now, if in memory."""
        moved = self._codes.spill()
        return self._other.spill() or moved

    def _others_among(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of ``rows`` (positions in it) are kept whole, and their rows aside."""
        if len(self.other_rows) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        aside = np.searchsorted(self.other_rows, rows)
        hit = self.other_rows[np.minimum(aside, len(self.other_rows) - 1)] == rows
        return np.flatnonzero(hit), aside[hit]

    def _codes_of(self, rows: np.ndarray) -> np.ndarray:
        """The two-bit codes of ``rows``, joined (none for a read kept whole)."""
        if len(rows) == 0:
            return np.zeros(0, np.uint8)
        starts = self.offsets[rows]
        return self._codes.gather(starts, self.offsets[rows + 1] - starts)

    def packed(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(bytes, lengths)`` of the given rows, in that order, one byte per base."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.lengths[rows]
        if len(rows) == 0:
            return np.zeros(0, np.uint8), lengths
        codes = self._codes_of(rows)
        at, aside = self._others_among(rows)
        if len(at) == 0:
            return unpack_bases(codes, lengths), lengths
        whole = np.zeros(len(rows), dtype=bool)
        whole[at] = True
        out = np.empty(int(lengths.sum()), dtype=np.uint8)
        in_whole = np.repeat(whole, lengths)
        out[~in_whole] = unpack_bases(codes, np.where(whole, 0, lengths))
        out[in_whole] = self._other.packed(aside)[0]
        return out, lengths

    def block(self, rows: np.ndarray) -> ReadBlock:
        """The given rows as a task takes them: their codes, not decoded (see the notes),
        as rows of one width where they are of similar lengths."""
        rows = np.asarray(rows, dtype=np.int64)
        at, aside = self._others_among(rows)
        whole = (at, self._other.packed(aside)[0]) if len(at) else (None, None)
        starts = self.offsets[rows]
        padded = (self._codes.gather_padded(starts, self.offsets[rows + 1] - starts)
                  if len(rows) else None)
        if padded is not None:
            return ReadBlock(padded.reshape(-1), self.lengths[rows], True, *whole,
                             width=padded.shape[1])
        return ReadBlock(self._codes_of(rows), self.lengths[rows], True, *whole)

    def __getitem__(self, row: int) -> str:
        if len(self.other_rows):
            aside = int(np.searchsorted(self.other_rows, row))
            if aside < len(self.other_rows) and self.other_rows.item(aside) == row:
                return self._other[aside]
        codes = self._codes.row_bytes(self.offsets.item(row), self.offsets.item(row + 1))
        return unpack_one(codes, self.lengths.item(row))

    def close(self) -> None:
        """Frees the sequences (and closes any spill files)."""
        self._codes.close()
        self._other.close()

