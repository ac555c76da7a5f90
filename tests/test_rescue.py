"""The rescue's rule and candidates on real sequences (no model: k-mer candidates only)."""

import logging

import numpy as np
import pytest

import dnaembed.cluster.kmers as kmers_module
from dnaembed.cluster.kmers import MAX_K, kmer_length
from dnaembed.cluster.rescue import rescue_reads
from dnaembed.cluster.rescue_rule import (
    DEFAULT_SEARCH,
    MIN_MARGIN,
    NOISY_MAX_SIZE,
    NOISY_SEARCH,
    CandidateSearch,
    accepted,
    rescue_settings,
)
from dnaembed.cluster.units import UnitSequences
from dnaembed.encoding import decode_flat, encode_flat, reverse_complement
from dnaembed.io.bases import PackedBases
from dnaembed.io.strings import PackedStrings
from dnaembed.sim.channel import Channel, transmit

PRIMER = "ACGTCTAGACATATGCGCACTACAC"  # shared by every strand, as in the real set


def _strands(n: int, rng) -> list[str]:
    return [PRIMER + "".join(rng.choice(list("ACGT"), 100)) + reverse_complement(PRIMER)
            for _ in range(n)]


def _noisy(seqs: list[str], channel: Channel, rng) -> list[str]:
    out = transmit(*encode_flat(seqs), channel, rng)
    return decode_flat(out.codes, out.lengths)


def _no_neighbours(rows):
    rows = np.asarray(rows)
    return np.full((len(rows), 2), -1, np.int64), np.full((len(rows), 2), np.inf, np.float32)


def _rescue(clusters: list[list[str]], extra: list[str], *, max_size: int = 2,
            search: CandidateSearch = DEFAULT_SEARCH, rate: float = 0.3, runner=None,
            details: list | None = None, store=None, reversed_reads: tuple = ()):
    """Clusters of full-length reads, then one singleton per extra read: the rescue's result.
    ``store``: a read store class that holds the reads (as a partitioned run's units);
    ``reversed_reads``: reads that their clusters hold reverse-complemented."""
    seqs = [s for c in clusters for s in c] + extra
    labels = np.array([i for i, c in enumerate(clusters) for _ in c]
                      + list(range(len(clusters), len(clusters) + len(extra))))
    lengths = np.array([len(s) for s in seqs], np.float64)
    rc_seqs = [reverse_complement(s) for s in seqs]
    if store is not None:
        held = store()
        held.append(seqs)
        seqs = UnitSequences(held.finish(), np.arange(len(seqs)))
        rc_seqs = seqs.reversed()
    orientation = np.zeros(len(seqs), np.int8)
    orientation[list(reversed_reads)] = 1
    out = rescue_reads(seqs, rc_seqs, labels, orientation, lengths, np.ones(len(seqs), np.int64),
                       _no_neighbours, rate=rate, max_size=max_size, full_length=135, seed=0,
                       search=search, runner=runner, details=details)
    return out[0], len(seqs) - len(extra)


def _truncated_set(rng, count: int, truncated: int):
    """Strands of three clean reads, and noisy reads (~18% edits) that kept 60-90 of their
    strand's 150 bases: strands, clusters, the picked strands, the truncated reads."""
    strands = _strands(count, rng)
    clean = Channel(substitution=0.005, insertion=0.003, deletion=0.005)
    noisy = Channel(substitution=0.07, insertion=0.05, deletion=0.06)
    clusters = [_noisy([s] * 3, clean, rng) for s in strands]
    picks = rng.choice(len(strands), truncated, replace=False)
    cuts = rng.integers(60, 91, len(picks))
    return strands, clusters, picks, _noisy([strands[p][:c] for p, c in zip(picks, cuts)],
                                            noisy, rng)


def test_a_read_must_beat_its_runner_up_by_the_margin():
    # 10 edits against 10 + MIN_MARGIN - 1 is too close to call; against 10 + MIN_MARGIN
    # (and within 0.85 of it) it is not.
    assert not accepted(10, 10 + MIN_MARGIN - 1, 80, rate=0.3)
    assert accepted(10, 10 + MIN_MARGIN, 80, rate=0.3)
    assert not accepted(30, 35, 150, rate=0.3)  # 5 fewer, but over 0.85 of the runner-up


