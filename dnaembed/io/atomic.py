"""Outputs that appear whole or not at all.

Every file is written to a temporary file in the destination's directory and
renamed into place when complete, so a failed command never leaves a partial
file. ``-`` means standard output where the format allows."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from dnaembed.errors import DnaembedError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    The temporary name keeps the destination's suffixes so that writers which
    choose compression by extension (``.gz``) behave as for the final name.
    """
    dest = Path(path)
    directory = dest.parent if str(dest.parent) else Path(".")
    if not directory.is_dir():
        raise DnaembedError(f"{dest}: cannot write: directory {directory} does not exist")
    if dest.is_dir():
        raise DnaembedError(f"{dest}: cannot write: is a directory")
    suffix = "".join(dest.suffixes[-2:])
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{dest.name}.", suffix=f".tmp{suffix}", dir=directory
        )
    except OSError as e:
        raise DnaembedError(f"{dest}: cannot write: {e.strerror or e}") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        # mkstemp creates 0600; give the result the permissions a normal file would get.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def open_output(path: str | os.PathLike) -> Iterator[IO[str]]:
    """A text stream for ``path`` (atomic), or standard output for ``-``."""
    if str(path) == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        yield handle
