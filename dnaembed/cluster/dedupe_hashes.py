"""Identical reads collapsed by hashing, for inputs too large to hold every sequence in a dict.

The same result as :func:`dnaembed.cluster.dedupe.unique_reads` (first
occurrence kept, a reverse-complemented copy recorded as flipped when both
orientations are clustered, empty reads never grouped), from a 64-bit hash of
each read and of its reverse complement instead of the sequences: reads are
grouped by the smaller of the two hashes, then every grouped read is compared
with its group's first read, so a hash collision cannot join two different
reads (a group with a collision is regrouped exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dnaembed.cluster.dedupe import UniqueReads, unique_reads
from dnaembed.encoding import reverse_complement


def sequence_hashes(seqs: Sequence[str], both: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """64-bit hashes of each read and (``both``) of its reverse complement.

    Python's string hash: salted per process, which is enough here (the hashes
    group reads within one run and never leave the process).
    """
    fwd = np.fromiter(map(hash, seqs), dtype=np.int64, count=len(seqs))
    if not both:
        return fwd, None
    rev = np.fromiter((hash(reverse_complement(s)) for s in seqs), dtype=np.int64,
                      count=len(seqs))
    return fwd, rev


def unique_by_hashes(
    forward: np.ndarray,
    reverse: np.ndarray | None,
    lengths: np.ndarray,
    fetch: Callable[[np.ndarray], list[str]],
) -> UniqueReads:
    """Distinct reads from their hashes; ``fetch(rows)`` returns those reads' sequences."""
    n = len(forward)
    both = reverse is not None
    key = np.minimum(forward, reverse) if both else forward
    rows = np.flatnonzero(lengths > 0)
    order = rows[np.lexsort((rows, key[rows]))]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = key[order][1:] != key[order][:-1]
    group = np.cumsum(starts) - 1
    first_of = order[starts][group]  # the group's first read (smallest index), per read
    inverse_first = np.empty(n, dtype=np.int64)
    inverse_first[order] = first_of
    empty = np.flatnonzero(lengths == 0)
    inverse_first[empty] = empty
    flipped = np.zeros(n, dtype=np.int8)
    if both:
        flipped[order] = (forward[order] != forward[first_of]).astype(np.int8)
    _check_collisions(inverse_first, flipped, fetch, both)
    firsts = np.flatnonzero(inverse_first == np.arange(n))
    unit = np.full(n, -1, dtype=np.int64)
    unit[firsts] = np.arange(len(firsts))
    inverse = unit[inverse_first]
    counts = np.bincount(inverse, minlength=len(firsts)).astype(np.int64)
    return UniqueReads(firsts, inverse, flipped, counts)


def _check_collisions(inverse_first: np.ndarray, flipped: np.ndarray,
                      fetch: Callable[[np.ndarray], list[str]], both: bool,
                      batch: int = 1 << 16) -> None:
    """Compare every grouped read with its group's first read; regroup groups that collided."""
    members = np.flatnonzero(inverse_first != np.arange(len(inverse_first)))
    bad_groups: set[int] = set()
    for start in range(0, len(members), batch):
        rows = members[start : start + batch]
        firsts = inverse_first[rows]
        for seq, head, flip, group in zip(fetch(rows), fetch(firsts), flipped[rows].tolist(),
                                          firsts.tolist()):
            if seq != (reverse_complement(head) if flip else head):
                bad_groups.add(group)
    for group in sorted(bad_groups):
        rows = np.flatnonzero(inverse_first == group)
        exact = unique_reads(fetch(rows), both)
        inverse_first[rows] = rows[exact.first[exact.inverse]]
        flipped[rows] = exact.flipped
