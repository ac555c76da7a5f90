"""Outputs that appear whole or not at all, and never over an input.

* :func:`atomic_path`: one file, written to a temporary file beside it and
  renamed into place when complete, so a failed command never leaves a partial
  file;
* :class:`OutputSet`: the files of one command (``run``: clusters.tsv,
  strands.fasta, strands.tsv; ``cluster``: the table and the centers; ...),
  checked before the work (no output is an input or another output, every
  directory writable), written into a private temporary directory beside each
  destination, and renamed together only when every one is complete; a failure
  removes them all, and any output directory the command created;
* :func:`open_output`: a text stream for a path (compressed by its name:
  ``.gz``, ``.bz2``, ``.xz``, ``.zst``, through xopen), or standard output for ``-``.

An output that is not a file is written as it is, as standard output is
(:func:`is_stream`): a named pipe, a device (``/dev/null``), one of this process's
open streams (``/dev/stdout``, a shell's process substitution ``>(gzip > x.gz)``).
Renaming a file onto one replaced it: a reader of the pipe got nothing, and as root
``-o /dev/null`` replaced the machine's /dev/null. A symbolic link is written through,
as a shell's redirection does: the file it names is replaced, the link stays.

A write error (a full disk, a quota, a file-size limit) is reported with the
name of the file being written, not only "No space left on device".
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from dnaembed.errors import DnaembedError, UsageError
from dnaembed.stops import raise_if_stopped

#: Temporary path -> the destination it stands for, while an OutputSet is open: messages
#: name the destination, not the temporary directory.
_PENDING: dict[Path, Path] = {}


#: The command's ``--log`` file, while it runs: no output may be it (an output of a
#: directory, ``run -o OUT``, or named after another, ``embed``'s ``.ids.txt``, is known
#: only to its :class:`OutputSet`).
_LOG_FILE: dict[str, str] = {}


def set_log_file(path: str | os.PathLike | None) -> None:
    """Records the command's ``--log`` file (None: none) for :class:`OutputSet` to refuse."""
    _LOG_FILE.clear()
    if path is not None:
        _LOG_FILE["--log"] = str(path)


def _display(path: Path) -> Path:
    return _PENDING.get(path, path)


def destination_of(path: str | os.PathLike) -> Path | None:
    """The destination that temporary path ``path`` of an open :class:`OutputSet` stands
    for, or None: a command that reads its own output back before publishing it (``run
    --truth`` scores its clusters.tsv) names the destination in its messages."""
    return _PENDING.get(Path(path))


#: Paths that name an open stream of this process: its standard output or error, a file
#: descriptor (what a shell's process substitution passes).
_STREAM_PATH = re.compile(r"/dev/(?:stdout|stderr|fd/\d+)|/proc/(?:self|\d+)/fd/\d+")


def is_stream(path: str | os.PathLike) -> bool:
    """Whether output ``path`` is written as it is rather than through a temporary file
    renamed onto it (see the module notes): not a file, nor a link to one, but a named
    pipe, a device, a socket or one of this process's open streams."""
    if _STREAM_PATH.fullmatch(str(path)):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:  # not there yet (or a dangling link): a file to create
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _through_links(path: Path) -> Path:
    """The file an output at ``path`` replaces: the one a symbolic link names."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def _written_as_is(path: Path) -> Iterator[Path]:
    """``path`` itself, for a stream output; its write errors name it (a closed pipe
    stays itself: the command ends quietly, as for standard output)."""
    try:
        yield path
    except OSError as e:
        if isinstance(e, BrokenPipeError) or e.filename not in (None, str(path)):
            raise
        raise write_error(path, e) from None


def write_error(path: str | os.PathLike, error: OSError) -> DnaembedError:
    """The one-line error for a failed write of ``path``."""
    return DnaembedError(f"{_display(Path(path))}: cannot write: {error.strerror or error}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    The temporary name keeps the destination's suffixes so that writers which
    choose compression by extension (``.gz``) behave as for the final name.
    A write error in the body (errno without a file name, or on the temporary
    file) becomes a :class:`DnaembedError` naming ``path``.
    """
    if is_stream(path):
        with _written_as_is(Path(path)) as stream:
            yield stream
        return
    dest = _through_links(Path(path))
    directory = dest.parent if str(dest.parent) else Path(".")
    name = _display(dest)
    if not directory.is_dir():
        raise DnaembedError(f"{name}: cannot write: directory {directory} does not exist")
    if dest.is_dir():
        raise DnaembedError(f"{name}: cannot write: is a directory")
    suffix = "".join(dest.suffixes[-2:])
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{dest.name}.", suffix=f".tmp{suffix}", dir=directory
        )
    except OSError as e:
        raise write_error(dest, e) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            yield tmp
            _publish(tmp, dest)
        except OSError as e:
            if e.filename not in (None, str(tmp), tmp_name, str(dest)):
                raise
            raise write_error(dest, e) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _publish(tmp: Path, dest: Path) -> None:
    # mkstemp creates 0600; give the result the permissions a normal file would get.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, dest)


