"""Logging and progress: both on standard error (and ``--log FILE``), never mixed with results.

On a terminal, progress is a tqdm bar. Anywhere else (a pipeline, a batch
job's log, ``--log FILE``) no bar is drawn; instead a line is logged whenever
nothing was logged for :data:`HEARTBEAT_SECONDS` (30 s; the environment
variable ``DNAEMBED_LOG_INTERVAL`` changes it), saying what runs and how far it
is, so that a SLURM log shows the job alive at least every 30 s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

from tqdm import tqdm

from dnaembed.stops import raise_if_stopped

T = TypeVar("T")

logger = logging.getLogger("dnaembed")

#: Longest silence of a log that is not a terminal, in seconds.
HEARTBEAT_SECONDS = 30.0

_state: dict = {"progress": True, "last_line": time.monotonic(), "bars": [], "heartbeat": None,
                "stage": None, "started": time.monotonic()}
_FORMAT = logging.Formatter("%(asctime)s dnaembed: %(message)s", "%H:%M:%S")


class _StampedHandler(logging.StreamHandler):
    """A stream handler that notes when it last wrote (the heartbeat's clock)."""

    def __init__(self, stream: IO[str], *, heartbeats: bool) -> None:
        super().__init__(stream)
        self.heartbeats = heartbeats
        self.setFormatter(_FORMAT)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "heartbeat", False) and not self.heartbeats:
            return
        super().emit(record)
        if not getattr(record, "heartbeat", False):
            _state["stage"] = record.getMessage()
        _state["last_line"] = time.monotonic()


def configure(verbosity: int = 0, quiet: bool = False, log_file: str | None = None) -> None:
    """Set up the ``dnaembed`` logger on stderr (and in ``log_file``, written anew).

    quiet: warnings and errors only, no progress; verbosity 0: info; 1+: debug.
    Progress bars appear only when stderr is a terminal; otherwise, and in
    ``log_file``, periodic lines (see the module notes).
    """
    level = logging.WARNING if quiet else (logging.DEBUG if verbosity > 0 else logging.INFO)
    logger.setLevel(level)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        if isinstance(handler, logging.FileHandler) or getattr(handler, "owned", False):
            handler.close()
    tty = sys.stderr.isatty()
    logger.addHandler(_StampedHandler(sys.stderr, heartbeats=not tty))
    if log_file is not None:
        try:
            handler = _StampedHandler(_open_log(log_file), heartbeats=True)
        except OSError as e:
            from dnaembed.errors import DnaembedError

            raise DnaembedError(f"{log_file}: cannot write: {e.strerror or e}") from None
        handler.owned = True
        logger.addHandler(handler)
    _state["progress"] = not quiet and tty and not os.environ.get("DNAEMBED_NO_PROGRESS")
    _state["started"] = _state["last_line"] = time.monotonic()
    if not quiet and (not tty or log_file is not None):
        _start_heartbeat()


#: Set by ``train --nproc`` for its ranks, which write the launcher's ``--log`` file too:
#: they append to it, as it does, rather than each start it anew.
LOG_APPEND_ENV = "DNAEMBED_LOG_APPEND"


def _open_log(log_file: str):
    """The ``--log`` stream: written anew, by appends. Why appends: ``train --nproc``'s
    ranks write the launcher's log too, and a writer at its own offset wrote over the
    others' lines (NUL bytes where a rank had truncated the file under it); a torchrun
    job's ranks share it too (rank 0 starts it anew: each did, and rank 0's first lines
    were lost). A compressed log, a pipe or a device is opened as any output is; a
    compressed one that several ranks would write is refused."""
    from dnaembed.io.atomic import COMPRESSED_SUFFIXES, is_stream, open_text

    rank = _rank_among_several()
    if rank is not None and log_file.endswith(COMPRESSED_SUFFIXES):
        from dnaembed.errors import UsageError

        raise UsageError(f"--log {log_file} with torchrun's ranks: every rank writes to "
                         "it; give an uncompressed file")
    if is_stream(log_file) or log_file.endswith(COMPRESSED_SUFFIXES):
        return open_text(log_file)
    # Started anew once: by the --nproc launcher, or by rank 0 of a torchrun job.
    if os.environ.get(LOG_APPEND_ENV) != "1" and not rank:
        open(log_file, "w").close()
    return open(log_file, "a", encoding="utf-8")


def _rank_among_several() -> int | None:
    """This process's rank where torchrun (or a launcher like it) started several ranks;
    None otherwise. (Read here, not from dnaembed.train: the log comes first.)"""
    try:
        several = int(os.environ.get("WORLD_SIZE", "1")) > 1
        return int(os.environ["RANK"]) if several and "RANK" in os.environ else None
    except ValueError:  # not a launcher's: the log as in one process
        return None


