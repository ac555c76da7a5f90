"""The C library's allocator, told when to give memory back to the system (glibc only).

A long run frees large blocks on some threads and allocates on others; glibc keeps
what is freed, per thread, unless told. :func:`trim_memory` gives it back between
stages; :func:`set_allocator_thresholds` sets, once per process, which blocks get pages
of their own and how much free memory a heap keeps.
"""

from __future__ import annotations


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