#: Names that an output is compressed by (xopen's, as :func:`open_text` writes them).
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")


def open_text(path: str | os.PathLike) -> IO[str]:
    """A text stream writing ``path``, compressed when its name says so (xopen)."""
    from xopen import xopen

    return xopen(path, "wt", threads=0, encoding="utf-8")


class StdoutError(OSError):
    """A write to standard output failed (a full disk under ``> file``): its message names
    standard output, where an OSError of a write has no file name."""


@contextlib.contextmanager
def writing_stdout() -> Iterator[IO[str]]:
    """Standard output, flushed at the end; a failed write raises :class:`StdoutError` (a
    closed pipe stays itself: the command ends quietly)."""
    try:
        yield sys.stdout
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        if e.filename is not None:
            raise
        raise StdoutError(e.errno, e.strerror) from None


@contextlib.contextmanager
def open_output(path: str | os.PathLike) -> Iterator[IO[str]]:
    """A text stream for ``path`` (atomic, compressed by name), or standard output for ``-``."""
    if str(path) == "-":
        with writing_stdout() as out:
            yield out
        return
    with atomic_path(path) as tmp, open_text(tmp) as handle:
        yield handle


def _same_file(a: str, b: str) -> bool:
    pa, pb = Path(a), Path(b)
    if pa.resolve() == pb.resolve():
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(pa, pb)
    return False


def named_inputs(name: str, paths: Sequence[object]) -> dict[str, object]:
    """One argument's input files by the names messages give them: ``NAME``, or
    ``NAME (1)``, ``NAME (2)``, ... when the argument takes several."""
    if len(paths) == 1:
        return {name: paths[0]}
    return {f"{name} ({i})": path for i, path in enumerate(paths, start=1)}


def check_given_once(inputs: Mapping[str, object]) -> None:
    """Refuse (usage error) one file given twice among the files of one argument (named as
    :func:`named_inputs` names them), compared as :func:`check_distinct` compares paths.

    Why: its reads were read twice, and the run failed on the first read again, as a
    "duplicate read id (first seen at record 1)" of the same file, which named neither
    argument nor the cause."""
    files = [(k, str(v)) for k, v in inputs.items() if v is not None and str(v) != "-"]
    for (key_a, a), (key_b, b) in itertools.combinations(files, 2):
        if _same_file(a, b):
            raise UsageError(f"{key_a} and {key_b} are the same file ({b}): give each file once")


def check_distinct(inputs: Mapping[str, object], outputs: Mapping[str, object]) -> None:
    """Refuse (usage error) an output that is an input, or two outputs that are one file.

    Paths are compared resolved (symbolic links followed) and by inode, so
    ``./r.fastq``, ``r.fastq`` and a hard link to it are the same file. ``-``
    (standard input or output) and ``None`` are skipped, except that two
    inputs cannot both be standard input (the second read nothing), nor two outputs
    standard output. Keys name the options in messages.
    """
    stdin = [k for k, v in inputs.items() if v is not None and str(v) == "-"]
    if len(stdin) > 1:
        raise UsageError(f"{' and '.join(stdin)} cannot both be standard input")
    ins = [(k, str(v)) for k, v in inputs.items() if v is not None and str(v) != "-"]
    outs = [(k, str(v)) for k, v in outputs.items() if v is not None]
    stdout = [k for k, v in outs if v == "-"]
    if len(stdout) > 1:
        raise UsageError(f"{' and '.join(stdout)} cannot both be standard output")
    files = [(k, v) for k, v in outs if v != "-"]
    for (out_key, out), (in_key, src) in itertools.product(files, ins):
        if _same_file(out, src):
            raise UsageError(f"{out_key} {out} is the input {in_key}: refusing to overwrite it")
    for (key_a, a), (key_b, b) in itertools.combinations(files, 2):
        if _same_file(a, b):
            raise UsageError(f"{key_a} and {key_b} are the same file ({a})")