def test_a_read_between_two_strands_stays_alone():
    # Two strands that differ only after base 60: a 55-nt read of their common start
    # aligns equally well to both, so it joins neither.
    rng = np.random.default_rng(3)
    a = _strands(1, rng)[0]
    b = a[:60] + "".join(rng.choice(list("ACGT"), 90))
    clusters = [[a] * 3, [b] * 3] + [[s] * 3 for s in _strands(20, rng)]
    labels, n = _rescue(clusters, [a[:55]])
    assert labels[n] not in {labels[0], labels[3]}
    assert len(set(labels[:n].tolist())) == len(clusters)


def test_noisy_truncated_reads_find_their_strand_by_kmers():
    # Reads that kept 60-90 of 150 bases and carry ~18% edits (the real set's worst)
    # share few 12-mers with their strand; the rescue still finds it among 150 strands
    # and puts them nowhere else.
    strands, clusters, picks, extra = _truncated_set(np.random.default_rng(7), 150, 60)
    labels, n = _rescue(clusters, extra)
    home = labels[np.arange(len(strands)) * 3]
    placed = labels[n:] == home[picks]
    wrong = (labels[n:] < len(strands)) & ~placed
    assert placed.mean() >= 0.8
    assert not wrong.any()


def test_truncated_reads_before_their_strand_leave_it_a_full_length_representative():
    # The truncated reads come first in the input: each rescued one was its singleton's
    # representative, and took over its new cluster's (a tie, won by the earlier read).
    strands, clusters, picks, extra = _truncated_set(np.random.default_rng(7), 150, 60)
    seqs = extra + [s for c in clusters for s in c]
    n = len(extra)
    labels = np.array(list(range(n)) + [n + i for i, c in enumerate(clusters) for _ in c])
    lengths = np.array([len(s) for s in seqs], np.float64)
    labels, _, reps, moved = rescue_reads(
        seqs, [reverse_complement(s) for s in seqs], labels, np.zeros(len(seqs), np.int8),
        lengths, np.ones(len(seqs), np.int64), _no_neighbours, rate=0.3, max_size=2,
        full_length=135, seed=0)
    assert moved >= 40
    has_full = np.bincount(labels, weights=lengths >= 135, minlength=len(reps)) > 0
    assert (lengths[reps[has_full]] >= 135).all()


def test_the_kmers_grow_with_the_queries_that_would_hold_one_by_chance():
    # 7,150 queries of 140 k-mers (10^6 reads) keep 11-mers; 22,000 (3 x 10^6) hold each
    # 11-mer ~1.5 times by chance and get 12-mers; never past MAX_K, never below the base.
    assert kmer_length(7_150, 140, 11, both=True) == 11
    assert kmer_length(22_000, 140, 11, both=True) == 12
    assert kmer_length(22_000, 140, 11, both=False) == 11
    assert kmer_length(10**9, 140, 11, both=True) == MAX_K
    assert kmer_length(1, 140, 11, both=True) == 11
    assert DEFAULT_SEARCH.k_for(22_000, 150.0, True) == 12
    assert NOISY_SEARCH.k_for(22_000, 150.0, True) == NOISY_SEARCH.k  # never grows


def test_only_full_length_reads_get_longer_kmers(monkeypatch, caplog):
    # A large input's pass 1 (full-length reads of small clusters; here forced: any
    # query holds too many chance k-mers) uses 12-mers and still finds every strand;
    # pass 2's truncated reads (~18% edits), whose strands share few k-mers with
    # them, keep 11-mers and are placed as without the growth.
    monkeypatch.setattr(kmers_module, "CHANCE_SIDES", 1e-9)
    rng = np.random.default_rng(7)
    strands, clusters, picks, extra = _truncated_set(rng, 150, 60)
    full = _noisy([strands[p] for p in picks[:20]], Channel(0.02, 0.01, 0.01), rng)
    log = logging.getLogger("dnaembed")  # the CLI's set-up stops it reaching the root
    log.addHandler(caplog.handler)
    try:
        with caplog.at_level("INFO", logger="dnaembed"):
            labels, n = _rescue(clusters, extra + full)
    finally:
        log.removeHandler(caplog.handler)
    assert "20 reads against 170 clusters; 12-mers," in caplog.text
    assert "60 reads against 150 clusters; 11-mers," in caplog.text
    home = labels[np.arange(len(strands)) * 3]
    assert (labels[n + len(extra):] == home[picks[:20]]).all()
    placed = labels[n : n + len(extra)] == home[picks]
    assert placed.mean() >= 0.8
    assert not ((labels[n : n + len(extra)] < len(strands)) & ~placed).any()


