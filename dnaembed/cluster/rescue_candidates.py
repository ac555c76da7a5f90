"""Which clusters a read of the rescue is compared with, and with which of their reads.

Candidate clusters: the :data:`MAX_CANDIDATES` target clusters whose central reads
(three, voting together) share the most k-mers
(:data:`~dnaembed.cluster.rescue_rule.RESCUE_K`) with the read
(:mod:`dnaembed.cluster.kmers`; a truncated read shares most of its k-mers with its
strand, while the embedding, like the global distance it approximates, sees it as far),
then up to :data:`EMBEDDING_CANDIDATES` more from the read's nearest embedding
neighbours. Decisions within a pass are taken against the clustering before it, so the
result does not depend on the order of the reads.

Why the consensus (ldpc-exp7): against single reads the two distances the rule
compares both carry the member's own errors, and the labels of the real set are
decided on distances to the designs, which a consensus of five reads is within
~0.2 edits of (against ~1.8 for the representative alone). Why both orientations
always: the orientation that won the k-mer vote (a few k-mers) is wrong often
enough to cost reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnaembed.arrays import rank_in_groups
from dnaembed.cluster.kmers import KmerIndex
from dnaembed.cluster.units import OrientedBlock, UnitSequences
from dnaembed.io.strings import oriented_strings

#: Clusters tried per read: by shared k-mers, then by embedding neighbours.
MAX_CANDIDATES = 8
EMBEDDING_CANDIDATES = 2
#: Central full-length reads of each candidate cluster (the representative first) whose
#: consensus a read is aligned to (:mod:`dnaembed.cluster.profiles`): one read's own errors
#: would otherwise blur the comparison.
MEMBERS_PER_CLUSTER = 5


def central_members(labels: np.ndarray, orientation: np.ndarray, centrality: np.ndarray,
                    lengths: np.ndarray, reps: np.ndarray, full_length: float, count: int
                    ) -> CentralMembers:
    """Per cluster: (read, orientation) of its representative and most central full-length reads.

    The reads that may be listed are sorted by cluster, then centrality, by a stable sort
    from read order (ties: the earliest); sorting every read with its position as a third
    key took 1.0 s of CPU for 3 x 10^6 reads in 300,000 clusters, twice a run; this 0.7.
    """
    is_rep = np.zeros(len(labels), dtype=bool)
    is_rep[reps] = True
    eligible = np.flatnonzero((lengths >= full_length) & ~is_rep)
    order = eligible[np.lexsort((-centrality[eligible], labels[eligible]))]
    rank = rank_in_groups(labels[order])
    order, rank = order[rank < count - 1], rank[rank < count - 1]
    reads = np.full((len(reps), count), -1, dtype=np.int64)
    flips = np.zeros((len(reps), count), dtype=np.int8)
    reads[:, 0] = reps
    reads[labels[order], rank + 1] = order
    flips[labels[order], rank + 1] = orientation[order]
    return CentralMembers(reads, flips)


class CentralMembers:
    """The central reads of every cluster, as arrays (``-1``: none), each cluster's read as
    a list of (read, orientation) when asked for: lists of tuples for every cluster took
    163 MB for 300,000 clusters of five (3 x 10^6 reads), the arrays 14 MB."""

    def __init__(self, reads: np.ndarray, flips: np.ndarray) -> None:
        self.reads, self.flips = reads, flips

    def __len__(self) -> int:
        return len(self.reads)

    def __getitem__(self, cluster: int) -> list[tuple[int, int]]:
        row = self.reads[cluster]
        n = int((row >= 0).sum())
        return list(zip(row[:n].tolist(), self.flips[cluster, :n].tolist()))


def choose_candidates(rows: np.ndarray, by_kmers: np.ndarray,
                      neighbours: tuple[np.ndarray, np.ndarray], before: np.ndarray,
                      targets: np.ndarray, limits: np.ndarray, rng: np.random.Generator
                      ) -> tuple[list[int], list[list[int]]]:
    """The reads that have candidate clusters (in row order) and theirs: by k-mers, then
    by the embedding neighbours' clusters (:func:`_candidate_clusters`), below each
    read's ``limits`` (a cluster number)."""
    by_embedding, embedded = neighbours
    # Clusters of the embedding neighbours, nearest first (-1: none, or not a target).
    order = np.argsort(embedded, axis=1, kind="stable")
    nearest = np.take_along_axis(by_embedding, order, axis=1)
    near_clusters = np.where(nearest >= 0, before[np.maximum(nearest, 0)], -1)
    near_clusters[(near_clusters >= 0) & ~targets[np.maximum(near_clusters, 0)]] = -1
    kmer_rows, near_rows = by_kmers.tolist(), near_clusters.tolist()
    target_list = np.flatnonzero(targets).tolist()
    examined, chosen = [], []
    for r, (row, own, limit) in enumerate(zip(rows.tolist(), before[rows].tolist(),
                                              limits.tolist())):
        clusters = _candidate_clusters(kmer_rows[r], near_rows[r], target_list, own, limit,
                                       rng)
        if clusters is not None:
            examined.append(row)
            chosen.append(clusters)
    return examined, chosen


