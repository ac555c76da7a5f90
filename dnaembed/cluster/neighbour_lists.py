"""The rescue's embedding candidates: each listed read's nearest clusters, as read and
reverse-complemented, merged from the lists of every cell it was searched in.

:meth:`~dnaembed.cluster.rounds.RepresentativeRounds.list_neighbours` searches each read
in several cells; :func:`nearest_of_lists` keeps each query's nearest over them, and
:class:`NeighbourLists` holds them until the rescue asks.
"""

from __future__ import annotations

import numpy as np

from dnaembed.arrays import rank_in_groups


class NeighbourLists:
    """Nearest representatives of the rescue's reads, as read and reverse-complemented."""

    def __init__(self, rows: np.ndarray, k: int, both: bool) -> None:
        self.rows = np.asarray(rows, dtype=np.int64)  # increasing
        self.both = both
        sides = 2 if both else 1
        # int32: unit ids (-1 for none); the lists live from the rounds' end to the rescue.
        self.indices = np.full((sides, len(rows), k), -1, dtype=np.int32)
        self.distances = np.full((sides, len(rows), k), np.inf, dtype=np.float32)

    def put(self, units: np.ndarray, reverse: np.ndarray, indices: np.ndarray,
            distances: np.ndarray) -> None:
        """Sets the lists of ``units`` (among :attr:`rows`), as read or, where
        ``reverse``, reverse-complemented: their ``indices`` and ``distances``."""
        at = np.searchsorted(self.rows, units)
        side = reverse.astype(np.int64)
        self.indices[side, at] = indices
        self.distances[side, at] = distances

    def __call__(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rescue's ``neighbours_of``: forward lists, then reverse ones, side by side.

        A row without lists gets none (-1, at an infinite distance), and its candidates
        from the k-mer search alone: the lists are made after the rounds for the reads of
        clusters small enough for the rescue then, and the split after them can make a
        small cluster of a larger one (two related designs of 3 to 5 reads each, where a
        noisy run's rescue takes clusters of up to 5).
        """
        rows = np.asarray(rows, dtype=np.int64)
        sides = range(2 if self.both else 1)
        k = self.indices.shape[2]
        indices = np.full((len(rows), k * len(sides)), -1, dtype=np.int32)
        distances = np.full((len(rows), k * len(sides)), np.inf, dtype=np.float32)
        if len(self.rows) == 0:
            return indices, distances
        at = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
        held = self.rows[at] == rows
        at = at[held]
        indices[held] = np.concatenate([self.indices[s, at] for s in sides], axis=1)
        distances[held] = np.concatenate([self.distances[s, at] for s in sides], axis=1)
        return indices, distances


def nearest_of_lists(query_rows: np.ndarray, found: list, count: int, k: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``count`` queries' ``k`` nearest over several lists of its (``found``: the
    tasks' results, their rows of queries ``query_rows`` in order), nearest first, ties
    by unit id; -1 at an infinite distance where fewer.

    Each query's lists side by side in one row, as keys that sort by distance, then
    unit, each row sorted on its own. Why not one sort of every entry by query,
    distance and unit: for 3 x 10^6 reads' lists (43,500 queries in 5.6 lists of 16 each)
    that took 2.1-2.2 s of CPU while the tasks waited, this 0.5-0.7 s (a fresh process,
    one thread).
    """
    indices = np.full((count, k), -1, dtype=np.int64)
    distances = np.full((count, k), np.inf, dtype=np.float32)
    if not found or len(query_rows) == 0:
        return indices, distances
    unit = np.concatenate([f.indices for f in found])
    keys = _distance_unit_keys(np.concatenate([f.distances for f in found]), unit)
    order = np.argsort(query_rows, kind="stable")
    query = query_rows[order]
    width = unit.shape[1]
    rank = rank_in_groups(query)  # each entry's list among its query's
    row = np.full((count, (int(rank.max()) + 1) * width), _NO_KEY, dtype=np.uint64)
    columns = rank[:, None] * width + np.arange(width)
    row[query[:, None], columns] = keys[order]
    row.sort(axis=1)
    best = row[:, :k]
    held = best != _NO_KEY
    indices[:, : best.shape[1]][held] = (best[held] & 0xFFFFFFFF).astype(np.int64)
    distances[:, : best.shape[1]][held] = _distance_of_keys(best[held] >> np.uint64(32))
    return indices, distances


#: The key of an empty entry (index -1): after every other.
_NO_KEY = np.uint64(2**64 - 1)


def _distance_unit_keys(distances: np.ndarray, units: np.ndarray) -> np.ndarray:
    """One unsigned key per entry that sorts as (distance, unit): the distance's bits,
    made to sort as the numbers do, above the unit's; :data:`_NO_KEY` where unit < 0."""
    bits = (distances.astype(np.float32) + np.float32(0)).view(np.uint32)  # -0 as 0
    ordered = np.where(bits >> 31, ~bits, bits | np.uint32(1 << 31)).astype(np.uint64)
    keys = (ordered << np.uint64(32)) | (units.astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
    keys[units < 0] = _NO_KEY
    return keys


def _distance_of_keys(high: np.ndarray) -> np.ndarray:
    """The distances back from the high halves of :func:`_distance_unit_keys`."""
    bits = high.astype(np.uint32)
    return np.where(bits >> 31, bits & np.uint32(0x7FFFFFFF), ~bits).view(np.float32)
