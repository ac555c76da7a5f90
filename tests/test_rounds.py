"""The guarded linker and rounds 2.. of partitioned clustering: what is linked, which
clusters a round searches for, and the rescue's lists."""

from __future__ import annotations

import numpy as np
import pytest

import dnaembed.cluster.graph as graph
from dnaembed.cluster.candidates import CandidatePairs
from dnaembed.cluster.graph import _GuardedLinker
from dnaembed.cluster.neighbour_lists import nearest_of_lists
from dnaembed.cluster.partition_tasks import ListTask, list_partition
from dnaembed.cluster.rounds import PIECE_MIN_READS, pieces, rounds_over
from dnaembed.cluster.threshold import Threshold
from dnaembed.cluster.unionfind import ParityUnionFind
from dnaembed.cluster.units import UnitSequences
from dnaembed.encoding import reverse_complement
from dnaembed.io.bases import PackedBases
from dnaembed.io.strings import PackedStrings


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


def _mutated(rng, seq: str, edits: int) -> str:
    s = list(seq)
    for at in rng.integers(0, len(s), edits):
        s[at] = rng.choice(list("ACGT"))
    return "".join(s)


def test_rounds_stop_after_too_few_merges_or_when_the_next_is_expected_to_merge_too_few():
    # Round 2 alone: round 3 always follows, however few round 2 merged.
    assert not rounds_over([0], 1000, 0.001)
    # The last round merged at most 0.1% of 300,000 clusters (300).
    assert rounds_over([134_381, 300], 300_000, 0.001)
    assert not rounds_over([134_381, 301], 300_000, 0.001)
    # 3 x 10^6 reads: 5,182 then 708 merges; the next about 708^2 / 5,182 = 97 <= 300.
    assert rounds_over([134_381, 5_182, 708], 300_219, 0.001)
    # Merges falling slowly: the next would merge about 640 > 300, so go on.
    assert not rounds_over([134_381, 1_000, 800], 300_219, 0.001)
    # Round 2 is no guide to the decay of later rounds (it searched for every cluster).
    assert not rounds_over([134_381, 5_182], 305_401, 0.001)
    # until 0: only a round that merged nothing stops them.
    assert not rounds_over([10, 5, 1], 1000, 0.0)
    assert rounds_over([10, 5, 0], 1000, 0.0)


