"""Logging and progress: both on standard error, never mixed with results."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")

logger = logging.getLogger("dnaembed")
_state = {"progress": True}


def configure(verbosity: int = 0, quiet: bool = False) -> None:
    """Set up the ``dnaembed`` logger on stderr.

    quiet: warnings and errors only, no progress bars; verbosity 0: info; 1+: debug.
    Progress bars appear only when stderr is a terminal (not in pipelines or logs).
    """
    level = logging.WARNING if quiet else (logging.DEBUG if verbosity > 0 else logging.INFO)
    logger.setLevel(level)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s dnaembed: %(message)s", "%H:%M:%S"))
    logger.addHandler(handler)
    _state["progress"] = (
        not quiet and sys.stderr.isatty() and not os.environ.get("DNAEMBED_NO_PROGRESS")
    )


def progress(iterable: Iterable[T], **kwargs) -> Iterator[T]:
    """Wrap an iterable in a tqdm bar on stderr (off when quiet or stderr is not a terminal)."""
    return iter(
        tqdm(
            iterable,
            file=sys.stderr,
            disable=not _state["progress"],
            leave=False,
            dynamic_ncols=True,
            **kwargs,
        )
    )


def progress_bar(**kwargs) -> tqdm:
    """A manually-updated tqdm bar with the same rules as :func:`progress`."""
    return tqdm(
        file=sys.stderr, disable=not _state["progress"], leave=False, dynamic_ncols=True, **kwargs
    )


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
    return threads
