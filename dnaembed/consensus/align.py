"""Every read of some clusters aligned to its cluster's current estimate (step 3 of :mod:`.engine`).

Globally, or, for a read shorter than the estimate by more than
:func:`~dnaembed.consensus.strands.length_tolerance`, as an infix clipped to its
best-aligned stretch (:func:`clip_alignment`), so a truncated read, or one that
lost a piece of its middle, votes only where it aligns. Alignments are C calls
(python-Levenshtein, edlib); :class:`Alignments` is what the votes are counted from.
"""

from __future__ import annotations

from dataclasses import dataclass

import edlib
import Levenshtein
import numpy as np

from dnaembed.consensus.strands import length_tolerance
from dnaembed.encoding import encode_flat, offsets, segment_ids


@dataclass(frozen=True)
class Estimates:
    """The estimates of some clusters, concatenated ("active" cluster ``k`` is the k-th).

    Positions are numbered over the concatenated estimates (``offsets[k]`` is
    where cluster ``k`` starts); gaps ("slots", one before each position and one
    after the last) over the concatenated ``len + 1`` slots (``slot_offsets``).
    """

    strings: list[str]
    codes: np.ndarray
    lengths: np.ndarray
    offsets: np.ndarray
    slot_offsets: np.ndarray
    #: The active cluster of each position.
    seg: np.ndarray

    @classmethod
    def of(cls, strings: list[str]) -> Estimates:
        """The estimates ``strings`` (one per active cluster), coded, with their offsets."""
        codes, lengths = encode_flat(strings)
        starts = offsets(lengths)
        return cls(
            strings=strings,
            codes=codes,
            lengths=lengths,
            offsets=starts,
            slot_offsets=starts + np.arange(len(strings)),  # every estimate has len + 1 slots
            seg=segment_ids(lengths),
        )


@dataclass(frozen=True)
class Alignments:
    """Reads aligned to their cluster's estimate: spans, edit counts and the edits."""

    estimates: Estimates
    #: Per aligned read: its index among the chunk's reads, and its active cluster.
    read_idx: np.ndarray
    read_cl: np.ndarray
    #: First and last estimate position each read's alignment covers (local coordinates).
    span_start: np.ndarray
    span_end: np.ndarray
    #: Read aligned as an infix (truncated).
    infix: np.ndarray
    #: Edit distance of each read to the estimate (over its span).
    n_ops: np.ndarray
    #: Every read's edits in turn (``n_ops`` each): the first letter of the edit's
    #: tag (r(eplace), d(elete), i(nsert)), the estimate position from the read's
    #: span start, and the read position (python-Levenshtein's editops).
    op_tag: np.ndarray
    op_est: np.ndarray
    op_read_pos: np.ndarray


def align_reads(
    estimates: Estimates, seqs: list[str], read_idx: np.ndarray, read_cl: np.ndarray
) -> Alignments:
    """Align read ``seqs[read_idx[k]]`` to the estimate of active cluster ``read_cl[k]``."""
    ops: list = []
    n_ops = np.zeros(len(read_idx), dtype=np.int64)
    span_start = np.zeros(len(read_idx), dtype=np.int64)
    span_end = np.zeros(len(read_idx), dtype=np.int64)
    infix = np.zeros(len(read_idx), dtype=bool)
    est = estimates.strings
    elens_list = estimates.lengths.tolist()
    editops = Levenshtein.editops
    for k, (r, cl) in enumerate(zip(read_idx.tolist(), read_cl.tolist())):
        read = seqs[r]
        e = est[cl]
        length = elens_list[cl]
        if len(read) < length - length_tolerance(length):
            # A truncated read votes only where it aligns (infix alignment).
            s, t = edlib.align(read, e, mode="HW", task="locations")["locations"][0]
            lo, hi, found = clip_alignment(editops(e[s : t + 1], read), t - s + 1)
            span_start[k] = s + lo
            span_end[k] = s + hi
            infix[k] = True
        else:
            found = editops(e, read)
            span_end[k] = length - 1
        n_ops[k] = len(found)
        ops.extend(found)
    return Alignments(
        estimates, read_idx, read_cl, span_start, span_end, infix, n_ops, *_edit_columns(ops)
    )


def _edit_columns(ops: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """python-Levenshtein's editops as arrays: tag letter code, estimate and read positions."""
    if not ops:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.int64)
    tags, sp, dp = zip(*ops)
    tag = np.array(tags).view(np.uint32).reshape(len(tags), -1)[:, 0]
    return tag, np.asarray(sp, dtype=np.int64), np.asarray(dp, dtype=np.int64)


def clip_alignment(ops: list, length: int, penalty: int = 3) -> tuple[int, int, list]:
    """The best-aligned stretch of an infix alignment: ``(first, last, ops)`` (local coords).

    Real short reads are not all clean truncations: some miss a piece of the
    middle, and their infix alignment ends in a stretch of errors. Each aligned
    position scores +1 and each edit ``-penalty``; the highest-scoring stretch
    (Kadane) is kept, its edits renumbered from its first position. An
    alignment with no positive stretch is returned whole (the outlier rule
    then decides).
    """
    best = cur = 0
    best_lo, best_hi, best_ops = 0, length - 1, (0, len(ops))
    cur_lo = prev = first_op = 0
    found = False
    for idx, (tag, i, _j) in enumerate(ops):
        cur += i - prev
        if cur > best:
            best, best_lo, best_hi, best_ops, found = cur, cur_lo, i - 1, (first_op, idx), True
        step = 0 if tag == "insert" else 1
        cur -= penalty
        if cur <= 0:
            cur, cur_lo, first_op = 0, i + step, idx + 1
        prev = i + step
    cur += length - prev
    if cur > best:
        best_lo, best_hi, best_ops, found = cur_lo, length - 1, (first_op, len(ops)), True
    if not found or (best_lo == 0 and best_hi == length - 1):
        return 0, length - 1, ops
    return best_lo, best_hi, [(t, i - best_lo, j) for t, i, j in ops[best_ops[0] : best_ops[1]]]
