"""The run's private directory under ``--tmpdir``, and the leftovers of runs that were killed.

A run removes its directory when it ends, whether it succeeds or fails (an error,
Ctrl-C, SIGTERM). A process killed with SIGKILL (the kernel's out-of-memory killer, a
batch system's hard limit, ``kill -9``) cannot: its spilled reads and vectors, up to
gigabytes, stayed in the tmpdir for good. So each directory holds a lock file,
``.lock``, locked (``flock``) for the run's life; the kernel releases the lock when the
process ends, however it ends. A new run in the same tmpdir removes every
``dnaembed-*`` directory of this user whose lock it can take, and logs what it removed:
its owner is gone. As Dask's ``distributed.diskutils.WorkSpace`` does for the workers'
scratch space, with ``flock`` (which a second lock in the same process also meets) and
a lock file that is locked before it takes its name, so that a directory being created
is never taken for a leftover. Only this machine's are removed (the lock file names
it): a tmpdir shared over NFS mounted without locks would show another machine's runs
unlocked. A directory without a lock file (a run of an earlier version, or on a
filesystem without locks) is left alone, as is one whose lock cannot be tried.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import socket
import tempfile
from pathlib import Path

from dnaembed.errors import DnaembedError
from dnaembed.log import logger

#: The directories' prefix under the tmpdir.
PREFIX = "dnaembed-"
#: The lock file inside each directory.
LOCK_NAME = ".lock"
#: This process's own directories, never tried: where ``flock`` is emulated by POSIX locks
#: (NFS), a second lock by the same process succeeds, and closing it drops the first.
_OWN: set[Path] = set()


class SpillDir:
    """A private directory under ``tmpdir`` (default: the system's), removed on exit;
    creating one first removes the leftovers of killed runs there (see the module notes)."""

    def __init__(self, tmpdir: str | os.PathLike | None = None) -> None:
        base = Path(tmpdir) if tmpdir is not None else Path(tempfile.gettempdir())
        if not base.is_dir():
            raise DnaembedError(f"{base}: --tmpdir is not a directory")
        remove_leftovers(base)
        try:
            self.path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
        except OSError as e:
            raise DnaembedError(f"{base}: cannot create a temporary directory: "
                                f"{e.strerror or e}") from None
        self._lock = _hold_lock(self.path)
        _OWN.add(Path(os.path.abspath(self.path)))
        self._count = 0

    def new_file(self, stem: str) -> Path:
        """A fresh file name in the directory."""
        self._count += 1
        return self.path / f"{self._count:03d}-{stem}"

    def close(self) -> None:
        """Removes the directory and what is in it, and lets go of its lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        _OWN.discard(Path(os.path.abspath(self.path)))
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> SpillDir:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _hold_lock(path: Path) -> int | None:
    """The descriptor of ``path``'s lock file, locked; None where the filesystem has no
    locks (the directory is then never taken for a leftover)."""
    fd = None
    try:
        fd, locking = tempfile.mkstemp(prefix=".locking-", dir=path)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
        os.rename(locking, path / LOCK_NAME)  # named only once locked
    except OSError:
        if fd is not None:
            os.close(fd)
        return None
    return fd


def remove_leftovers(base: Path) -> list[Path]:
    """Removes the directories under ``base`` that runs of this user left when they were
    killed (see the module notes), logging each; the ones removed."""
    removed = []
    for path in sorted(set(_candidates(base)) - _OWN):
        size = _remove_if_unlocked(path)
        if size is not None:
            logger.info("removed %s, the temporary files of a run that was killed before "
                        "it could remove them (%s MB)", path, f"{size / 1e6:,.0f}")
            removed.append(path)
    return removed


def _candidates(base: Path) -> list[Path]:
    """This user's ``dnaembed-*`` directories under ``base`` (absolute paths); an entry
    that goes as it is listed, or a tmpdir that cannot be listed, gives none."""
    found = []
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if (entry.name.startswith(PREFIX) and entry.is_dir(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_uid == os.getuid()):
                    found.append(Path(os.path.abspath(entry.path)))
    return found


def _remove_if_unlocked(path: Path) -> int | None:
    """Removes ``path`` if its lock file is there, unlocked and written on this machine;
    the bytes it held, or None where it was left (locked: its run goes on; no lock file;
    the lock cannot be tried; another machine's, whose lock may not show here)."""
    try:
        fd = os.open(path / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            logger.debug("%s: cannot try its lock (%s): left", path, e.strerror)
        return None
    try:
        host = os.read(fd, 4096).decode(errors="replace").split(" ")[0]
        if host != socket.gethostname():
            return None
        size = 0
        with contextlib.suppress(OSError):
            size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)
    return size