#: How every line of a --log file this program wrote begins.
_LOG_LINE = re.compile(r"\d\d:\d\d:\d\d dnaembed: ")


def refuse_foreign_log(log_file: str) -> None:
    """Refuses (usage error) a ``--log`` file that exists, holds something, and is not a log
    of this program. Opening it empties it, and a file that the command reads or writes
    only through another option (the checkpoint ``train --resume`` goes on from, the
    table an earlier ``run`` wrote into OUT) was found to be the log too late: emptied."""
    from dnaembed.errors import UsageError
    from dnaembed.io.atomic import is_stream

    if os.environ.get(LOG_APPEND_ENV) == "1":
        return  # a rank of train --nproc: the launcher checked it, and has written to it
    if is_stream(log_file) or not os.path.isfile(log_file) or not os.path.getsize(log_file):
        return
    head = b""
    with contextlib.suppress(Exception):  # unreadable, or not what its name says: not a log
        from xopen import xopen

        with xopen(log_file, "rb") as handle:
            head = handle.readline(200)
    if not _LOG_LINE.match(head.decode("ascii", "replace")):
        raise UsageError(f"--log {log_file}: the file exists and is not a dnaembed log: "
                         "refusing to overwrite it")


def note_in_log_file(line: str) -> None:
    """Writes ``line`` to the ``--log`` file alone, stamped as its other lines: the one-line
    error a command ends with, which standard error gets from the entry point after the
    log is closed (a pipeline's log said nothing of why its command failed)."""
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, line, None, None)
    for handler in logger.handlers:
        if getattr(handler, "owned", False):
            handler.emit(record)


def close_log() -> None:
    """Flush and close ``--log FILE`` (at the end of a command)."""
    for handler in list(logger.handlers):
        if getattr(handler, "owned", False):
            logger.removeHandler(handler)
            handler.close()


def _interval() -> float:
    try:
        return max(0.05, float(os.environ.get("DNAEMBED_LOG_INTERVAL", HEARTBEAT_SECONDS)))
    except ValueError:
        return HEARTBEAT_SECONDS


def _start_heartbeat() -> None:
    if _state["heartbeat"] is not None:
        return
    thread = threading.Thread(target=_heartbeat, name="dnaembed-heartbeat", daemon=True)
    _state["heartbeat"] = thread
    thread.start()


def _heartbeat() -> None:
    interval = _interval()
    while True:
        time.sleep(min(1.0, interval / 4))
        if time.monotonic() - _state["last_line"] >= interval:
            logger.info("%s", status_line(), extra={"heartbeat": True})


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural (``plural``, or ``noun`` + "s") unless ``n`` is 1:
    "1 worker", "2 workers", "1,024 tasks"."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {plural or noun + 's'}"


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m{s:02d}s" if hours else (f"{m}m{s:02d}s" if m else f"{s}s")


def status_line() -> str:
    """What runs now and how far it is (the periodic line)."""
    elapsed = _duration(time.monotonic() - _state["started"])
    bars = [b for b in _state["bars"] if not b.closed]
    if bars:
        bar = bars[-1]
        unit = bar.unit.strip()
        # Units are plural ("tasks"): one of them alone is "1 task".
        noun = unit.removesuffix("s") if bar.n == 1 and not bar.total else unit
        done = f"{bar.n:,}" + (f" of {bar.total:,}" if bar.total else "") + f" {noun}"
        if bar.total:
            done += f" ({100.0 * bar.n / bar.total:.0f}%)"
        seconds = time.monotonic() - bar.started
        rate = f", {bar.n / seconds:,.0f} {unit}/s" if seconds > 0 and bar.n else ""
        return f"{bar.desc or 'working'}: {done}{rate}; {elapsed} elapsed"
    last = _state["stage"]
    return f"working ({elapsed} elapsed" + (f"; last: {last})" if last else ")")


