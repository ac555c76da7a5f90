"""Per-read data that may not fit in memory: kept in memory, or spilled to files under a tmpdir.

A run over millions of reads keeps, besides small per-read arrays, the reads
themselves and their vectors. :class:`SpillArray` holds rows of a fixed shape
and dtype that are appended once, in order, then read back by row (a
partition's members, a chunk to embed). Either lives in memory or, when the
memory budget says so, in a file that is memory-mapped for reading. Pages of
a mapped file count as resident memory once touched, so every read-back copies
the rows it needs and then releases the mapping's pages
(``madvise(MADV_DONTNEED)``): what stays resident is one request's rows, not
the file. :class:`~dnaembed.io.strings.PackedStrings` holds strings (sequences, read ids)
in one of these. :class:`~dnaembed.io.spill_dir.SpillDir` is the directory the files go
to, removed when the run ends, whether it succeeds or fails.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.arrays import gather_padded, gather_rows
from dnaembed.errors import DnaembedError

if TYPE_CHECKING:
    import numpy.typing as npt

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

    def __init__(self, row_shape: tuple[int, ...], dtype: npt.DTypeLike, *,
                 spill_to: Path | None = None, spill_after: int | None = None) -> None:
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
        """Whether the rows went to the spill file."""
        return self.path is not None

    @property
    def nbytes(self) -> int:
        """Bytes of the rows appended."""
        return self.rows * int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize

    def append(self, block: np.ndarray) -> None:
        """Adds the rows of ``block`` after the others (in memory, or to the file)."""
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
        """Frees the rows held in memory and closes the spill file's handle and mapping (the
        file is left where it is)."""
        self._data = None
        self._buffer = bytearray()  # in memory: the rows go now, not with the object
        if self._handle is not None:
            self._handle.close()
        if self._mapped is not None:
            self._mapped.close()
            self._mapped = None
