"""The default method: embedding neighbours, checked exactly, linked with a guard.

1. Candidates: each read's ``neighbours`` nearest reads in embedding space (faiss).
2. Check: the exact Levenshtein distance of every candidate pair (C,
   bit-parallel, all cores); pairs over the threshold are dropped. The threshold
   is the user's ``max_dist`` or chosen from the data
   (:mod:`dnaembed.cluster.threshold`).
3. Link: verified pairs in increasing distance (Kruskal order) join their
   reads' clusters, keeping each read's orientation relative to its cluster.
   Guard against chaining: two clusters join only if their representatives
   (each cluster's most connected read; a merged cluster keeps the larger
   side's) are themselves within ``guard_factor`` times the threshold of each
   other. One close pair between two strands
   (a chimera, a read halfway between) therefore cannot merge them.
4. Both orientations: after step 3 the reads of a strand sequenced the same way
   are together; the two halves of a strand (reads as designed, reads
   reverse-complemented) are joined by a second round from one read per cluster:
   the reverse complement of each cluster's representative is embedded, searched
   among all reads, checked exactly and linked as in step 3. That needs
   reverse-complement embeddings for one read per cluster instead of every read,
   which halves the embedding time at coverage ~10.
5. Split check: a cluster whose reads form two groups, each far better
   explained by its own medoid (two related designs joined by one close pair),
   is split (:mod:`dnaembed.cluster.split`; ``split=False`` turns it off).
6. Leftovers (clusters of at most ``rescue_max_size`` reads) get the infix
   alignment rescue of :mod:`dnaembed.cluster.rescue`.

Cost: ``neighbours`` searches and checks per read (plus per cluster with both
orientations), one guard check per merge; near-linear in the number of reads.
More in ``docs/algorithms.md``.
"""

from __future__ import annotations

import time
from array import array

import numpy as np

from dnaembed.cluster.base import Clusterer, FitData
from dnaembed.cluster.candidates import CandidatePairs, candidate_pairs
from dnaembed.cluster.params import Interval
from dnaembed.cluster.search import PROJECTED_DIM
from dnaembed.cluster.split import split_clusters
from dnaembed.cluster.threshold import Threshold
from dnaembed.cluster.unionfind import ParityUnionFind
from dnaembed.encoding import reverse_complement
from dnaembed.log import logger


