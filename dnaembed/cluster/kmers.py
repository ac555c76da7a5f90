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


class KmerIndex:
    """k-mers of target sequences (each in both orientations when ``both``)."""

    def __init__(self, targets: Sequence[str], *, both: bool, k: int = K,
                 max_targets: int = MAX_TARGETS_PER_KMER) -> None:
        self.k = k
        n = len(targets)
        seqs = list(targets) + ([reverse_complement(t) for t in targets] if both else [])
        n_owner = max(len(seqs), 1)
        values, owner = kmer_codes(seqs, k)
        # One entry per (k-mer, owner); owner n..2n-1 is the reverse complement of owner - n.
        key = sorted_unique(values * n_owner + owner)
        values, owner = key // n_owner, key % n_owner
        target = owner % max(n, 1)
        flip = (owner >= n).astype(np.int8)
        # Drop k-mers present in too many distinct targets (either orientation counts once).
        per_target = sorted_unique(values * max(n, 1) + target) // max(n, 1)
        kmer, n_targets = sorted_unique(per_target, return_counts=True)
        keep = ~np.isin(values, kmer[n_targets > max_targets])
        self.values = values[keep]
        self.target = target[keep]
        self.flip = flip[keep]

    def candidates(self, queries: Sequence[str], top: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``top`` targets sharing the most k-mers with each query.

        Returns ``(targets, flips)`` arrays of shape ``(len(queries), top)``, -1
        where there are fewer; ``flip`` 1 means the query matches the target's
        reverse complement.
        """
        m = len(queries)
        out_t = np.full((m, top), -1, dtype=np.int64)
        out_f = np.zeros((m, top), dtype=np.int8)
        if m == 0 or len(self.values) == 0:
            return out_t, out_f
        values, query = kmer_codes(queries, self.k)
        key = sorted_unique(values * m + query)  # a k-mer counts once per query
        query, values = key % m, key // m
        lo = np.searchsorted(self.values, values, side="left")
        hi = np.searchsorted(self.values, values, side="right")
        hits = hi - lo
        q = np.repeat(query, hits)
        # Entry positions: lo..hi-1 for each query k-mer.
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(hits)[:-1]]), hits)
        pos = starts + np.arange(int(hits.sum()))
        t = self.target[pos]
        f = self.flip[pos].astype(np.int64)
        n_t = int(self.target.max()) + 1 if len(self.target) else 1
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
        return out_t, out_f