class Progress:
    """A progress bar that also counts when none is drawn (for the periodic lines)."""

    def __init__(self, *, desc: str = "", total: int | None = None, unit: str = "it",
                 initial: int = 0, **kwargs: Any) -> None:
        self.desc, self.total, self.unit, self.n = desc, total, unit, initial
        self.started = time.monotonic()
        self.closed = False
        self._bar = None
        if _state["progress"]:
            self._bar = tqdm(file=sys.stderr, leave=False, dynamic_ncols=True, desc=desc,
                             total=total, unit=unit, initial=initial, **kwargs)
        _state["bars"].append(self)

    def update(self, n: int = 1) -> None:
        """Counts ``n`` more done (and raises a stop that a library dropped)."""
        raise_if_stopped()
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix(self, **kwargs: Any) -> None:
        """Shows ``kwargs`` after the bar (where one is drawn; tqdm's ``set_postfix``)."""
        if self._bar is not None:
            self._bar.set_postfix(**kwargs)

    def close(self) -> None:
        """Ends the bar: no longer drawn, nor in the periodic lines."""
        if not self.closed:
            self.closed = True
            if self in _state["bars"]:
                _state["bars"].remove(self)
            if self._bar is not None:
                self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress(iterable: Iterable[T], **kwargs: Any) -> Iterator[T]:
    """Iterate with a progress bar on stderr (periodic lines when it is not a terminal)."""
    total = kwargs.pop("total", None)
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    with Progress(total=total, **kwargs) as bar:
        for item in iterable:
            yield item
            bar.update(1)


def progress_bar(**kwargs: Any) -> Progress:
    """A manually-updated progress bar with the same rules as :func:`progress`."""
    return Progress(**kwargs)


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def set_threads(threads: int | None) -> int:
    """Use ``threads`` CPU threads in torch and faiss (default: all available cores)."""
    if threads is None or threads <= 0:
        threads = available_cores()
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        pass
    try:
        import faiss

        faiss.omp_set_num_threads(threads)
    except ImportError:
        pass
    _set_blas_threads(threads)
    return threads


def freeze_long_lived() -> None:
    """Keep every object alive now (the modules imported, a model loaded) out of the
    garbage collector's passes from here on (``gc.freeze``).

    Why: with torch, faiss and Dask imported a process holds ~190,000-240,000 objects
    that live to its end, and each full collection walks them all. A run of 10^6 reads
    spent 1.6 s (one process) and 2.1 s (the client of two Dask workers) in the
    collector, 0.4 and 0.7 s with them frozen; reading 10^6 reads took
    2.4 s with these objects frozen against 3.7-4.0 s without. Call it once they are
    loaded, before the long work. A process freezes once: a Dask worker that serves
    several runs would otherwise freeze each run's leftovers, and frozen objects are
    never freed, even as garbage.
    """
    import gc

    if gc.get_freeze_count() == 0:
        gc.freeze()


_blas_threads: list[int] = []  # the last value set (the setting is the process's)


def _set_blas_threads(threads: int) -> None:
    """numpy's BLAS threads too. A task on one thread that multiplies matrices (assigning
    reads to cells, the PCA projection) otherwise wakes a BLAS thread per core, and two
    such tasks side by side took 1.4x as long as with one BLAS thread each
    (scripts/bench_assign.py). Dask's nanny sets the same for its workers
    (``OPENBLAS_NUM_THREADS=1``). From a task thread it takes effect only where no
    other live thread set numpy's BLAS first (threadpoolctl 3.8); where one did, that
    thread calls :func:`blas_on_one_thread`, as the in-process executor does."""
    if _blas_threads and _blas_threads[0] == threads:
        return  # asking the libraries costs a millisecond or so: not once per task
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")
    _blas_threads[:] = [threads]


def blas_on_one_thread() -> Callable[[], None]:
    """numpy's BLAS on one thread for the whole process; returns the function that
    restores the limits it found.

    For tasks run side by side on this process's threads, each of which should
    multiply on its own thread. They cannot say so themselves: threadpoolctl (3.8)
    lets only the thread that first limited a pthreads OpenBLAS (numpy's) change
    it, and ignores the others without a word. The main thread's :func:`set_threads`
    had taken it, so the task threads' ``set_threads(1)`` left numpy's BLAS on
    every core, and its idle thread spun beside the tasks (``perf``: about half a
    core while reads were embedded). At 10^6 reads on two cores, the run took 15%
    less CPU with this. Call it on the thread that set the BLAS threads before
    (the CLI's main thread)."""
    from threadpoolctl import threadpool_limits

    limiter = threadpool_limits(limits=1, user_api="blas")
    _blas_threads[:] = [1]

    def restore() -> None:
        limiter.restore_original_limits()
        _blas_threads.clear()  # whatever was there before: ask next time

    return restore


class Timings(dict):
    """Seconds per stage: ``with timings("read"): ...`` adds the time the block took."""

    def __call__(self, stage: str):
        import contextlib

        @contextlib.contextmanager
        def timed():
            raise_if_stopped()  # a stage begins: not after a stop that a library dropped
            start = time.perf_counter()
            try:
                yield
            finally:
                self[stage] = self.get(stage, 0.0) + time.perf_counter() - start

        return timed()
