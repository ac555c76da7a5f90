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

from dnaembed.encoding import N_CODE, encode_flat, offsets, reverse_complement, segment_ids

#: k-mer length: 4^12 = 16.8 M possible k-mers, so two unrelated 150-nt strands share
#: one by chance with probability ~0.1%; a 12-mer survives a 1.5%-error read 83% of the time.
K = 12
#: A k-mer in more targets than this is uninformative (shared primers) and ignored.
MAX_TARGETS_PER_KMER = 16


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


def _kmers(seqs: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """All k-mers without N of every sequence: (k-mer codes, sequence index)."""
    codes, lengths = encode_flat(seqs)
    n_pos = len(codes) - k + 1
    if n_pos <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    bits = (codes & 3).astype(np.int64)
    value = np.zeros(n_pos, dtype=np.int64)
    for shift in range(k):
        value <<= 2
        value |= bits[shift : shift + n_pos]
    # Valid where the k-mer lies inside one sequence and holds no N.
    n_count = np.concatenate([[0], np.cumsum(codes == N_CODE)])
    seg = segment_ids(lengths)[:n_pos]
    pos = np.arange(n_pos)
    ok = (pos - offsets(lengths)[seg] + k <= lengths[seg]) & (n_count[k:] == n_count[:n_pos])
    return value[ok], seg[ok]


class KmerIndex:
    """k-mers of target sequences (each in both orientations when ``both``)."""

    def __init__(self, targets: Sequence[str], *, both: bool, k: int = K,
                 max_targets: int = MAX_TARGETS_PER_KMER) -> None:
        self.k = k
        n = len(targets)
        seqs = list(targets) + ([reverse_complement(t) for t in targets] if both else [])
        n_owner = max(len(seqs), 1)
        values, owner = _kmers(seqs, k)
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
        values, query = _kmers(queries, self.k)
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
