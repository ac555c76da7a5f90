"""Shared k-mers between reads and cluster representatives (rescue candidates).

A read that lost its end is far from its strand in global edit distance, and so
in the embedding, which approximates it; but it shares most of its k-mers with
its strand. :class:`KmerIndex` holds the k-mers of a set of target sequences,
both orientations, and returns for each query the targets that share the most
k-mers with it. K-mers found in many targets (primers and adapters shared by
every strand) carry no information and are left out.

Why this shape: the rescue asks about tens of thousands of reads against every
cluster's representative, and both grow with the input. Indexing the *queries*
(a table over all 4^k k-mers) and streaming the targets through it block by
block costs two passes over the targets whatever the number of queries (one to
find the common k-mers, one to vote); a target's votes are complete within its
block, so each block's best targets merge into a running top list. An index of
the targets, searched once per block of queries, would read every target once
per block, which grows as the square of the input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnaembed.arrays import rank_in_groups, sorted_unique
from dnaembed.encoding import kmer_codes, reverse_complement

#: k-mer length (the rescue's, :data:`dnaembed.cluster.rescue.RESCUE_K`, says why 11).
K = 11
#: Longest k: the tables hold one entry per possible k-mer (8 bytes each: 134 MB at 12).
MAX_K = 12

#: A k-mer in more targets than this is uninformative (shared primers) and ignored.
MAX_TARGETS_PER_KMER = 16

#: Targets, and queries, whose k-mers are held at a time: a search's memory is a block's,
#: whatever the number of targets; each block of queries reads the targets once more.
TARGET_BLOCK = 2_048
QUERY_BLOCK = 32_768


class KmerIndex:
    """k-mers of target sequences (each in both orientations when ``both``).

    ``targets`` may be any sequence of strings, read block by block: memory
    does not grow with the number of targets. ``groups``, when given, numbers the
    group of each target (several reads of one cluster), non-decreasing so that a
    group's targets are contiguous: a search then ranks groups, a k-mer counting
    once per group however many of its reads hold it, and ``max_targets`` counts
    groups. ``block``: targets held at a time (default :data:`TARGET_BLOCK`; a block
    never splits a group).
    """

    def __init__(self, targets: Sequence[str], *, both: bool, k: int = K,
                 max_targets: int = MAX_TARGETS_PER_KMER, groups: np.ndarray | None = None,
                 block: int | None = None) -> None:
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k-mer length must be 1..{MAX_K}, not {k}")
        if groups is not None:
            groups = np.asarray(groups, dtype=np.int64)
            if len(groups) != len(targets):
                raise ValueError(f"{len(groups)} group numbers for {len(targets)} targets")
            if len(groups) and (groups[0] < 0 or (np.diff(groups) < 0).any()):
                raise ValueError("group numbers must be non-negative and non-decreasing")
        self.k = k
        self.targets = targets
        self.both = both
        self.max_targets = max_targets
        self.groups = groups
        self.block = block
        self._common: np.ndarray | None = None

    def _cuts(self):
        """(first, end) target of each block: about ``block`` targets, cut between groups."""
        n, start = len(self.targets), 0
        size = max(TARGET_BLOCK if self.block is None else self.block, 1)
        while start < n:
            end = min(start + size, n)
            if self.groups is not None and end < n and self.groups[end] == self.groups[end - 1]:
                # Back to the start of the group the cut would split; forward to its end when
                # that group alone is larger than a block.
                g = self.groups[end]
                end = int(np.searchsorted(self.groups, g, side="left"))
                if end <= start:
                    end = int(np.searchsorted(self.groups, g, side="right"))
            yield start, end
            start = end

    def _blocks(self):
        """(first owner, block size m, k-mer codes, owner) per block of targets, one entry
        per distinct (k-mer, owner orientation); owner ``m + i`` is owner ``i``'s reverse.
        Owners are the targets, or with ``groups`` the groups (numbered from the first)."""
        for start, end in self._cuts():
            block = [self.targets[i] for i in range(start, end)]
            seqs = block + ([reverse_complement(t) for t in block] if self.both else [])
            v, owner = kmer_codes(seqs, self.k)
            m, first = end - start, start
            if self.groups is not None:
                first = int(self.groups[start])
                local = self.groups[start:end] - first
                size = end - start
                m = int(local[-1]) + 1
                owner = local[owner % size] + m * (owner >= size)
            key = sorted_unique(v * (2 * m) + owner)
            yield first, m, key // (2 * m), key % (2 * m)

    def common(self) -> np.ndarray:
        """Per possible k-mer: True if more than ``max_targets`` targets hold it (either
        orientation counts once; with ``groups``, groups). Computed on first use, in one
        pass over the targets."""
        if self._common is None:
            held_by = np.zeros(4**self.k, dtype=np.int32)
            for _, m, values, owner in self._blocks():
                per_target = sorted_unique(values * m + owner % m) // m
                kmer, n_targets = sorted_unique(per_target, return_counts=True)
                held_by[kmer] += n_targets.astype(np.int32)
            self._common = held_by > self.max_targets
        return self._common

    def candidates(self, queries: Sequence[str], top: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``top`` targets sharing the most k-mers with each query.

        Returns ``(targets, flips)`` arrays of shape ``(len(queries), top)``, -1
        where there are fewer (group numbers with ``groups``); ``flip`` 1 means the
        query matches the target's reverse complement. Ties: the lower number first.
        """
        m = len(queries)
        out_t = np.full((m, top), -1, dtype=np.int64)
        out_f = np.zeros((m, top), dtype=np.int8)
        if m == 0 or len(self.targets) == 0:
            return out_t, out_f
        common = self.common()
        for start in range(0, m, QUERY_BLOCK):
            block = list(queries[start : start + QUERY_BLOCK])
            best = _TopTargets(len(block), top)
            table = _QueryTable(block, self.k, common)
            for first, size, values, owner in self._blocks():
                best.merge(*table.votes(values, owner, size), size, first)
            out_t[start : start + len(block)], out_f[start : start + len(block)] = best.result()
        return out_t, out_f


