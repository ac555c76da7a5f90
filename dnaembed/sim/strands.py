"""Designed strands: random oligos under synthesis constraints, and primer flanks."""

from __future__ import annotations

import numpy as np

from dnaembed.encoding import decode_flat
from dnaembed.errors import DnaembedError, SettingsConflict

_GC = np.array([0, 1, 1, 0], dtype=np.int64)  # A, C, G, T
# The bases of each GC class, so that a class can be chosen first and a base within it second.
_CLASS_BASES = np.array([[0, 3], [1, 2]], dtype=np.uint8)


def random_strands(
    n: int,
    length: int | tuple[int, int],
    rng: np.random.Generator,
    *,
    max_homopolymer: int | None = None,
    gc_window: int = 20,
    gc_min: float | None = None,
    gc_max: float | None = None,
) -> list[str]:
    """``n`` random strands, uniform over ACGT, optionally constrained.

    ``length`` is fixed or an inclusive ``(min, max)`` range (uniform).
    ``max_homopolymer`` caps runs of one base; ``gc_min``/``gc_max`` bound the GC
    fraction of every window of ``gc_window`` bases. Constraints are met by
    construction (each base is drawn from those that keep them), vectorised
    over strands with one step per position.
    """
    lo, hi = (length, length) if isinstance(length, int) else length
    if lo < 1 or hi < lo:
        raise DnaembedError(f"strand length must be >= 1 (and min <= max), got {length}")
    if max_homopolymer is not None and max_homopolymer < 1:
        raise DnaembedError(f"max homopolymer must be >= 1, got {max_homopolymer}")
    check_gc_limit(length, gc_window, gc_min, gc_max)
    constrain_gc = gc_min is not None or gc_max is not None
    gmin = 0.0 if gc_min is None else gc_min
    gmax = 1.0 if gc_max is None else gc_max
    lengths = rng.integers(lo, hi + 1, size=n)
    if max_homopolymer is None and not constrain_gc:
        seq = rng.integers(0, 4, size=(n, hi), dtype=np.uint8)
    else:
        seq = _constrained(n, hi, rng, max_homopolymer, constrain_gc, gc_window, gmin, gmax)
    keep = np.arange(hi)[None, :] < lengths[:, None]
    return decode_flat(seq[keep], lengths)


def check_gc_limit(length: int | tuple[int, int], gc_window: int = 20,
                   gc_min: float | None = None, gc_max: float | None = None) -> None:
    """Refuse a GC limit that cannot hold, or would not hold, on strands of ``length``.

    No limit (both bounds None) is always fine. Otherwise the bounds must be ordered, every
    ``gc_window``-base window must admit a whole number of GC bases between them, and the
    window must fit in the shortest strand: a strand shorter than the window never has a
    whole window, so the limit would not apply to it (it was dropped silently).
    """
    if gc_min is None and gc_max is None:
        return
    gmin = 0.0 if gc_min is None else gc_min
    gmax = 1.0 if gc_max is None else gc_max
    if not 0 <= gmin <= gmax <= 1:
        raise DnaembedError(f"GC bounds must satisfy 0 <= min <= max <= 1, got {gmin}, {gmax}")
    if gc_window < 2:
        raise DnaembedError(f"GC window must be >= 2, got {gc_window}")
    limits = {k: v for k, v in (("gc_min", gc_min), ("gc_max", gc_max)) if v is not None}
    if int(np.floor(gmax * gc_window)) < int(np.ceil(gmin * gc_window)):
        raise SettingsConflict(
            f"no {gc_window}-base window can have a GC fraction in [{gmin:g}, {gmax:g}]",
            {"gc_window": gc_window, **limits},
        )
    shortest = length if isinstance(length, int) else length[0]
    if gc_window > shortest:
        raise SettingsConflict(
            f"the GC window is longer than the shortest strand ({shortest} nt), which would "
            "have no GC limit",
            {"gc_window": gc_window, **limits, "length": length},
        )


def _constrained(n, length, rng, max_run, constrain_gc, window, gmin, gmax) -> np.ndarray:
    seq = np.zeros((n, length), dtype=np.uint8)
    run = np.zeros(n, dtype=np.int64)
    lo_count = int(np.ceil(gmin * window - 1e-9))
    hi_count = int(np.floor(gmax * window + 1e-9))
    for i in range(length):
        gc_class = rng.integers(0, 2, size=n)
        if constrain_gc:
            # GC so far in the window that ends here; the window must stay completable:
            # at most hi, and able to reach lo with the positions it has left.
            first = max(0, i - window + 1)
            prev = _GC[seq[:, first:i]].sum(axis=1)
            left = window - min(i + 1, window)
            gc_class = np.where(prev + 1 > hi_count, 0, gc_class)
            gc_class = np.where(prev + left < lo_count, 1, gc_class)
        base = _CLASS_BASES[gc_class, rng.integers(0, 2, size=n)]
        if max_run is not None and i > 0:
            # Same class, other base: keeps the GC choice and breaks the run.
            too_long = (base == seq[:, i - 1]) & (run >= max_run)
            other = _CLASS_BASES[gc_class, 1 - (base == _CLASS_BASES[gc_class, 1])]
            base = np.where(too_long, other, base)
        if i > 0:
            run = np.where(base == seq[:, i - 1], run + 1, 1)
        else:
            run[:] = 1
        seq[:, i] = base
    return seq


def add_primers(strands: list[str], left: str, right: str) -> list[str]:
    """Every strand flanked by the same primers (as real designs are)."""
    return [f"{left}{s}{right}" for s in strands]
