"""Rounds 2.. of partitioned clustering: which clusters a round searches for."""

from __future__ import annotations

import numpy as np

from dnaembed.cluster.candidates import CandidatePairs
from dnaembed.cluster.graph import _GuardedLinker
from dnaembed.cluster.rounds import PIECE_MIN_READS, pieces
from dnaembed.cluster.threshold import Threshold
from dnaembed.encoding import reverse_complement


def test_linker_clusters_are_its_roots_representatives_and_reads():
    rng = np.random.default_rng(0)
    seqs = ["".join(rng.choice(list("ACGT"), 30)) for _ in range(40)]
    weights = rng.integers(1, 4, len(seqs)).astype(np.float64)
    linker = _GuardedLinker(seqs, [reverse_complement(s) for s in seqs], np.zeros(len(seqs)),
                            weights, Threshold(max_dist=30, source="user"), 1.0, guard=False)
    lo = rng.integers(0, 40, 25)
    hi = rng.integers(0, 40, 25)
    keep = lo < hi
    lo, hi = lo[keep], hi[keep]
    linker.link(CandidatePairs(lo, hi, np.zeros(len(lo), np.int8), np.zeros(len(lo))),
                np.zeros(len(lo), np.int32))
    assert linker.merges > 5
    reps, reads = linker.clusters()
    roots = [linker.uf.find(x)[0] for x in range(len(seqs))]
    expected = sorted((linker.rep[r], weights[np.array(roots) == r].sum()) for r in set(roots))
    assert reps.tolist() == [r for r, _ in expected]
    assert reads.tolist() == [w for _, w in expected]
    assert (linker.representatives() == reps).all()


def test_pieces_are_clusters_of_at_most_half_the_median():
    weights = np.array([10, 9, 11, 3, 1, 5, 12, 4, 13])  # median 9
    assert pieces(weights).tolist() == [False, False, False, True, True, False, False, True,
                                        False]
    # However small the median, clusters of PIECE_MIN_READS reads are searched for.
    small = np.array([2, 2, 3, 1])
    assert pieces(small).tolist() == [w <= PIECE_MIN_READS for w in small]
    assert pieces(np.zeros(0)).tolist() == []
