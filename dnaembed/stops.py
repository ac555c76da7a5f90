"""Ctrl-C and SIGTERM remembered, for when a library loses the exception they raise.

The entry point's signal handlers raise KeyboardInterrupt (Ctrl-C) or
:class:`Terminated` (SIGTERM) in whatever code runs when the signal arrives. Code in C
that clears the errors of the Python calls it makes drops that exception, and the
command goes on as if no signal had come. Importing torch does so in a window of ~40 ms
of its ~1 s import (8 of 150 Ctrl-C sent at random moments of ``import torch`` were
lost), and a Ctrl-C given as a command starts can hit it. So the handlers also note the
signal here, and the points where the work moves on (a stage begins, a task is counted,
outputs are published) raise it again: a stopped command stops, and never publishes its
outputs. Raised again only on the main thread (where Python raises it) and never while an
exception is being handled (the clean-up of one that did propagate).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

#: The stops noted since :func:`forget`, oldest first.
_noted: list[type[BaseException]] = []


class Terminated(BaseException):
    """SIGTERM arrived. Raised in the main thread, as Ctrl-C raises KeyboardInterrupt, so
    that the clean-up on the way out runs (by default SIGTERM ends the process on the spot,
    and a cancelled job left its spilled reads and vectors in --tmpdir). A BaseException,
    so that no ``except Exception`` takes it for an error of its own."""


def on_sigint(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C: noted, then KeyboardInterrupt (Python's own handler raises just that)."""
    _noted.append(KeyboardInterrupt)
    raise KeyboardInterrupt


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM: noted, then :class:`Terminated`; a second one stops the process at once."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _noted.append(Terminated)
    raise Terminated()


def raise_if_stopped() -> None:
    """Raise the first stop noted, if a library dropped it (see the module notes)."""
    if not _noted or sys.exc_info()[0] is not None:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    raise _noted.pop(0)()


def forget() -> None:
    """Forget the stops noted (a new command in this process)."""
    _noted.clear()
