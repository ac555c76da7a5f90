"""Per-read data that may not fit in memory: kept in memory, or spilled to files under a tmpdir.

A run over millions of reads keeps, besides small per-read arrays, the reads
themselves and their vectors. :class:`SpillArray` holds rows of a fixed shape
and dtype that are appended once, in order, then read back by row (a
partition's members, a chunk to embed). Either lives in memory or, when the
memory budget says so, in a file that is memory-mapped for reading. Pages of
a mapped file count as resident memory once touched, so every read-back copies
the rows it needs and then releases the mapping's pages
(``madvise(MADV_DONTNEED)``): what stays resident is one request's rows, not
the file. :class:`PackedStrings` holds strings (sequences, read ids) as one
byte array with offsets. :class:`~dnaembed.io.spill_dir.SpillDir` is the directory the
files go to, removed when the run ends, whether it succeeds or fails.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.arrays import gather_padded, gather_rows
from dnaembed.errors import DnaembedError

if TYPE_CHECKING:  # bases builds on this module
    from dnaembed.io.bases import ReadBlock


#: Strings decoded at a time when a store is iterated.
ITER_CHUNK = 1 << 16
#: Bytes read from a mapping between two releases of its pages (bounds what stays resident).
RELEASE_BYTES = 8 << 20


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """Writes to the spilled file ``path``, whose errors name it: a write's OSError has no
    file name, and a full --tmpdir ended a run with "error: No space left on device"."""
    try:
        yield
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, f"{e.strerror} (the data spilled to --tmpdir; a tmpdir with "
                      "more room, or a larger --memory, which spills less)", str(path)) from None


class _Mapped:
    """A read-only mapping of a file, whose touched pages are given back now and then."""

    def __init__(self, path: Path) -> None:
        self.size = path.stat().st_size
        self._file = open(path, "rb")  # noqa: SIM115 - closed in close()
        self.map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self._touched = 0
        self.release_after = RELEASE_BYTES

    def touched(self, nbytes: int) -> None:
        """``nbytes`` were read: release the pages once enough have been (never while the
        whole file may stay resident)."""
        self._touched += nbytes
        if self._touched >= self.release_after and self.release_after < self.size:
            self.release()

    def release(self) -> None:
        self._touched = 0
        if self.map is not None and hasattr(mmap, "MADV_DONTNEED"):
            self.map.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
        self._file.close()


class SpillArray:
    """Rows of shape ``row_shape`` and ``dtype``, appended in order, then read back by row.

    ``spill_to``: a file to keep them in (None: in memory); ``spill_after``:
    keep them in memory until they take more than this many bytes, then move
    them to ``spill_to`` (None: from the first row). Call :meth:`finish` after
    the last :meth:`append`.
    """

    def __init__(self, row_shape: tuple[int, ...], dtype, *, spill_to: Path | None = None,
                 spill_after: int | None = None) -> None:
        self.row_shape = tuple(row_shape)
        self.dtype = np.dtype(dtype)
        self._target = spill_to
        self._spill_after = spill_after
        self.path: Path | None = None
        self.rows = 0
        self._row_size = int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize
        # In memory: one growing buffer (reallocated in place by the system for large sizes),
        # not blocks joined at the end, which would hold everything twice at that moment.
        self._buffer = bytearray()
        self._handle = None
        self._data: np.ndarray | None = None
        self._mapped: _Mapped | None = None
        if spill_to is not None and spill_after is None:
            self._start_spilling()

    def _start_spilling(self) -> None:
        self.path = self._target
        self._handle = open(self.path, "wb")  # noqa: SIM115 - closed in finish() or close()
        with _writing(self.path):
            self._handle.write(self._buffer)
        self._buffer = bytearray()

    @property
    def spilled(self) -> bool:
        return self.path is not None

    @property
    def nbytes(self) -> int:
        return self.rows * int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.row_shape:
            raise DnaembedError(f"rows of shape {self.row_shape} expected, got {block.shape[1:]}")
        if self._handle is not None:
            with _writing(self.path):
                self._handle.write(block.tobytes())
        else:
            self._buffer += block.tobytes()
        self.rows += len(block)
        if (self._handle is None and self._target is not None
                and self._spill_after is not None and self.nbytes > self._spill_after):
            self._start_spilling()

    def finish(self) -> SpillArray:
        """No more rows: make the array readable."""
        if self._handle is not None:
            with _writing(self.path):  # what is still buffered goes out now
                self._handle.close()
            self._handle = None
            self._map()
        else:
            self._data = np.frombuffer(self._buffer, dtype=self.dtype).reshape(-1, *self.row_shape)
        return self

    def _map(self) -> None:
        self._mapped = _Mapped(self.path)
        buffer = self._mapped.map if self._mapped.map is not None else b""
        self._data = np.frombuffer(buffer, dtype=self.dtype).reshape(-1, *self.row_shape)

    def spill(self) -> bool:
        """Move finished rows held in memory to the file now (True if they moved).

        For a run that learns only after reading its input how little room the reads
        may take. Rows taken before stay valid: :meth:`take` copies."""
        if self.spilled or self._target is None or self._data is None:
            return False
        self.path = self._target
        with _writing(self.path), open(self.path, "wb") as handle:
            handle.write(self._buffer)
        self._data = None
        self._buffer = bytearray()
        self._map()
        return True

    def take(self, rows: np.ndarray | slice, *, release: bool = False) -> np.ndarray:
        """A copy of the given rows; ``release``: give a spilled file's pages back at once.

        Otherwise pages are given back after :data:`RELEASE_BYTES`, counting at
        least a page per row read (rows read one at a time are on scattered pages).
        """
        if self._data is None:
            raise DnaembedError("SpillArray.take before finish")
        # Indexing by an array copies already; a slice (or one row) is a view, to be copied.
        # ``np.take`` copies whole rows where indexing copies item by item: 12,000 random
        # rows of 64 float16 from 10^6, one thread, 0.03 us a row against 0.07-0.09.
        if isinstance(rows, np.ndarray) and rows.dtype.kind in "iu":
            out = np.take(self._data, rows, axis=0)
        else:
            out = self._data[rows]
            if not isinstance(rows, (np.ndarray, list)):
                out = out.copy()
        if self._mapped is not None:
            if release:
                self._mapped.release()
            else:
                count = 1 if isinstance(rows, slice) else len(rows)
                self._mapped.touched(max(out.nbytes, count * mmap.PAGESIZE))
        return out

    def gather(self, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Rows ``start : start + size`` of a 1-D array, joined, then a spilled file's
        pages given back: one slice where they follow one another, else one gather."""
        if len(starts) and np.all(starts[1:] == starts[:-1] + sizes[:-1]):
            start = int(starts[0])
            return self.take(slice(start, start + int(sizes.sum())), release=True)
        data = gather_rows(self.view(), starts, sizes)
        self.release()
        return data

    def gather_padded(self, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray | None:
        """Rows ``start : start + size`` of a 1-D array as rows of one width
        (:func:`~dnaembed.arrays.gather_padded`; None where that does not suit them), then
        a spilled file's pages given back."""
        block = gather_padded(self.view(), starts, sizes)
        self.release()
        return block

    def row_bytes(self, start: int, stop: int) -> bytes | bytearray:
        """Rows ``start:stop`` as bytes: :meth:`take` for one string at a time, without
        the array copies (the linker and the exact checks ask for millions). Sliced from
        the mapping or the buffer itself, not through the array (a one-off check: 1.06 µs
        a random row of 3 x 10^6 in memory against 1.35; docs/scaling-history.md)."""
        if self._data is None:
            raise DnaembedError("SpillArray.row_bytes before finish")
        size = self._row_size
        if self._mapped is None:
            return self._buffer[start * size : stop * size]
        out = self._mapped.map[start * size : stop * size] if self._mapped.map else b""
        self._mapped.touched(max(len(out), mmap.PAGESIZE))
        return out

    def view(self) -> np.ndarray:
        """The rows without copying (slices of it must be copied before :meth:`release`)."""
        if self._data is None:
            raise DnaembedError("SpillArray.view before finish")
        return self._data

    def release(self) -> None:
        """Give a spilled file's resident pages back."""
        if self._mapped is not None:
            self._mapped.release()

    @contextlib.contextmanager
    def resident_up_to(self, nbytes: int) -> Iterator[None]:
        """Within the block, a spilled file's pages stay resident up to ``nbytes`` before
        they are given back; given back at its end. Where ``nbytes`` holds the whole
        file, its rows are held in memory instead (:meth:`_held_in_memory`).

        Why: a partition's members are scattered over the whole file, so releasing the
        pages after every request faults each one in again for the next. At 3 x 10^6
        reads under ``--memory 2G``, round 1's vectors (366 MB, 733 partitions) cost
        the client thread 23-26 s of CPU in its search stages with a release per
        request, 17 s with the file resident throughout (the same output).
        """
        mapped = self._mapped
        if mapped is None:
            yield
            return
        if nbytes >= mapped.size:
            with self._held_in_memory():
                yield
            return
        mapped.release_after = max(RELEASE_BYTES, int(nbytes))
        try:
            yield
        finally:
            mapped.release_after = RELEASE_BYTES
            mapped.release()

    @contextlib.contextmanager
    def _held_in_memory(self) -> Iterator[None]:
        """Within the block, the rows of a spilled file from a copy in memory (as many bytes
        as the file's pages would take once all are touched); the mapping's pages are
        given back as the copy is made.

        Why not the mapping's pages, resident: round 1's gathers of its members from the
        mapping, while the tasks ran beside them, took the client thread 5.9 s (3.2 s of
        CPU) at 3 x 10^6 reads under ``--memory 2G``, from a copy 0.9 s (0.6 s); the
        threshold's sample gathers the same rows from the mapping, with no task running,
        in 0.6 s. Where the time goes (the mapping's 4 KiB pages, one for every row read)
        was not pinned down.
        """
        mapped, rows = self._mapped, self._data
        held = np.empty_like(rows)
        step = max(1, RELEASE_BYTES // max(self._row_size, 1))
        for start in range(0, len(rows), step):
            held[start : start + step] = rows[start : start + step]
            mapped.release()
        self._data, self._mapped = held, None
        try:
            yield
        finally:
            if self._data is held:
                self._data, self._mapped = rows, mapped
            else:  # closed within the block: the mapping is closed too
                del rows
                mapped.close()

    def close(self) -> None:
        self._data = None
        self._buffer = bytearray()  # in memory: the rows go now, not with the object
        if self._handle is not None:
            self._handle.close()
        if self._mapped is not None:
            self._mapped.close()
            self._mapped = None


class StringStore:
    """What a store of strings read back by row shares: :meth:`take` and iteration
    through its :meth:`packed` form (``(bytes, lengths)``)."""

    encoding = "ascii"

    def __len__(self) -> int:
        raise NotImplementedError

    def packed(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
        return self._bytes.spilled

    @property
    def nbytes(self) -> int:
        return self._bytes.nbytes

    def __len__(self) -> int:
        return len(self.lengths) if self.lengths is not None else sum(map(len, self._lengths))

    def append(self, strings: Sequence[str]) -> None:
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


def trim_memory() -> None:
    """Give memory that was freed back to the system (glibc keeps it, per thread, otherwise).

    Work done on other threads (tasks of the in-process executor) frees its memory
    into those threads' heaps, where later work on this thread cannot reuse it:
    without a trim the peaks of successive stages add up.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


#: glibc's mallopt parameters.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def set_allocator_thresholds(mmap_bytes: int, trim_bytes: int) -> None:
    """glibc's thresholds, fixed: a block of at least ``mmap_bytes`` gets pages of its own
    (given back when freed), and free memory above ``trim_bytes`` at the top of a heap is
    given back. A no-op where the C library is not glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, mmap_bytes)
        libc.mallopt(_M_TRIM_THRESHOLD, trim_bytes)
    except (OSError, AttributeError):
        pass
