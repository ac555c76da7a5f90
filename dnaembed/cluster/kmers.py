"""Shared k-mers between reads and cluster representatives (rescue candidates).

A read that lost its end is far from its strand in global edit distance, and so
in the embedding, which approximates it; but it shares most of its k-mers with
its strand. :class:`KmerIndex` holds the k-mers of a set of target sequences,
both orientations, and returns for each query the targets that share the most
k-mers with it. K-mers found in many targets (primers and adapters shared by
every strand) carry no information and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnaembed.arrays import sorted_unique
from dnaembed.encoding import kmer_codes, reverse_complement

#: k-mer length: 4^12 = 16.8 M possible k-mers, so two unrelated 150-nt strands share
#: one by chance with probability ~0.1%; a 12-mer survives a 1.5%-error read 83% of the time.
K = 12


#: A k-mer in more targets than this is uninformative (shared primers) and ignored.
MAX_TARGETS_PER_KMER = 16


#: Targets, and queries, whose k-mers are computed at a time (bounds the memory of a search
#: over hundreds of thousands of targets to a block's, whatever their number).
TARGET_BLOCK = 2_048
QUERY_BLOCK = 4_096
#: Queries whose votes are counted at a time (their hits are the block's largest arrays).
VOTE_BLOCK = 1_024


class KmerIndex:
    """k-mers of target sequences (each in both orientations when ``both``).

    ``targets`` may be any sequence of strings, read block by block: a search
    keeps only the target k-mers that its queries hold, so its memory does not
    grow with the number of targets.
    """

    def __init__(self, targets: Sequence[str], *, both: bool, k: int = K,
                 max_targets: int = MAX_TARGETS_PER_KMER) -> None:
        self.k = k
        self.targets = targets
        self.both = both
        self.max_targets = max_targets

    def _entries(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(k-mer, target, flip) of every target k-mer in ``wanted`` (sorted), one entry per
        (k-mer, target orientation); k-mers in too many distinct targets left out."""
        n = len(self.targets)
        values, owners = [], []
        dead = np.zeros(0, np.int64)  # k-mers already in more than max_targets targets
        for start in range(0, n, TARGET_BLOCK):
            block = [self.targets[i] for i in range(start, min(start + TARGET_BLOCK, n))]
            m = len(block)
            seqs = block + ([reverse_complement(t) for t in block] if self.both else [])
            v, owner = kmer_codes(seqs, self.k)
            at = np.minimum(np.searchsorted(wanted, v), max(len(wanted) - 1, 0))
            keep = (wanted[at] == v) if len(wanted) else np.zeros(len(v), bool)
            v, owner = v[keep], owner[keep]
            # Owner numbering of the whole target set: n..2n-1 is the reverse of owner - n.
            owner = np.where(owner >= m, owner - m + n, owner) + start
            values.append(v)
            owners.append(owner)
            if len(dead) or start + TARGET_BLOCK < n:
                wanted, dead = self._drop_common(wanted, values, owners, n, dead)
        if not values:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8)
        n_owner = max(2 * n if self.both else n, 1)
        key = sorted_unique(np.concatenate(values) * n_owner + np.concatenate(owners))
        values, owner = key // n_owner, key % n_owner
        target = owner % max(n, 1)
        flip = (owner >= n).astype(np.int8)
        # Drop k-mers present in too many distinct targets (either orientation counts once).
        per_target = sorted_unique(values * max(n, 1) + target) // max(n, 1)
        kmer, n_targets = sorted_unique(per_target, return_counts=True)
        keep = ~np.isin(values, np.concatenate([kmer[n_targets > self.max_targets], dead]))
        return values[keep], target[keep], flip[keep]

    def _drop_common(self, wanted, values, owners, n, dead):
        """Stop collecting k-mers already in more than max_targets targets (shared primers)."""
        v = np.concatenate(values)
        target = np.concatenate(owners) % max(n, 1)
        per_target = sorted_unique(v * max(n, 1) + target) // max(n, 1)
        kmer, counts = sorted_unique(per_target, return_counts=True)
        common = kmer[counts > self.max_targets]
        if len(common) == 0:
            return wanted, dead
        keep = ~np.isin(v, common)
        values[:] = [v[keep]]
        owners[:] = [np.concatenate(owners)[keep]]
        return wanted[~np.isin(wanted, common)], np.union1d(dead, common)

    def candidates(self, queries: Sequence[str], top: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``top`` targets sharing the most k-mers with each query.

        Returns ``(targets, flips)`` arrays of shape ``(len(queries), top)``, -1
        where there are fewer; ``flip`` 1 means the query matches the target's
        reverse complement.
        """
        m = len(queries)
        out_t = np.full((m, top), -1, dtype=np.int64)
        out_f = np.zeros((m, top), dtype=np.int8)
        for start in range(0, m, QUERY_BLOCK):
            block = list(queries[start : start + QUERY_BLOCK])
            t, f = self._candidates_block(block, top)
            out_t[start : start + len(block)] = t
            out_f[start : start + len(block)] = f
        return out_t, out_f

    def _candidates_block(self, queries: list[str], top: int) -> tuple[np.ndarray, np.ndarray]:
        m = len(queries)
        out_t = np.full((m, top), -1, dtype=np.int64)
        out_f = np.zeros((m, top), dtype=np.int8)
        if m == 0 or len(self.targets) == 0:
            return out_t, out_f
        values, query = kmer_codes(queries, self.k)
        key = sorted_unique(values * m + query)  # a k-mer counts once per query
        del values, query
        query, values = key % m, key // m
        del key
        entries = self._entries(sorted_unique(values))
        if len(entries[0]) == 0:
            return out_t, out_f
        # Each query's votes are its own: counted for a few queries at a time, so that the
        # hits (one per query k-mer and target holding it) never all exist at once.
        for start in range(0, m, VOTE_BLOCK):
            mine = (query >= start) & (query < start + VOTE_BLOCK)
            self._vote(values[mine], query[mine], entries, top, out_t, out_f)
        return out_t, out_f

    @staticmethod
    def _vote(values: np.ndarray, query: np.ndarray, entries, top: int, out_t: np.ndarray,
              out_f: np.ndarray) -> None:
        """The ``top`` targets of these queries (their k-mers ``values``), into the outputs."""
        index_values, index_target, index_flip = entries
        lo = np.searchsorted(index_values, values, side="left")
        hi = np.searchsorted(index_values, values, side="right")
        hits = hi - lo
        q = np.repeat(query, hits)
        # Entry positions: lo..hi-1 for each query k-mer.
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(hits)[:-1]]), hits)
        pos = starts + np.arange(int(hits.sum()))
        t = index_target[pos]
        f = index_flip[pos].astype(np.int64)
        n_t = int(index_target.max()) + 1 if len(index_target) else 1
        combo, votes = sorted_unique((q * n_t + t) * 2 + f, return_counts=True)
        cq = combo // 2 // n_t
        ct = combo // 2 % n_t
        cf = combo % 2
        # Most votes first within each query; ties: lower target id.
        order = np.lexsort((ct, -votes, cq))
        cq, ct, cf = cq[order], ct[order], cf[order]
        # Keep each target once per query (its better orientation comes first).
        seen = np.unique(cq * n_t + ct, return_index=True)[1]
        keep = np.zeros(len(cq), dtype=bool)
        keep[seen] = True
        cq, ct, cf = cq[keep], ct[keep], cf[keep]
        rank = np.arange(len(cq)) - np.searchsorted(cq, cq, side="left")
        sel = rank < top
        out_t[cq[sel], rank[sel]] = ct[sel]
        out_f[cq[sel], rank[sel]] = cf[sel]
