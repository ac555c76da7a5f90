"""Embedding files: ``NAME.npy`` (one row per read) beside ``NAME.ids.txt`` (one id per line).

``dnaembed embed`` streams: reads are embedded chunk by chunk and the rows
appended to the ``.npy`` file, whose header (which records the row count) is
written first with room to spare and rewritten when the count is known. Memory
therefore stays bounded by one chunk whatever the input size, and the result is
a standard ``.npy`` file (``numpy.load``, memory-mappable). Both files are
written to temporary names and renamed only when complete.

Row i of the array is the embedding of the read on line i of the ids file; the
squared Euclidean distance of two rows approximates the Levenshtein distance of
the two reads.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from dnaembed.errors import DnaembedError, InputError, UsageError
from dnaembed.io.atomic import atomic_path, is_stream

DTYPES = ("float32", "float16")


#: Total length of the .npy preamble (magic, version, header length, header): room for any shape.
_HEADER_BYTES = 128


_MAGIC = b"\x93NUMPY\x01\x00"


def ids_path_for(npy_path: str | os.PathLike) -> Path:
    """``emb.npy`` -> ``emb.ids.txt`` (any other name: NAME.ids.txt)."""
    p = Path(npy_path)
    stem = p.name[:-4] if p.name.endswith(".npy") else p.name
    return p.with_name(stem + ".ids.txt")


def check_embedding_output(path: str | os.PathLike, option: str = "-o/--output") -> None:
    """Refuse an embeddings output that is not a file (a usage error, before any work).

    The .npy header, which records the row count, is rewritten once the rows are
    written: a named pipe, a device or a process's stream (``/dev/stdout``,
    ``/dev/fd/N``) cannot seek back, so its reader got a header of 0 rows before the
    rows, and the error then named the ids file. The ids file beside a device would
    also be created among the devices (``/dev/null.ids.txt``).
    """
    if is_stream(path):
        raise UsageError(f"{option} {path}: not a file: embeddings are a .npy file whose "
                         "header is written last, with its ids beside it; give a file name")


def _header(dtype: np.dtype, rows: int, dim: int) -> bytes:
    text = (
        f"{{'descr': {np.lib.format.dtype_to_descr(dtype)!r}, 'fortran_order': False, "
        f"'shape': ({rows}, {dim}), }}"
    )
    room = _HEADER_BYTES - len(_MAGIC) - 2
    if len(text) + 1 > room:
        raise DnaembedError(f"cannot record shape ({rows}, {dim}) in the .npy header")
    padded = text.ljust(room - 1) + "\n"
    return _MAGIC + struct.pack("<H", room) + padded.encode("latin1")


class NpyAppender:
    """Append rows of a fixed width and dtype to an open binary file as one .npy array."""

    def __init__(self, handle: BinaryIO, dim: int, dtype: str = "float32") -> None:
        if dtype not in DTYPES:
            raise DnaembedError(f"unknown dtype {dtype!r} (use {' or '.join(DTYPES)})")
        self.handle = handle
        self.dim = dim
        self.dtype = np.dtype(dtype)
        self.rows = 0
        handle.write(_header(self.dtype, 0, dim))

    def append(self, block: np.ndarray) -> None:
        """Writes the rows of ``block`` (``(n, dim)``) after the others."""
        if block.ndim != 2 or block.shape[1] != self.dim:
            raise DnaembedError(f"expected rows of width {self.dim}, got shape {block.shape}")
        self.handle.write(np.ascontiguousarray(block, dtype=self.dtype).tobytes())
        self.rows += len(block)

    def close(self) -> None:
        """Rewrite the header with the final row count."""
        self.handle.seek(0)
        self.handle.write(_header(self.dtype, self.rows, self.dim))
        self.handle.seek(0, os.SEEK_END)


def load_embeddings(npy_path: str | os.PathLike, *, mmap: bool = False
                    ) -> tuple[list[str], np.ndarray]:
    """Read back an embedding file and its ids (checked to match in number)."""
    p = Path(npy_path)
    ids_path = ids_path_for(p)
    for path in (p, ids_path):
        if not path.is_file():
            raise InputError(f"{path}: no such file")
    try:
        array = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise InputError(f"{p}: not a .npy array: {e}") from None
    ids = ids_path.read_text(encoding="utf-8").splitlines()
    if array.ndim != 2 or len(array) != len(ids):
        raise InputError(
            f"{p}: {array.shape[0] if array.ndim else 0} rows but {ids_path} has {len(ids)} ids"
        )
    return ids, array


def save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    """Save an array as .npy, atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, array)