class OutputSet:
    """The output files of one command, all new or all absent (see the module notes).

    ``outputs``: option name -> path (``-``: standard output, written directly;
    ``None``: not asked for). ``inputs``: option name -> path, never to be
    overwritten. ``directories``: output directories to create if missing
    (and to remove again, if they stay empty, when the command fails).

    Entering checks the paths, creates the directories and one private
    temporary directory beside each destination (so an unwritable output fails
    before the work); :meth:`path` gives the temporary path a writer writes to,
    with the destination's name (writers that derive a companion file from the
    name, or choose compression by it, behave as for the destination). A clean
    exit renames every file that was written onto its destination; an
    exception removes them.
    """

    def __init__(
        self,
        outputs: Mapping[str, str | os.PathLike | None],
        *,
        inputs: Mapping[str, str | os.PathLike | None] | None = None,
        directories: tuple[str | os.PathLike, ...] = (),
    ) -> None:
        self.outputs = {k: str(v) for k, v in outputs.items() if v is not None}
        self.inputs = dict(inputs or {})
        self.directories = [Path(d) for d in directories]
        self._created: list[Path] = []
        self._staging: dict[Path, Path] = {}
        self._temps: dict[str, Path] = {}
        self._streams: set[str] = set()  # outputs written as they are (see is_stream)

    def __enter__(self) -> OutputSet:
        check_distinct(self.inputs, {**self.outputs, **_LOG_FILE})
        try:
            for directory in self.directories:
                self.directory(directory)
            for key, dest in self.outputs.items():
                if dest != "-":
                    self._temps[key] = self._stage(key, Path(dest))
        except BaseException:
            self._discard()
            raise
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            try:
                self._commit()
            except BaseException:
                self._discard()
                raise
        else:
            self._discard()

    def path(self, key: str) -> str | Path:
        """Where to write output ``key``: its temporary path, or ``-`` for standard output."""
        if self.outputs[key] == "-":
            return "-"
        return self._temps[key]

    def add(self, key: str, dest: str | os.PathLike) -> Path:
        """Another output, known only once the work has begun (a plot, say)."""
        self.outputs[key] = str(dest)
        check_distinct(self.inputs, {**self.outputs, **_LOG_FILE})
        self._temps[key] = self._stage(key, Path(dest))
        return self._temps[key]

    def directory(self, directory: str | os.PathLike) -> None:
        """Create an output directory if missing (removed again, if empty, on failure)."""
        directory = Path(directory)
        missing = []
        for parent in [directory, *directory.parents]:
            if parent.exists():
                break
            missing.append(parent)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DnaembedError(
                f"{directory}: cannot create directory: {e.strerror or e}") from None
        self._created.extend(missing)  # removed deepest first (see _discard)

    def _stage(self, key: str, dest: Path) -> Path:
        if is_stream(dest):
            self._streams.add(key)
            return dest
        dest = _through_links(dest)
        directory = dest.parent if str(dest.parent) else Path(".")
        if not directory.is_dir():
            raise DnaembedError(f"{dest}: cannot write: directory {directory} does not exist")
        if dest.is_dir():
            raise DnaembedError(f"{dest}: cannot write: is a directory")
        staging = self._staging_for(directory.resolve(), dest)
        tmp = staging / dest.name
        _PENDING[tmp] = dest
        return tmp

    def _staging_for(self, directory: Path, dest: Path) -> Path:
        for staging in self._staging:
            if staging.parent == directory:
                return staging
        try:
            staging = Path(tempfile.mkdtemp(prefix=".dnaembed-", suffix=".tmp", dir=directory))
        except OSError as e:
            raise write_error(dest, e) from None
        self._staging[staging] = directory
        return staging

    def _commit(self) -> None:
        raise_if_stopped()  # a Ctrl-C that a library dropped: nothing is published
        written = [(k, t) for k, t in self._temps.items()
                   if k not in self._streams and t.exists()]
        for _key, tmp in written:
            dest = _PENDING.get(tmp, Path(self.outputs[_key]))
            try:
                _publish(tmp, dest)
            except OSError as e:
                raise write_error(dest, e) from None
        self._cleanup()

    def _discard(self) -> None:
        self._cleanup()
        # Deepest first: in the order of creation, OUT (from -o) came before OUT/NAME (a
        # source's plots), was not empty yet when its turn came, and stayed.
        for directory in sorted(self._created, key=lambda d: len(d.absolute().parts),
                                reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()  # only if empty: never what someone else put there
        self._created = []

    def _cleanup(self) -> None:
        for tmp in self._temps.values():
            _PENDING.pop(tmp, None)
        for staging in self._staging:
            shutil.rmtree(staging, ignore_errors=True)
        self._staging = {}