def test_the_rescue_in_small_tasks_on_two_threads_is_the_rescue_here(monkeypatch):
    # The k-mer search by ranges of a few clusters, profiles and alignments a few clusters
    # and reads per task, on two threads: every read examined scores and moves as on one
    # thread in whole passes.
    from dnaembed.cluster import kmer_tasks, rescue_tasks
    from dnaembed.execute.inline import InlineExecutor

    strands, clusters, _, extra = _truncated_set(np.random.default_rng(7), 80, 40)
    whole: list = []
    want, n = _rescue(clusters, extra, details=whole)
    for module, name, size in ((kmer_tasks, "RANGE_TARGETS", 7),
                               (kmer_tasks, "TARGETS_PER_QUERY", 0),
                               (rescue_tasks, "PROFILES_PER_TASK", 5),
                               (rescue_tasks, "READS_PER_TASK", 3)):
        monkeypatch.setattr(module, name, size)
    monkeypatch.setattr(kmer_tasks, "TASKS_CPU_FACTOR", 0)  # the k-mer search as tasks too
    tasks: list = []
    with InlineExecutor(2) as runner:
        # As tasks, the way a runner of worker processes gets them (the same plain data).
        runner.shares_interpreter = False
        got, _ = _rescue(clusters, extra, runner=runner, details=tasks)
        assert {"counting k-mers", "k-mer votes", "cluster profiles",
                "rescue alignments"} <= set(runner.traffic.cpu)
    assert np.array_equal(got, want) and tasks == whole
    assert len(whole) >= 40 and (want[n:] < len(strands)).sum() >= 30


@pytest.mark.parametrize("store", [PackedStrings, PackedBases])
def test_the_rescue_of_reads_in_a_store_is_that_of_the_strings(store):
    # The k-mer search's threads code the cluster's reads from the store's blocks (one
    # byte or two bits per base, reverse-complemented as their clusters hold them), not
    # from strings: every read examined scores and moves as with the reads as strings.
    from dnaembed.execute.inline import InlineExecutor

    _, clusters, _, extra = _truncated_set(np.random.default_rng(11), 60, 30)
    # Every cluster holds its second read reverse-complemented; one read has an N (kept
    # whole, one byte per base, by PackedBases).
    for cluster in clusters:
        cluster[1] = reverse_complement(cluster[1])
    clusters[5][2] = clusters[5][2][:40] + "N" + clusters[5][2][41:]
    reversed_reads = tuple(3 * c + 1 for c in range(len(clusters)))
    whole: list = []
    want, _ = _rescue(clusters, extra, details=whole, reversed_reads=reversed_reads)
    for threads in (1, 2):
        coded: list = []
        with InlineExecutor(threads) as runner:
            got, _ = _rescue(clusters, extra, details=coded, store=store, runner=runner,
                             reversed_reads=reversed_reads)
        assert np.array_equal(got, want) and coded == whole
    assert len(whole) >= 30 and (want[len(clusters) * 3 :] < len(clusters)).sum() >= 20


@pytest.mark.parametrize("store", [PackedStrings, PackedBases])
def test_the_kmer_index_of_reads_in_a_store_is_that_of_the_strings(store):
    # Clusters of three reads, each held in either orientation (one with an N), searched
    # by truncated noisy reads: the same top clusters, votes and orientations whether the
    # index codes the strings or the store's blocks, on one thread or two.
    from dnaembed.cluster.rescue_candidates import CentralMembers, member_kmers
    from dnaembed.execute.inline import InlineExecutor

    rng = np.random.default_rng(12)
    _, clusters, _, queries = _truncated_set(rng, 300, 40)
    seqs = [s for c in clusters for s in c]
    seqs[7] = seqs[7][:50] + "N" + seqs[7][51:]
    flips = rng.integers(0, 2, (len(clusters), 3)).astype(np.int8)
    held = [reverse_complement(s) if f else s for s, f in zip(seqs, flips.ravel())]
    members = CentralMembers(np.arange(len(seqs)).reshape(-1, 3), flips)
    packed = store()
    packed.append(held)
    units = UnitSequences(packed.finish(), np.arange(len(held)))
    found = []
    for reads, rc_reads, threads in ((held, [reverse_complement(s) for s in held], 1),
                                     (units, units.reversed(), 1), (units, units.reversed(), 2)):
        index = member_kmers(reads, rc_reads, members, np.arange(len(clusters)), 3, 11)
        index.block = 64  # several blocks
        with InlineExecutor(threads) as runner:
            found.append(index.candidates(queries, 5, runner=runner))
    for targets, flip in found[1:]:
        assert np.array_equal(targets, found[0][0]) and np.array_equal(flip, found[0][1])
    assert (found[0][0][:, 0] >= 0).all() and found[0][1].any()


