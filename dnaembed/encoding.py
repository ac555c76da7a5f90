"""The nucleotide alphabet and the conversions between strings and integer codes.

Sequences travel through the vectorised parts of the toolkit (the channel, the
pair sampler, the encoder's input) as one flat ``uint8`` array of codes plus an
array of lengths, never as one Python object per base.

Codes: A=0, C=1, G=2, T=3, N=4. The model's input adds a padding symbol (5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.arrays import gather_rows

if TYPE_CHECKING:
    import numpy.typing as npt

BASES = "ACGT"
ALPHABET = "ACGTN"
N_CODE = 4
PAD_CODE = 5

# ASCII -> code; anything that is not ACGTN (either case) maps to 255 and is rejected at the door.
_ENCODE_TABLE = np.full(256, 255, dtype=np.uint8)
for _i, _b in enumerate(ALPHABET):
    _ENCODE_TABLE[ord(_b)] = _i
    _ENCODE_TABLE[ord(_b.lower())] = _i
# The same, plus '#' for padding: used to pack strings straight into fixed windows.
_PADDED_TABLE = _ENCODE_TABLE.copy()
_PADDED_TABLE[ord("#")] = PAD_CODE
_DECODE_TABLE = np.frombuffer(ALPHABET.encode() + b"N" * 251, dtype=np.uint8)
# Complement of each code (A<->T, C<->G); N and padding stay.
COMPLEMENT_CODE = np.array([3, 2, 1, 0, N_CODE, PAD_CODE], dtype=np.uint8)
_COMPLEMENT_STR = str.maketrans("ACGTNacgtn", "TGCANtgcan")


def encode_flat(seqs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode sequences into one flat code array and their lengths.

    Sequences must already be validated (ACGTN, any case).
    """
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    return encode_bytes(np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8)), lengths


def encode_bytes(raw: np.ndarray) -> np.ndarray:
    """The code of each ASCII base (``uint8`` bytes; validated, ACGTN in either case)."""
    return _ENCODE_TABLE[raw]


