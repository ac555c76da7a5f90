"""Candidate read pairs from embedding neighbours, and their exact Levenshtein check.

A pair ``(i, j, parity)`` says: read ``j`` is a neighbour of read ``i`` as read
(parity 0), or of the reverse complement of read ``i`` (parity 1). Pairs are
stored once, with ``i < j``; for parity 1 the distance
``lev(rc(s_i), s_j) = lev(s_i, rc(s_j))`` is symmetric too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.cluster.search import Neighbours
from dnaembed.io.strings import oriented_strings, strings_of

#: Pairs checked per call. It bounds the temporary lists of sequences and rapidfuzz's own
#: working memory, which grows with the pairs of a call (~300 bytes per pair, not freed to
#: the system between calls): 16,384 pairs keep a call to a few MB at the same speed.
CHECK_BATCH = 1 << 14


@dataclass
class CandidatePairs:
    """Distinct candidate pairs: ``lo < hi`` read indices, parity, embedding distance."""

    lo: np.ndarray  # int64
    hi: np.ndarray  # int64
    parity: np.ndarray  # int8
    embedded: np.ndarray  # float32, the smaller of the two directions

    def __len__(self) -> int:
        return len(self.lo)

    def subset(self, mask: np.ndarray) -> CandidatePairs:
        """The pairs where ``mask`` is True (or the rows it indexes), in order."""
        return CandidatePairs(self.lo[mask], self.hi[mask], self.parity[mask], self.embedded[mask])


def candidate_pairs(
    forward: Neighbours | None, reverse: Neighbours | None = None, rows: np.ndarray | None = None
) -> CandidatePairs:
    """Merge neighbour lists (forward queries, and reverse-complement queries) into pairs.

    ``rows``: the read index of each query row (default: row i is read i).
    Self pairs and missing neighbours (-1) are dropped; a pair found from both
    ends is kept once, with the smaller embedding distance.
    """
    parts = [(nb, parity) for nb, parity in ((forward, 0), (reverse, 1)) if nb is not None]
    qs, ns, ps, ds = [], [], [], []
    for nb, parity in parts:
        n, k = nb.indices.shape
        # int64: the pairs' keys below are products of read numbers.
        q = np.repeat(np.arange(n) if rows is None else rows, k).astype(np.int64)
        j = nb.indices.reshape(-1).astype(np.int64)
        d = nb.distances.reshape(-1)
        ok = (j >= 0) & (j != q)
        qs.append(q[ok])
        ns.append(j[ok])
        ds.append(d[ok])
        ps.append(np.full(int(ok.sum()), parity, dtype=np.int8))
    q = np.concatenate(qs) if qs else np.zeros(0, np.int64)
    j = np.concatenate(ns) if ns else np.zeros(0, np.int64)
    d = np.concatenate(ds).astype(np.float32) if ds else np.zeros(0, np.float32)
    p = np.concatenate(ps) if ps else np.zeros(0, np.int8)
    lo, hi = np.minimum(q, j), np.maximum(q, j)
    n_reads = int(hi.max()) + 1 if len(hi) else 1  # key base: any bound above every index
    key = (lo * n_reads + hi) * 2 + p
    # Smallest distance first, so that np.unique (which keeps the first) keeps it.
    order = np.lexsort((d, key))
    key, d = key[order], d[order]
    uniq, first = np.unique(key, return_index=True)
    lo = uniq // 2 // n_reads
    hi = uniq // 2 % n_reads
    return CandidatePairs(lo, hi, (uniq % 2).astype(np.int8), d[first])


def distances_within_cuts(
    seqs: Sequence[str],
    rc_seqs: Sequence[str] | None,
    pairs: CandidatePairs,
    cuts: np.ndarray,
    *,
    workers: int = 1,
) -> np.ndarray:
    """Each pair's exact Levenshtein distance where it is within the pair's cut, else more
    than the cut (int32).

    The pairs are checked in groups of one cut each: rapidfuzz takes one cutoff per call,
    and its fastest kernel (one machine word, for ``2 cutoff + 1 <= 64``) is chosen from
    that cutoff, so a few long reads' larger cuts must not set it for every pair. Why it
    matters: on 150 nt reads a cutoff of 75 cost 3.3 us a pair of unrelated reads against
    0.9 us at 29 (docs/scaling.md).
    """
    cuts = np.asarray(cuts, dtype=np.int64)
    out = np.empty(len(pairs), dtype=np.int32)
    for cut in np.unique(cuts).tolist():
        at = np.flatnonzero(cuts == cut)
        out[at] = levenshtein_pairs(seqs, rc_seqs, pairs.subset(at), cutoff=int(cut),
                                    workers=workers)
    return out


def levenshtein_pairs(
    seqs: Sequence[str],
    rc_seqs: Sequence[str] | None,
    pairs: CandidatePairs,
    *,
    cutoff: int | None = None,
    workers: int = 1,
) -> np.ndarray:
    """Exact Levenshtein distance of every pair (int32), in C, on ``workers`` threads.

    With ``cutoff``, distances above it are reported as ``cutoff + 1`` (faster:
    the bit-parallel kernel stops early). Parity-1 pairs need ``rc_seqs``.
    """
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    if len(pairs) == 0:
        return np.zeros(0, dtype=np.int32)
    if rc_seqs is None and pairs.parity.any():
        raise ValueError("reverse-complement pairs need the reverse complements")
    out = np.empty(len(pairs), dtype=np.int32)
    # In slices: the per-pair string lists are the largest temporary of the whole pipeline.
    for start in range(0, len(pairs), CHECK_BATCH):
        stop = min(start + CHECK_BATCH, len(pairs))
        left = oriented_strings(seqs, rc_seqs, pairs.lo[start:stop], pairs.parity[start:stop])
        right = strings_of(seqs, pairs.hi[start:stop])
        out[start:stop] = process.cpdist(
            left,
            right,
            scorer=Levenshtein.distance,
            score_cutoff=cutoff,
            workers=max(1, workers),
            dtype=np.int32,
        )
    return out