class _QueryTable:
    """The queries' k-mers by k-mer: a table over all 4^k k-mers of where each one's
    queries start in ``query`` (a k-mer counts once per query; common k-mers left out)."""

    def __init__(self, queries: list[str], k: int, common: np.ndarray) -> None:
        m = len(queries)
        values, query = kmer_codes(queries, k)
        key = sorted_unique(values * m + query)
        values, query = key // m, key % m
        keep = ~common[values]
        values, self.query = values[keep], query[keep].astype(np.int32)
        self.first = np.zeros(4**k + 1, dtype=np.int64)
        np.cumsum(np.bincount(values, minlength=4**k), out=self.first[1:])

    def votes(self, values: np.ndarray, owner: np.ndarray, m: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, owner, votes) for every query sharing k-mers with a target orientation
        of this block (``values``/``owner`` as :meth:`KmerIndex._blocks` gives them)."""
        lo = self.first[values]
        hits = self.first[values + 1] - lo
        found = hits > 0
        lo, hits, owner = lo[found], hits[found], owner[found]
        pos = np.repeat(lo - np.cumsum(hits) + hits, hits) + np.arange(int(hits.sum()))
        combo, votes = sorted_unique(self.query[pos].astype(np.int64) * (2 * m)
                                     + np.repeat(owner, hits), return_counts=True)
        return combo // (2 * m), combo % (2 * m), votes


class _TopTargets:
    """Each query's ``top`` targets by votes so far (ties: lower target number)."""

    def __init__(self, m: int, top: int) -> None:
        self.top = top
        self.target = np.full((m, top), -1, dtype=np.int64)
        self.flip = np.zeros((m, top), dtype=np.int8)
        self.votes = np.zeros((m, top), dtype=np.int64)

    def merge(self, q: np.ndarray, owner: np.ndarray, votes: np.ndarray, m: int,
              first_target: int) -> None:
        """Add one block's votes (:meth:`_QueryTable.votes`; its ``m`` targets numbered
        from ``first_target``, after every target merged before)."""
        # Later blocks hold higher target numbers, which lose ties: only votes above a
        # query's last place can enter (most pairs share one k-mer by chance).
        enters = votes > self.votes[q, -1]
        q, owner, votes = q[enters], owner[enters], votes[enters]
        if len(q) == 0:
            return
        t, f = owner % m + first_target, (owner >= m).astype(np.int8)
        rows = sorted_unique(q)
        held = self.votes[rows] > 0
        q = np.concatenate([np.repeat(rows, held.sum(axis=1)), q])
        t = np.concatenate([self.target[rows][held], t])
        f = np.concatenate([self.flip[rows][held], f])
        votes = np.concatenate([self.votes[rows][held], votes])
        # A target once per query, in its better orientation (more votes; ties: as read).
        order = np.lexsort((f, -votes, t, q))
        q, t, f, votes = q[order], t[order], f[order], votes[order]
        once = np.ones(len(q), dtype=bool)
        once[1:] = (q[1:] != q[:-1]) | (t[1:] != t[:-1])
        q, t, f, votes = q[once], t[once], f[once], votes[once]
        order = np.lexsort((t, -votes, q))
        q, t, f, votes = q[order], t[order], f[order], votes[order]
        rank = rank_in_groups(q)
        keep = rank < self.top
        q, t, f, votes, rank = q[keep], t[keep], f[keep], votes[keep], rank[keep]
        self.target[rows], self.flip[rows], self.votes[rows] = -1, 0, 0
        self.target[q, rank], self.flip[q, rank], self.votes[q, rank] = t, f, votes

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        return self.target, self.flip