def member_kmers(seqs: Sequence[str], rc_seqs: Sequence[str] | None, members: CentralMembers,
                 target_ids: np.ndarray, per_cluster: int, k: int) -> KmerIndex:
    """The k-mers of the target clusters' central reads, each read oriented as its cluster.

    A noisy read shares few k-mers with any one read of its strand (each k-mer must
    survive the errors of both), but more with several: the k-mers of
    ``per_cluster`` reads of a cluster vote for it together.
    """
    reads = members.reads[target_ids, :per_cluster]
    present = reads >= 0  # row by row: each group's reads contiguous, representative first
    groups = np.broadcast_to(np.arange(len(target_ids))[:, None], reads.shape)[present]
    targets = _OrientedReads(seqs, rc_seqs, reads[present],
                             members.flips[target_ids, :per_cluster][present].astype(bool))
    return KmerIndex(targets, both=rc_seqs is not None, k=k, groups=groups)


class _OrientedReads:
    """Reads by number and orientation, each fetched when the k-mer index reads its block.

    A list of them all would hold up to five new strings per cluster at once: at 3 x 10^6
    reads (300,000 clusters) about 180 MB, which took a run under ``--memory 2G`` over it.
    """

    def __init__(self, seqs, rc_seqs, reads: np.ndarray, flips: np.ndarray) -> None:
        self.seqs, self.rc_seqs, self.reads, self.flips = seqs, rc_seqs, reads, flips

    def __len__(self) -> int:
        return len(self.reads)

    def __getitem__(self, i: int) -> str:
        read = int(self.reads[i])
        return self.rc_seqs[read] if self.flips[i] and self.rc_seqs is not None else self.seqs[read]

    def take(self, rows: np.ndarray) -> list[str]:
        """Reads ``rows`` (a block of the k-mer index) at once."""
        return oriented_strings(self.seqs, self.rc_seqs, self.reads[rows], self.flips[rows])

    def coded_block(self, rows: np.ndarray) -> OrientedBlock | list[str]:
        """Reads ``rows`` as the k-mer index's threads code them: a block of the read
        store where the reads are a store's units (:meth:`UnitSequences.oriented_block`),
        else strings."""
        if not isinstance(self.seqs, UnitSequences):
            return self.take(rows)
        if self.rc_seqs is None:
            return self.seqs.oriented_block(self.reads[rows], np.zeros(len(rows), bool))
        if not self.seqs.reverses(self.rc_seqs):
            return self.take(rows)
        return self.seqs.oriented_block(self.reads[rows], self.flips[rows])


def _candidate_clusters(kmer_targets, near, target_list, own: int, limit: int, rng
                        ) -> list[int] | None:
    """A read's candidate clusters, or None.

    Most shared k-mers first, then nearest in the embedding; with a single candidate,
    a random other cluster as the runner-up (what an unrelated strand scores).
    """
    clusters: dict[int, None] = {}  # insertion-ordered set
    for t in kmer_targets:
        if t >= 0 and target_list[t] != own and target_list[t] < limit:
            clusters[target_list[t]] = None
    extra = 0
    for c in near:
        if extra == EMBEDDING_CANDIDATES:
            break
        if c >= 0 and c != own and c < limit and c not in clusters:
            clusters[c] = None
            extra += 1
    if not clusters:
        return None
    if len(clusters) == 1:
        # No other candidate (a good embedding sends all neighbours to one strand).
        pool = [c for c in rng.choice(target_list, size=min(4, len(target_list)),
                                      replace=False).tolist()
                if c != own and c < limit and c not in clusters]
        if not pool:
            return None
        clusters[pool[0]] = None
    return list(clusters)