def test_noisy_samples_get_the_wider_search():
    assert rescue_settings(0.12, 2) == (NOISY_MAX_SIZE, NOISY_SEARCH)
    assert rescue_settings(0.01, 2) == (2, CandidateSearch())
    assert rescue_settings(None, 2) == (2, CandidateSearch())


def test_noisy_reads_and_pieces_join_their_strand_with_the_wider_search():
    # 12% errors per read (nanopore-hard): 150 strands of 6 reads, and 40 reads of some of
    # them left alone. The wider search (10-mers of five reads) finds more of their strands
    # than the default one, and puts none elsewhere.
    rng = np.random.default_rng(11)
    strands = _strands(150, rng)
    hard = Channel(substitution=0.04, insertion=0.038, deletion=0.038)
    clusters = [_noisy([s] * 6, hard, rng) for s in strands]
    picks = rng.choice(len(strands), 40, replace=False)
    extra = _noisy([strands[p] for p in picks.tolist()], hard, rng)
    placed = {}
    for name, search in (("default", CandidateSearch()), ("noisy", NOISY_SEARCH)):
        labels, n = _rescue(clusters, extra, search=search, rate=0.4)
        home = labels[np.arange(len(strands)) * 6]
        placed[name] = labels[n:] == home[picks]
        assert not ((labels[n:] < len(strands)) & ~placed[name]).any()
    assert placed["noisy"].mean() >= 0.9 and placed["noisy"].sum() > placed["default"].sum()


def test_pieces_of_a_few_reads_join_their_strand_up_to_max_size():
    # Strands of 8 reads, each cut into a piece of 5 and a piece of 3 (as round 2 leaves
    # them in a noisy sample): with max_size 3 the smaller piece joins the larger one.
    rng = np.random.default_rng(12)
    strands = _strands(40, rng)
    channel = Channel(substitution=0.02, insertion=0.02, deletion=0.02)
    reads = [_noisy([s] * 8, channel, rng) for s in strands]
    clusters = [r[:5] for r in reads] + [r[5:] for r in reads]
    for max_size, joined in ((2, False), (3, True)):
        labels, _ = _rescue(clusters, [], max_size=max_size)
        big, small = labels[: 5 * 40].reshape(40, 5), labels[5 * 40 :].reshape(40, 3)
        assert (big == big[:, :1]).all()  # the larger pieces stay whole
        assert np.array_equal(small == big[:, :1], np.full((40, 3), joined))


@pytest.mark.parametrize("seed", range(4))
def test_central_members_are_each_clusters_representative_then_most_central(seed):
    # Per cluster: its representative (orientation 0: the others' are relative to it), then
    # its most central full-length reads other than it (ties: the earliest), at most count
    # in all, each with its orientation.
    from dnaembed.cluster.rescue_candidates import central_members

    rng = np.random.default_rng(seed)
    n, clusters, count = 300, 40, 4
    labels = np.concatenate([np.arange(clusters), rng.integers(0, clusters, n - clusters)])
    centrality = np.round(rng.random(n) * 3)
    lengths = rng.integers(80, 101, n)
    orientation = rng.integers(0, 2, n).astype(np.int8)
    reps = np.array([int(rng.choice(np.flatnonzero(labels == c))) for c in range(clusters)])
    members = central_members(labels, orientation, centrality, lengths, reps, 90, count)
    for c in range(clusters):
        others = [i for i in range(n) if labels[i] == c and lengths[i] >= 90 and i != reps[c]]
        best = sorted(others, key=lambda i: (-centrality[i], i))[: count - 1]
        assert members[c] == [(int(reps[c]), 0)] + [
            (i, int(orientation[i])) for i in best]