def decode_flat(codes: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Inverse of :func:`encode_flat`."""
    text = _DECODE_TABLE[codes].tobytes().decode("ascii")
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return [text[s:e] for s, e in zip(starts.tolist(), ends.tolist())]


def offsets(lengths: np.ndarray) -> np.ndarray:
    """Start offset of each sequence in a flat array."""
    starts = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    return starts


def segment_ids(lengths: np.ndarray, dtype: npt.DTypeLike = np.int64) -> np.ndarray:
    """For each element of a flat array, the index of the sequence it belongs to."""
    return np.repeat(np.arange(len(lengths), dtype=dtype), lengths)


def reverse_complement(seq: str) -> str:
    """Reverse complement of one sequence string (N stays N)."""
    return seq.translate(_COMPLEMENT_STR)[::-1]


def reverse_segments(
    values: np.ndarray, lengths: np.ndarray, which: np.ndarray | None = None
) -> np.ndarray:
    """Reverse each segment of a flat uint8 array (all, or those where ``which`` is True)."""
    return _map_reversed(values, lengths, which, None)


def reverse_complement_flat(
    codes: np.ndarray, lengths: np.ndarray, which: np.ndarray | None = None
) -> np.ndarray:
    """Reverse-complement the sequences of a flat array of base codes (all, or those where
    ``which`` is True)."""
    return _map_reversed(codes, lengths, which, COMPLEMENT_CODE)


def _map_reversed(values: np.ndarray, lengths: np.ndarray, which: np.ndarray | None,
                  table: np.ndarray | None) -> np.ndarray:
    """The segments ``which`` (all: None) reversed, each byte mapped through ``table``.

    A segment reversed is a slice of the whole array reversed (from the mirror of its
    end), so the segments are gathered as rows of equal width (:func:`gather_rows`)
    rather than mirrored byte by byte through int64 positions: the simulator reverses
    about half of the reads it writes.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    flip = np.ones(len(lengths), dtype=bool) if which is None else np.asarray(which, bool)
    backwards = np.ascontiguousarray(values[::-1])
    reversed_ = gather_rows(backwards, len(values) - np.cumsum(lengths)[flip], lengths[flip])
    if table is not None:
        reversed_ = table[reversed_]
    if which is None:
        return reversed_
    out = values.copy()
    out[np.repeat(flip, lengths)] = reversed_
    return out


def to_padded(
    codes: np.ndarray, lengths: np.ndarray, window: int, pad: int = PAD_CODE
) -> np.ndarray:
    """Pack a flat array into a ``(n, window)`` matrix, padding with ``pad``.

    Sequences longer than ``window`` keep their first ``window`` bases (the
    caller decides and logs the policy; see :mod:`dnaembed.model.inference`).
    """
    n = len(lengths)
    out = np.full((n, window), pad, dtype=np.uint8)
    if n == 0:
        return out
    clipped = np.minimum(lengths, window)
    seg = segment_ids(clipped)
    starts = offsets(lengths)
    clipped_starts = offsets(clipped)
    col = np.arange(int(clipped.sum()), dtype=np.int64) - clipped_starts[seg]
    out[seg, col] = codes[starts[seg] + col]
    return out


def encode_padded(seqs: Sequence[str], window: int) -> np.ndarray:
    """Validated sequences straight to a ``(n, window)`` code matrix (first ``window`` bases).

    Equivalent to ``to_padded(*encode_flat(seqs), window)``, about 10x faster:
    one join of fixed-width strings and one table lookup.
    """
    text = "".join(s[:window].ljust(window, "#") for s in seqs)
    raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return _PADDED_TABLE[raw].reshape(len(seqs), window)


def random_codes(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniform random bases (codes 0..3)."""
    return rng.integers(0, 4, size=n, dtype=np.uint8)


def kmer_codes(seqs: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every k-mer without N of every sequence, in order: (k-mer codes, sequence index).

    A k-mer's code is its bases as 2-bit digits (A=0, C=1, G=2, T=3), first base highest.
    The codes are built from those of 1, 2, 4, 8... bases (each twice the last), in
    int32 up to k = 15: ~log2(k) passes over the reads instead of k passes in int64. The
    rescue codes every cluster's central reads twice (11-mers: 34 ns per base before, 19
    now).
    """
    return kmer_codes_of(*encode_flat(seqs), k)


def kmer_codes_of(codes: np.ndarray, lengths: np.ndarray, k: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kmer_codes` of sequences already coded (as :func:`encode_flat` gives them)."""
    if k < 1:
        raise ValueError(f"k-mer length must be at least 1, not {k}")
    n_pos = len(codes) - k + 1
    if n_pos <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    value = _kmer_values(codes, k, n_pos)
    # The k-mers that lie inside one sequence (each one's first ``per`` positions), found
    # from the lengths rather than by comparing every position's sequence with that of its
    # k-th base: 1.7 ms against 2.5 a block of 2,048 reads of ~150 nt.
    lengths = np.asarray(lengths, dtype=np.int64)
    per = np.maximum(lengths - k + 1, 0)
    ends = np.cumsum(per)
    at = np.repeat(offsets(lengths) - ends + per, per) + np.arange(ends[-1] if len(ends) else 0)
    owner = np.repeat(np.arange(len(lengths)), per)
    n_at = np.flatnonzero(codes == N_CODE)
    if len(n_at):  # and hold no N: not those starting up to k - 1 bases before one
        free = np.ones(len(codes), dtype=bool)
        free[(n_at[:, None] - np.arange(k)).ravel().clip(0)] = False
        keep = free[at]
        at, owner = at[keep], owner[keep]
    return value[at].astype(np.int64), owner


def _kmer_values(codes: np.ndarray, k: int, n_pos: int) -> np.ndarray:
    """The code of the k bases from each of the first ``n_pos`` positions (int32)."""
    dtype = np.int32 if k <= 15 else np.int64  # 2k bits
    runs = {1: (codes & 3).astype(dtype)}  # size -> codes of that many bases from each
    size = 1
    while 2 * size <= k:
        run = runs[size]
        runs[2 * size] = (run[: len(run) - size] << (2 * size)) | run[size:]
        size *= 2
    value, done = None, 0
    for size in sorted(runs, reverse=True):  # k as a sum of distinct powers of two
        if done + size <= k:
            part = runs[size][done : done + n_pos]
            value = part.copy() if value is None else (value << (2 * size)) | part
            done += size
    return value


def _chunk_reverse_complements() -> np.ndarray:
    """Per 4-base chunk code (8 bits): the code of its reverse complement."""
    chunk = np.arange(256, dtype=np.int64)
    out = np.zeros(256, dtype=np.int64)
    for shift in range(0, 8, 2):
        out = (out << 2) | (3 - ((chunk >> shift) & 3))  # complement of digit d: 3 - d
    return out


_CHUNK_RC = _chunk_reverse_complements()


def reverse_complement_codes(values: np.ndarray, k: int) -> np.ndarray:
    """The codes (as :func:`kmer_codes` makes them) of the reverse complements of k-mers."""
    values = np.asarray(values, dtype=np.int64)
    # Four bases at a time by table: the k-mer as a 4*chunks-mer led by A's, whose reverse
    # complement ends in as many T's, shifted out at the end.
    chunks = (k + 3) // 4
    out = np.zeros_like(values)
    for i in range(chunks):
        out <<= 8
        out |= _CHUNK_RC[(values >> (8 * i)) & 255]
    out >>= 2 * (4 * chunks - k)
    return out