@pytest.mark.parametrize("block", [1, 7, 1000])
@pytest.mark.parametrize("store", [None, PackedStrings, PackedBases])
def test_pairs_dropped_a_block_at_a_time_link_as_one_by_one(monkeypatch, block, store):
    # Strands of a few reads each, pairs within and between (some refused by the guard):
    # dropping the pairs whose reads already share a root must change nothing. From a
    # read store, the reads the guard compares are fetched a block at a time: the same.
    rng = np.random.default_rng(1)
    seqs = [_mutated(rng, "".join(rng.choice(list("ACGT"), 60)), 0) for _ in range(12)]
    reads = [_mutated(rng, seqs[i // 5], 3) for i in range(60)]
    rc = [reverse_complement(s) for s in reads]
    lo, hi = np.triu_indices(len(reads), 1)
    pick = rng.random(len(lo)) < 0.3
    lo, hi = lo[pick], hi[pick]
    dist = rng.integers(0, 20, len(lo)).astype(np.int32)
    parity = rng.integers(0, 2, len(lo)).astype(np.int8)
    edges = CandidatePairs(lo, hi, parity, np.zeros(len(lo), np.float32))
    weights = rng.integers(1, 3, len(reads)).astype(np.float64)
    degree = rng.random(len(reads))
    stored = reads
    if store is not None:
        packed = store()
        packed.append(reads[::-1])
        packed.finish()
        stored = UnitSequences(packed, np.arange(len(reads))[::-1].copy())
        assert stored.take(np.arange(len(reads))) == reads

    def linker(seqs, rc_seqs):
        return _GuardedLinker(seqs, rc_seqs, degree, weights,
                              Threshold(max_dist=8, source="user", reference_length=60), 2.0,
                              guard=True)

    monkeypatch.setattr(graph, "LINK_BLOCK", block)
    in_blocks = linker(stored, stored.reversed() if store is not None else rc)
    in_blocks.link(edges, dist)
    one_by_one = linker(reads, rc)
    order = np.lexsort((hi, lo, dist))
    one_by_one._link_in_order(lo[order].tolist(), hi[order].tolist(), parity[order].tolist(),
                              {})
    assert in_blocks.refusals > 0 and in_blocks.merges > 10
    assert (in_blocks.merges, in_blocks.refusals) == (one_by_one.merges, one_by_one.refusals)
    for a, b in zip(in_blocks.uf.labels(), one_by_one.uf.labels()):
        assert np.array_equal(a, b)
    assert list(in_blocks.rep) == list(one_by_one.rep)
    # What a block fetches: the representatives of its pairs' clusters, their reads.
    roots = in_blocks.uf.roots
    fetched = in_blocks._representatives(roots(lo), roots(hi), lo, hi)
    assert (len(fetched) > 0) == (store is not None)
    assert all(stored[read] == seq for read, seq in fetched.items())
    assert set(fetched) <= set(np.frombuffer(in_blocks.rep, np.int32)[roots(lo)].tolist()
                               + np.frombuffer(in_blocks.rep, np.int32)[roots(hi)].tolist())


def test_linked_reads_keep_their_orientation_relative_to_their_cluster():
    # Strands read either way round, every pair within a strand with its true parity, in
    # a random distance order: each strand is one cluster, and each read's parity relative
    # to its root is its orientation against the root's, whichever reads the links pass
    # through (roots found inline or by find, paths of any length).
    rng = np.random.default_rng(3)
    strands = ["".join(rng.choice(list("ACGT"), 60)) for _ in range(12)]
    strand = np.repeat(np.arange(12), 6)
    flipped = rng.integers(0, 2, len(strand))
    reads = [_mutated(rng, strands[s], 2) for s in strand]
    reads = [reverse_complement(r) if f else r for r, f in zip(reads, flipped)]
    lo, hi = np.triu_indices(len(reads), 1)
    within = strand[lo] == strand[hi]
    lo, hi = lo[within], hi[within]
    parity = (flipped[lo] ^ flipped[hi]).astype(np.int8)
    linker = _GuardedLinker(reads, [reverse_complement(r) for r in reads],
                            np.zeros(len(reads)), np.ones(len(reads)),
                            Threshold(max_dist=8, source="user", reference_length=60), 2.0,
                            guard=True)
    linker.link(CandidatePairs(lo, hi, parity, np.zeros(len(lo), np.float32)),
                rng.integers(0, 9, len(lo)).astype(np.int32))
    root, relative = linker.uf.labels()
    assert linker.merges == len(reads) - 12 and linker.refusals == 0
    assert np.array_equal(strand[root], strand)
    assert np.array_equal(relative, flipped ^ flipped[root])
    assert max(len(np.unique(root[strand == s])) for s in range(12)) == 1


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_kruskal_order_is_lexsorts_whether_or_not_the_pairs_come_sorted(dtype):
    # Pairs sorted by (lo, hi), with repeats (both parities of one pair), take the fast
    # path; shuffled, the general one; distances past 16 bits or negative, a wider sort.
    rng = np.random.default_rng(2)
    lo = np.sort(rng.integers(0, 50, 400))
    hi = lo + rng.integers(1, 5, 400)
    by_pair = np.lexsort((hi, lo))
    lo, hi = lo[by_pair], hi[by_pair]
    for scale in (1, 40_000, -1):
        dist = (rng.integers(0, 6, 400) * scale).astype(dtype)
        shuffled = rng.permutation(400)
        for pick in (np.arange(400), shuffled):
            expected = np.lexsort((hi[pick], lo[pick], dist[pick]))
            assert np.array_equal(graph.kruskal_order(lo[pick], hi[pick], dist[pick]), expected)
    assert graph.kruskal_order(lo[:0], hi[:0], np.zeros(0, dtype)).tolist() == []


def test_nearest_of_lists_sorts_each_query_by_distance_then_unit():
    # Lists with many equal distances, missing entries, zeros of either sign and negative
    # distances (rounding), a query in several lists and one in none: each query's k
    # nearest of all its entries, by distance then unit.
    from types import SimpleNamespace

    rng = np.random.default_rng(4)
    count, k, width = 40, 5, 4
    found, rows = [], []
    for n in (0, 17, 30, 9):
        indices = rng.integers(0, 25, (n, width))
        distances = np.round(rng.random((n, width)) * 4).astype(np.float32)
        distances[rng.random((n, width)) < 0.1] = -0.0
        distances[rng.random((n, width)) < 0.05] = -1.5
        indices[rng.random((n, width)) < 0.15] = -1
        distances[indices < 0] = np.inf
        found.append(SimpleNamespace(indices=indices, distances=distances))
        rows.append(rng.integers(0, count - 1, n))  # the last query is in no list
    query_rows = np.concatenate(rows)
    indices, distances = nearest_of_lists(query_rows, found, count, k)
    entries = [(int(q), float(d) + 0.0, int(u)) for q, f in zip(
        query_rows.tolist(), [row for f in found for row in zip(f.indices, f.distances)])
        for u, d in zip(*f) if u >= 0]
    for q in range(count):
        want = sorted((d, u) for query, d, u in entries if query == q)[:k]
        got = [(float(d), int(u)) for d, u in zip(distances[q], indices[q]) if u >= 0]
        assert got == want
        assert (indices[q, len(want):] == -1).all() and np.isinf(distances[q, len(want):]).all()
    per_query = np.bincount([q for q, _, _ in entries], minlength=count)
    assert per_query.max() > k and per_query[-1] == 0  # some cut to k, one with none
    assert nearest_of_lists(query_rows[:0], [], 3, k)[0].tolist() == [[-1] * k] * 3


def test_union_find_labels_are_what_find_says_of_each_element():
    # The labels are computed over the whole array at once; find walks one element's path.
    rng = np.random.default_rng(11)
    uf = ParityUnionFind(5_000)
    for i, j, p in zip(rng.integers(0, 5_000, 4_500).tolist(),
                       rng.integers(0, 5_000, 4_500).tolist(),
                       rng.integers(0, 2, 4_500).tolist()):
        (ri, pi), (rj, pj) = uf.find(i), uf.find(j)
        if ri != rj:
            uf.union_roots(ri, rj, pi ^ p ^ pj)
    roots, parity = uf.labels()
    assert uf.roots(np.arange(5_000)).tolist() == roots.tolist()
    found = [uf.find(x) for x in range(5_000)]
    assert roots.tolist() == [r for r, _ in found]
    assert parity.tolist() == [p for _, p in found]
    assert len(set(roots.tolist())) < 2_000 and parity.any()  # deep trees, both parities


def test_the_rescues_lists_over_cells_are_the_nearest_members_of_all():
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(300, 8)).astype(np.float16)
    members = np.arange(0, 300, 2)  # unit ids; queries 0, 8 and 10 are members
    queries = np.array([0, 1, 5, 8, 10])
    reverse = np.array([False, False, False, False, True])
    cells = np.array_split(members, 4)  # every query searched in every cell
    found = [list_partition(ListTask(c, vectors[c], queries, reverse, vectors[queries], 6))
             for c in cells]
    assert all(f.indices.shape == (5, 6) for f in found)
    # A sixth query in no cell: no list.
    indices, distances = nearest_of_lists(np.tile(np.arange(5), 4), found, 6, 6)
    x, y = vectors[queries].astype(np.float32), vectors[members].astype(np.float32)
    d = ((x[:, None] - y[None]) ** 2).sum(axis=2)
    for i, unit in enumerate(queries.tolist()):
        nearest = members[np.argsort(d[i], kind="stable")].tolist()
        # A forward query is not its own neighbour; a reverse complement may be.
        expected = [m for m in nearest if reverse[i] or m != unit][:6]
        assert indices[i].tolist() == expected
        assert np.allclose(distances[i], np.sort(d[i][np.searchsorted(members, expected)]),
                           rtol=1e-3)
    assert 0 not in indices[0] and 8 not in indices[3] and indices[4, 0] == 10
    assert indices[5].tolist() == [-1] * 6 and np.isinf(distances[5]).all()
