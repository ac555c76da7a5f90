"""Small numpy helpers shared by several stages (sorting-based grouping)."""

from __future__ import annotations

import functools

import numpy as np


def rank_in_groups(keys: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal consecutive ``keys``."""
    if len(keys) == 0:
        return keys
    idx = np.arange(len(keys))
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    return idx - np.maximum.accumulate(np.where(starts, idx, 0))


def sorted_unique(values: np.ndarray, return_counts: bool = False
                  ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``np.unique`` by sorting: numpy's hash-based unique is much slower on large int arrays."""
    values = np.sort(values)
    if len(values) == 0:
        return (values, np.zeros(0, np.int64)) if return_counts else values
    first = np.empty(len(values), dtype=bool)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    uniq = values[first]
    if not return_counts:
        return uniq
    starts = np.flatnonzero(first)
    return uniq, np.diff(np.append(starts, len(values)))


def largest_first(costs: np.ndarray) -> np.ndarray:
    """Indices by decreasing cost, ties in index order: the order to hand out tasks of
    these costs, so that the last to finish are small ones and no worker waits long on
    another at the end of a phase (longest processing time first)."""
    return np.argsort(-np.asarray(costs, dtype=np.float64), kind="stable")


#: A block of equal-width rows may hold at most this many times the bytes asked for
#: (reads of similar lengths); beyond it, rows are joined one by one.
GATHER_SLACK = 2


def gather_rows(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``buffer[s : s + n]`` for each start and length, joined (a 1-D uint8 array).

    Every task's reads are packed here (~10^7 rows per 10^6 reads, 10 per read), and
    reads are reversed here (:func:`dnaembed.encoding.reverse_segments`). As
    one gather of equal-width rows (:func:`gather_padded`, then the bytes past each
    row's length dropped) it makes no object per row: joining a slice per
    row took 1.7 us of CPU per row in a run at 10^6 reads, where the client's heap is
    large and the collector runs often, and this takes ~0.5 us.
    """
    block = gather_padded(buffer, starts, lengths)
    if block is None:
        view = memoryview(buffer)
        data = b"".join([view[a : a + n] for a, n in zip(starts.tolist(), lengths.tolist())])
        return np.frombuffer(data, dtype=np.uint8)
    return drop_filler(block, lengths)


def drop_filler(rows: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each row's first ``lengths`` items, joined: a ``(rows, width)`` block of
    :func:`gather_padded` as :func:`gather_rows` gives it."""
    width = rows.shape[1]
    if (lengths == width).all():
        return rows.reshape(-1)
    return rows[_leading(width, lengths)]


def gather_padded(buffer: np.ndarray, starts: np.ndarray,
                  lengths: np.ndarray) -> np.ndarray | None:
    """``buffer[s : s + width]`` for each start, as a ``(rows, width)`` array, ``width`` the
    longest length: each row's first ``length`` bytes are its own, the rest filler (the
    bytes after it in ``buffer``, or before them for a row near its end). None where
    rows of that width would hold more than :data:`GATHER_SLACK` times the bytes asked
    for (a few rows far longer than the rest), or none is asked for.

    The rows as they are, with no filler dropped: dropping it (:func:`gather_rows`) took
    ~0.18 of the gather's 0.26 us a row (rows of 130-163 bytes, 12,000 from 10^6).
    Each window is one item of ``width`` bytes, which numpy copies whole: as a row of
    ``width`` one-byte items it copied them one by one (12,000 random rows of 140-160
    bytes from 10^6, one thread: 0.07 us a row against 0.11-0.12).
    """
    width = int(lengths.max(initial=0))
    if width == 0 or width * len(lengths) > GATHER_SLACK * int(lengths.sum()):
        return None
    # Rows within ``width`` of the end have no full-width window: moved back, then shifted.
    last = len(buffer) - width
    shift = np.maximum(starts - last, 0)
    windows = np.ndarray((last + 1,), dtype=np.dtype((np.void, width)),
                         buffer=np.ascontiguousarray(buffer), strides=(1,))
    block = windows[starts - shift].view(np.uint8).reshape(len(starts), width)
    if shift.any():
        for row in np.flatnonzero(shift).tolist():
            block[row, : width - shift[row]] = block[row, shift[row] :].copy()
    return block


#: Widest rows whose masks :func:`_prefix_masks` keeps ((width + 1) x width bytes, 16
#: widths at most: 4 MB at this width).
PREFIX_MASKS_WIDTH = 512


def _leading(width: int, lengths: np.ndarray) -> np.ndarray:
    """``(rows, width)`` booleans, True in each row's first ``lengths`` columns.

    Looked up per length: comparing every byte's column with its row's length took
    0.12 of the gather's 0.28 us per row (12,000 rows of 135-165 bytes); the lookup
    takes 0.02.
    """
    if width > PREFIX_MASKS_WIDTH:
        return np.arange(width)[None, :] < lengths[:, None]
    return _prefix_masks(width)[lengths]


@functools.lru_cache(maxsize=16)
def _prefix_masks(width: int) -> np.ndarray:
    """Row ``n`` of ``(width + 1, width)`` booleans: True in its first ``n`` columns."""
    masks = np.tri(width + 1, width, -1, dtype=bool)
    masks.setflags(write=False)  # shared between calls and threads
    return masks