class GraphClusterer(Clusterer):
    """Exact-checked neighbour graph with guarded linking (see the module notes).

    Parameters: ``max_dist`` (edit distance; None = chosen from the data),
    ``neighbours`` (per read), ``guard`` and ``guard_factor``, ``index`` ('auto',
    'exact', 'hnsw'), ``index_dim`` (HNSW graph on a PCA projection to this many
    dimensions, 0 = the full vectors), ``rescue``, ``rescue_max_size``, ``split`` (the check
    after linking), ``threads`` (0 = all cores), ``seed``.
    """

    method = "graph"
    _parameter_constraints = {
        **Clusterer._parameter_constraints,
        "max_dist": [None, Interval(integer=True, low=0)],
        "guard": ["boolean"],
        "guard_factor": [Interval(integer=False, low=0, closed="neither")],
        "split": ["boolean"],
    }

    def __init__(
        self,
        max_dist: int | None = None,
        *,
        neighbours: int = 16,
        guard: bool = True,
        guard_factor: float = 1.5,
        index: str = "auto",
        index_dim: int = PROJECTED_DIM,
        rescue: bool = True,
        rescue_max_size: int = 2,
        split: bool = True,
        threads: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(
            neighbours=neighbours, index=index, index_dim=index_dim, rescue=rescue,
            rescue_max_size=rescue_max_size,
            threads=threads, seed=seed,
        )
        self.max_dist = max_dist
        self.guard = guard
        self.guard_factor = guard_factor
        self.split = split

    def _cluster(self, data: FitData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(data)
        if n == 1:
            return np.zeros(1, np.int64), np.zeros(1, np.int8), np.zeros(1)
        forward, _ = self._neighbours(data, reverse=False)
        pairs = candidate_pairs(forward)
        threshold = self._threshold(data, self.max_dist)
        edges, dist = self._check(data, pairs, threshold)
        w = data.weights.astype(np.float64)
        # Centrality: reads within the cut, collapsed copies included.
        degree = (w - 1) + np.bincount(edges.lo, weights=w[edges.hi], minlength=n) + np.bincount(
            edges.hi, weights=w[edges.lo], minlength=n
        )
        start = time.perf_counter()
        rc = self._rc_seqs(data)
        linker = _GuardedLinker(data.seqs, rc, degree, data.weights, threshold, self.guard_factor,
                                self.guard)
        linker.link(edges, dist)
        self._add_time("link", start)
        if data.both:
            # Second round: one reverse complement per cluster (see the module notes).
            reps = linker.representatives()
            vectors = data.reverse_rows(reps)
            start = time.perf_counter()
            found = self._index(data).search(vectors, self._k(data))
            self._add_time("search", start)
            flipped = candidate_pairs(None, found, rows=reps)
            edges2, dist2 = self._check(data, flipped, threshold)
            start = time.perf_counter()
            linker.link(edges2, dist2)
            self._add_time("link", start)
            self.stats_["reverse_queries"] = len(reps)
        groups, parity = linker.uf.labels()
        self.stats_.update(merges=linker.merges, guard_refusals=linker.refusals)
        logger.debug("linked %d pairs, guard refused %d", linker.merges, linker.refusals)
        if self.split:
            groups = self._split(data, groups, parity, degree, threshold)
        return groups, parity, degree

    def _split(self, data: FitData, groups: np.ndarray, parity: np.ndarray,
               degree: np.ndarray, threshold: Threshold) -> np.ndarray:
        """Step 5: clusters whose reads form two groups are split (:mod:`.split`)."""
        start = time.perf_counter()
        groups, counts = split_clusters(data.seqs, self._rc_seqs(data), groups, parity, degree,
                                        data.weights, threshold, workers=self._workers())
        self._add_time("split", start)
        self.stats_.update(counts)
        logger.debug("split check: %d clusters screened, %d tested, %d split",
                     counts["split_screened"], counts["split_tested"], counts["splits"])
        return groups


#: Pairs linked per block (see :meth:`_GuardedLinker.link`).
LINK_BLOCK = 65_536


def kruskal_order(lo: np.ndarray, hi: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """The pairs' order for linking: by distance, then ``lo``, then ``hi``, ties in input
    order (``np.lexsort((hi, lo, dist))``).

    Pairs mostly come sorted by ``(lo, hi)`` already (the rounds' collector keeps them in
    key order), and then a stable sort of the distances alone gives that order: as 16-bit
    integers numpy sorts them by radix, in one pass (2.7 x 10^6 pairs: 0.05 s against
    0.41 for the three keys).
    """
    if len(lo) > 1:
        same = lo[1:] == lo[:-1]
        if not ((lo[1:] > lo[:-1]) | (same & (hi[1:] >= hi[:-1]))).all():
            return np.lexsort((hi, lo, dist))
    if dist.dtype.kind in "iu" and len(dist) and dist.min() >= 0 and dist.max() < 2**15:
        dist = dist.astype(np.int16)
    return np.argsort(dist, kind="stable")


class _GuardedLinker:
    """Kruskal-order linking with orientation, guarded by checks between representatives."""

    def __init__(self, seqs, rc_seqs, degree: np.ndarray, weights: np.ndarray,
                 threshold: Threshold, factor: float, guard: bool) -> None:
        n = len(seqs)
        # Typed arrays, not lists: a few bytes per read instead of ~36 per entry.
        self.weight = array("d", weights.astype(np.float64).tobytes())  # per root: its reads
        self.seqs, self.rc = seqs, rc_seqs
        self.deg = array("d", np.asarray(degree, dtype=np.float64).tobytes())
        self.uf = ParityUnionFind(n)
        # Each root's representative (most central read) and its parity relative to the root.
        self.rep = array("i", range(n))
        self.rep_parity = array("b", bytes(n))
        # Guard cut per unit of the longer representative's length.
        ref = threshold.reference_length
        self.guard_rate = factor * threshold.max_dist / ref if ref > 0 else 0.0
        self.guard_fixed = int(factor * threshold.max_dist)
        self.guard = guard
        self.refused: set[tuple[int, int, int]] = set()
        self.merges = self.refusals = 0

    def representatives(self) -> np.ndarray:
        """The representative read of every current cluster, in increasing order."""
        return self.clusters()[0]

    def clusters(self) -> tuple[np.ndarray, np.ndarray]:
        """Every current cluster's representative (increasing) and weight (its reads)."""
        parent = np.frombuffer(self.uf.parent, dtype=np.int32)
        roots = np.flatnonzero(parent == np.arange(len(parent)))  # a root is its own parent
        reps = np.frombuffer(self.rep, dtype=np.int32)[roots].astype(np.int64)
        weights = np.frombuffer(self.weight, dtype=np.float64)[roots]
        order = np.argsort(reps, kind="stable")
        return reps[order], weights[order]

    def link(self, edges: CandidatePairs, dist: np.ndarray) -> None:
        """Link ``edges`` (checked distances ``dist``) in Kruskal order: shortest first."""
        order = kruskal_order(edges.lo, edges.hi, dist)
        # Python ints for a block of pairs at a time: a list of every pair would take
        # ~100 bytes per pair (10^8 bytes per 10^6 reads) for a moment.
        for start in range(0, len(order), LINK_BLOCK):
            block = order[start : start + LINK_BLOCK]
            # Sets only grow: a pair whose reads share a root before the block is one that
            # the loop would skip anyway; most pairs are, and they are dropped here at once.
            lo_root, hi_root = self.uf.roots(edges.lo[block]), self.uf.roots(edges.hi[block])
            apart = lo_root != hi_root
            block = block[apart]
            lo, hi = edges.lo[block], edges.hi[block]
            fetched = self._representatives(lo_root[apart], hi_root[apart], lo, hi)
            self._link_in_order(lo.tolist(), hi.tolist(), edges.parity[block].tolist(), fetched)

    def _representatives(self, lo_root: np.ndarray, hi_root: np.ndarray, lo: np.ndarray,
                         hi: np.ndarray) -> dict[int, str]:
        """The reads the guard may compare in a block of pairs, fetched in bulk from a read
        store (none from a list, whose reads cost nothing to look up).

        The guard compares the representatives of the two clusters a pair would join;
        through the block these are the representatives, at its start, of the clusters of
        its pairs' reads (a merge keeps one of its two), but for the pairs of two reads
        each its own representative then, which the guard skips unless the block merged
        one of them before (those are fetched one at a time when asked for). Why: fetched
        one at a time from a store of two-bit codes, they took ~5 s of the serial linking
        of 3 x 10^6 reads under --memory 2G (py-spy); a block at a time, round 1's
        linking of 10^6 reads under 2G took 5.5 s of CPU against 6.1.
        """
        if not self.guard or not hasattr(self.seqs, "take") or len(lo) == 0:
            return {}
        rep = np.frombuffer(self.rep, dtype=np.int32)
        lo_rep, hi_rep = rep[lo_root], rep[hi_root]
        guarded = (lo_rep != lo) | (hi_rep != hi)
        reads = np.unique(np.concatenate([lo_rep[guarded], hi_rep[guarded]]))
        return dict(zip(reads.tolist(), self.seqs.take(reads)))

    def _link_in_order(self, lo: list[int], hi: list[int], parity: list[int],
                       fetched: dict[int, str]) -> None:
        from rapidfuzz.distance import Levenshtein

        uf, rep, rep_parity, deg = self.uf, self.rep, self.rep_parity, self.deg
        weight = self.weight
        seqs, rc = self.seqs, self.rc
        parent, parent_parity, find = uf.parent, uf.parity, uf.find
        for i, j, p in zip(lo, hi, parity):
            # uf.find only where the read is neither its root nor the root's child (else its
            # parity is its own entry; a root's is 0). Most reads are one of the two, and
            # the call cost ~0.5 µs a find against ~0.2 inline (2 x 10^6 finds in clusters
            # of ten); the loop takes ~10^6 pairs at 10^6 reads.
            ri, rj = parent[i], parent[j]
            ri, pi = (ri, parent_parity[i]) if parent[ri] == ri else find(i)
            rj, pj = (rj, parent_parity[j]) if parent[rj] == rj else find(j)
            if ri == rj:
                continue
            link = pi ^ p ^ pj  # rj's orientation relative to ri
            a, b = rep[ri], rep[rj]
            if self.guard and not (a == i and b == j):
                rel = rep_parity[ri] ^ link ^ rep_parity[rj]  # rep b relative to rep a
                key = (min(a, b), max(a, b), rel)
                if key in self.refused:
                    self.refusals += 1
                    continue
                left, right = fetched.get(a), fetched.get(b)  # each read fetched once
                if left is None:
                    left = rc[a] if rel else seqs[a]
                elif rel:
                    left = reverse_complement(left)
                if right is None:
                    right = seqs[b]
                cut = (
                    int(self.guard_rate * max(len(left), len(right)))
                    if self.guard_rate
                    else self.guard_fixed
                )
                if Levenshtein.distance(left, right, score_cutoff=cut) > cut:
                    self.refused.add(key)
                    self.refusals += 1
                    continue
            # The merged cluster keeps the representative of the heavier side (ties: the more
            # central one). Following the most connected read instead would let a read
            # between two strands, linked to both, become the centre and open the guard.
            wa, wb = weight[ri], weight[rj]
            keep_b = wb > wa or (wb == wa and (deg[b] > deg[a] or (deg[b] == deg[a] and b < a)))
            root = uf.union_roots(ri, rj, link)
            self.merges += 1
            weight[root] = wa + wb
            if root == ri and keep_b:
                rep[ri], rep_parity[ri] = b, rep_parity[rj] ^ link
            elif root == rj and not keep_b:
                rep[rj], rep_parity[rj] = a, rep_parity[ri] ^ link
