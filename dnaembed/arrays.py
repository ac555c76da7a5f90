"""Small numpy helpers shared by several stages (sorting-based grouping)."""

from __future__ import annotations

import numpy as np


def rank_in_groups(keys: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal consecutive ``keys``."""
    if len(keys) == 0:
        return keys
    idx = np.arange(len(keys))
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    return idx - np.maximum.accumulate(np.where(starts, idx, 0))


def sorted_unique(values: np.ndarray, return_counts: bool = False):
    """``np.unique`` by sorting: numpy's hash-based unique is much slower on large int arrays."""
    values = np.sort(values)
    if len(values) == 0:
        return (values, np.zeros(0, np.int64)) if return_counts else values
    first = np.empty(len(values), dtype=bool)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    uniq = values[first]
    if not return_counts:
        return uniq
    starts = np.flatnonzero(first)
    return uniq, np.diff(np.append(starts, len(values)))
