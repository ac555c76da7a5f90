"""Consensus profiles and grouped k-mer votes of the rescue, on simulated reads."""

import Levenshtein
import numpy as np
import pytest

import dnaembed.cluster.kmers as kmers_module
from dnaembed.cluster.kmers import MAX_TARGETS_PER_KMER, KmerIndex, chance_cut
from dnaembed.cluster.profiles import ClusterProfiles, star_consensus
from dnaembed.encoding import decode_flat, encode_flat, reverse_complement
from dnaembed.sim.channel import Channel, transmit

BASES = list("ACGT")


def _noisy(seqs: list[str], channel: Channel, rng) -> list[str]:
    out = transmit(*encode_flat(seqs), channel, rng)
    return decode_flat(out.codes, out.lengths)


def test_consensus_outvotes_each_reads_own_errors():
    rng = np.random.default_rng(1)
    design = "".join(rng.choice(BASES, 150))
    # Disjoint errors: a substitution, a deletion and an insertion in three reads; each is
    # outvoted by the two others, whichever read the consensus starts from.
    a = design[:20] + ("A" if design[20] != "A" else "C") + design[21:]
    b = design[:70] + design[71:]
    c = design[:110] + "G" + design[110:]
    for ref, others in ((a, [b, c]), (b, [a, c]), (c, [a, b])):
        assert star_consensus(ref, others) == design
    # Nothing to outvote with a single other read.
    assert star_consensus(a, [b]) == a


def test_consensus_of_noisy_reads_is_closer_to_the_design():
    rng = np.random.default_rng(2)
    channel = Channel(substitution=0.01, insertion=0.01, deletion=0.01)
    closer = same = 0
    for _ in range(40):
        design = "".join(rng.choice(BASES, 150))
        reads = _noisy([design] * 5, channel, rng)
        consensus = star_consensus(reads[0], reads[1:])
        d_rep, d_cons = (Levenshtein.distance(x, design) for x in (reads[0], consensus))
        assert d_cons <= d_rep
        closer += d_cons < d_rep
        same += d_cons == 0
    assert closer >= 25 and same >= 20


def test_profiles_orient_reads_as_their_cluster():
    rng = np.random.default_rng(3)
    design = "".join(rng.choice(BASES, 120))
    reads = [design, reverse_complement(design), design]
    rc = [reverse_complement(s) for s in reads]
    profiles = ClusterProfiles(reads, rc, [[(0, 0), (1, 1), (2, 0)], [(1, 0)]])
    assert profiles(0) == [design]  # the second read, flipped, agrees with the others
    assert profiles(1) == [reads[1]]  # too few reads for a consensus: the reads themselves


def test_grouped_kmers_find_the_cluster_of_a_noisy_read():
    # 12% errors per read (nanopore-hard): a read shares few 10-mers with any one read of
    # its strand, more with five of them together.
    rng = np.random.default_rng(4)
    channel = Channel(substitution=0.04, insertion=0.04, deletion=0.04)
    designs = ["".join(rng.choice(BASES, 150)) for _ in range(300)]
    members = [_noisy([d] * 5, channel, rng) for d in designs]
    picks = rng.choice(len(designs), 80, replace=False)
    queries = _noisy([designs[p] for p in picks.tolist()], channel, rng)
    single = KmerIndex([m[0] for m in members], both=True, k=10)
    grouped = KmerIndex([r for m in members for r in m], both=True, k=10,
                        groups=np.repeat(np.arange(len(designs)), 5))
    hit_single = (single.candidates(queries, 1)[0][:, 0] == picks).mean()
    hit_grouped = (grouped.candidates(queries, 1)[0][:, 0] == picks).mean()
    assert hit_grouped >= 0.95 and hit_grouped > hit_single


def test_groups_of_single_reads_rank_as_the_reads():
    rng = np.random.default_rng(5)
    targets = ["".join(rng.choice(BASES, 80)) for _ in range(50)]
    queries = [t[10:70] for t in targets[::3]] + [reverse_complement(targets[4])]
    plain = KmerIndex(targets, both=True, k=11).candidates(queries, 3)
    grouped = KmerIndex(targets, both=True, k=11, groups=np.arange(50)).candidates(queries, 3)
    assert np.array_equal(plain[0], grouped[0]) and np.array_equal(plain[1], grouped[1])
    assert plain[0][-1, 0] == 4 and plain[1][-1, 0] == 1


def _brute_force_groups(targets, groups, queries, k, max_targets, top, min_votes=1):
    """Each query's ``top`` groups by distinct shared k-mers (at least ``min_votes``),
    counted directly."""
    def kmers(s):
        return {s[i : i + k] for i in range(len(s) - k + 1)}

    n_groups = max(groups) + 1
    held = [[set(), set()] for _ in range(n_groups)]
    for t, g in zip(targets, groups):
        held[g][0] |= kmers(t)
        held[g][1] |= kmers(reverse_complement(t))
    count: dict[str, int] = {}
    for fwd, rev in held:
        for x in fwd | rev:
            count[x] = count.get(x, 0) + 1
    out_t = np.full((len(queries), top), -1, np.int64)
    out_f = np.zeros((len(queries), top), np.int8)
    for q, query in enumerate(queries):
        mine = {x for x in kmers(query) if count.get(x, 0) <= max_targets}
        scored = []
        for g, (fwd, rev) in enumerate(held):
            votes = (len(mine & fwd), len(mine & rev))
            best = max(votes)
            if best >= max(min_votes, 1):
                scored.append((-best, g, int(votes[1] > votes[0])))
        for rank, (_, g, f) in enumerate(sorted(scored)[:top]):
            out_t[q, rank], out_f[q, rank] = g, f
    return out_t, out_f


def _random_groups(rng, count: int, large: tuple[int, int], queries: int):
    """Groups of 1-4 short random reads (group ``large[0]`` of ``large[1]``), random queries
    and reverse-complemented pieces of every ninth read."""
    sizes = rng.integers(1, 5, count).tolist()
    sizes[large[0]] = large[1]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    targets = ["".join(rng.choice(BASES, int(rng.integers(12, 30)))) for _ in groups]
    found = ["".join(rng.choice(BASES, int(rng.integers(8, 30)))) for _ in range(queries)]
    found += [reverse_complement(targets[i][2:20]) for i in range(0, len(targets), 9)]
    return groups, targets, found


@pytest.mark.parametrize(("block", "kept_bytes"), [(3, 0), (7, 3_000), (1_000, 1 << 20)])
def test_grouped_votes_match_a_direct_count(block, kept_bytes, monkeypatch):
    # Short k on short random reads: many shared and common k-mers, many ties. Groups of
    # 1-4 reads and one of 9 straddle blocks of 3 and 7 targets (and one larger than them);
    # the vote passes find the targets' k-mers kept from the first pass, some, or none.
    monkeypatch.setattr(kmers_module, "KEPT_BYTES", kept_bytes)
    groups, targets, queries = _random_groups(np.random.default_rng(6), 25, (11, 9), 40)
    index = KmerIndex(targets, both=True, k=4, max_targets=6, groups=groups, block=block)
    got = index.candidates(queries, 5)
    want = _brute_force_groups(targets, groups.tolist(), queries, 4, 6, 5)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert index.common().sum() > 0 and (got[0] >= 0).sum() > 100
    # Groups sharing fewer k-mers than asked for are not candidates.
    got = index.candidates(queries, 5, min_votes=3)
    want = _brute_force_groups(targets, groups.tolist(), queries, 4, 6, 5, min_votes=3)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert 0 < (got[0] >= 0).sum() < (index.candidates(queries, 5)[0] >= 0).sum()


def test_the_chance_cut_follows_the_chance_level_not_the_primers():
    rng = np.random.default_rng(8)
    few = rng.poisson(1.0, 10_000)
    assert chance_cut(few) == MAX_TARGETS_PER_KMER == chance_cut(np.array([], np.int32))
    many = rng.poisson(25.0, 10_000)
    assert chance_cut(many) == 25 + 4 * 5
    # Shared primers: a few k-mers held by every target leave the cut where it was.
    assert chance_cut(np.concatenate([many, np.full(200, 50_000)])) == chance_cut(many)


def test_among_many_groups_the_cut_keeps_the_kmers_held_by_chance():
    # 6-mers among 1,000 groups of two 60 nt reads: each canonical 6-mer is held by about
    # 1,000 x 55 / 2,080 = 26 groups by chance, so a cut of 16 drops most of a read's k-mers;
    # a primer held by every group is dropped whatever the cut.
    rng = np.random.default_rng(9)
    primer = "ACGTTGCAAC"
    designs = [primer + "".join(rng.choice(BASES, 50)) for _ in range(1_000)]
    groups = np.repeat(np.arange(len(designs)), 2)
    channel = Channel(substitution=0.02, insertion=0.0, deletion=0.0)
    targets = _noisy([designs[g] for g in groups.tolist()], channel, rng)
    picks = rng.choice(len(designs), 100, replace=False)
    queries = _noisy([designs[p] for p in picks.tolist()], channel, rng)
    fixed = KmerIndex(targets, both=True, k=6, groups=groups, max_targets=16)
    chance = KmerIndex(targets, both=True, k=6, groups=groups)
    hit_fixed = (fixed.candidates(queries, 1)[0][:, 0] == picks).mean()
    found = chance.candidates(queries, 3)
    assert chance.cut > 16 and (found[0][:, 0] == picks).mean() >= 0.95 > hit_fixed
    want = _brute_force_groups(targets, groups.tolist(), queries, 6, chance.cut, 3)
    assert np.array_equal(found[0], want[0]) and np.array_equal(found[1], want[1])
    assert chance.common()[kmers_module.kmer_codes([primer[:6]], 6)[0]].all()


def test_group_numbers_must_keep_a_groups_targets_together():
    with pytest.raises(ValueError, match="non-decreasing"):
        KmerIndex(["ACGTACGT"] * 3, both=True, k=4, groups=np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="2 group numbers for 3 targets"):
        KmerIndex(["ACGTACGT"] * 3, both=True, k=4, groups=np.array([0, 1]))


@pytest.mark.parametrize(("range_targets", "per_query", "query_block", "threads"),
                         [(5, 0, 1_000, 2), (17, 0, 7, 1), (10_000, 0, 1_000, 2), (1, 1, 20, 2)])
def test_the_search_in_tasks_is_the_search_in_one_pass(range_targets, per_query, query_block,
                                                       threads, monkeypatch):
    # Ranges of a few targets, cut between groups (one group larger than a range), or of
    # a target per query of a block; the queries in blocks or not; on one thread or two:
    # the counts and the votes of the ranges add up to the one-pass search, which matches
    # a direct count at the cut the counts chose.
    from dnaembed.cluster import kmer_tasks
    from dnaembed.execute.inline import InlineExecutor

    monkeypatch.setattr(kmer_tasks, "RANGE_TARGETS", range_targets)
    monkeypatch.setattr(kmer_tasks, "TARGETS_PER_QUERY", per_query)
    monkeypatch.setattr(kmer_tasks, "TASKS_CPU_FACTOR", 0)  # tasks, even for one block
    groups, targets, queries = _random_groups(np.random.default_rng(10), 60, (7, 12), 50)
    one_pass = KmerIndex(targets, both=True, k=4, groups=groups)
    want = one_pass.candidates(queries, 5, min_votes=2)
    monkeypatch.setattr(kmers_module, "QUERY_BLOCK", query_block)
    index = KmerIndex(targets, both=True, k=4, groups=groups)
    q = len(queries)
    ranges = len(list(index.ranges(max(range_targets, per_query * min(q, query_block)))))
    assert ranges > 2 or range_targets > len(targets)
    with InlineExecutor(threads) as runner:
        runner.shares_interpreter = False  # as tasks, as worker processes get them
        got = kmer_tasks.search_in_tasks(index, queries, 5, runner, min_votes=2)
        assert runner.traffic.tasks == ranges * (1 + -(-q // query_block))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert index.cut == one_pass.cut > MAX_TARGETS_PER_KMER
    direct = _brute_force_groups(targets, groups.tolist(), queries, 4, index.cut, 5,
                                 min_votes=2)
    assert np.array_equal(got[0], direct[0]) and (got[0] >= 0).sum() > 100


@pytest.mark.parametrize(("workers", "threads", "query_block", "tasks"),
                         [(2, 1, 1_000, False), (3, 1, 1_000, True), (4, 2, 1_000, False),
                          (2, 1, 20, True)])
def test_a_search_of_one_block_runs_here_unless_the_workers_are_many(
        workers, threads, query_block, tasks, monkeypatch):
    # One block of queries on workers with at most twice this process's threads: the
    # one-pass search here, nothing sent; more workers, or queries in several blocks: the
    # tasks. The lists are the same either way.
    from dnaembed.cluster import kmer_tasks
    from dnaembed.execute.inline import InlineExecutor

    monkeypatch.setattr(kmer_tasks, "RANGE_TARGETS", 17)
    monkeypatch.setattr(kmers_module, "QUERY_BLOCK", query_block)
    groups, targets, queries = _random_groups(np.random.default_rng(12), 60, (7, 12), 50)
    want = KmerIndex(targets, both=True, k=4, groups=groups).candidates(queries, 5)
    index = KmerIndex(targets, both=True, k=4, groups=groups)
    with InlineExecutor(workers) as runner:
        runner.shares_interpreter = False  # as a runner of worker processes
        assert kmer_tasks.searched_here(runner, len(queries), threads) is not tasks
        got = kmer_tasks.search_in_tasks(index, queries, 5, runner, threads=threads)
        assert (runner.traffic.tasks > 0) is tasks
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert (got[0] >= 0).sum() > 100


@pytest.mark.parametrize(("block", "kept_bytes"), [(3, 0), (7, 3_000), (1_000, 1 << 20)])
def test_the_search_on_this_process_threads_is_the_search_on_one(block, kept_bytes,
                                                                   monkeypatch):
    # Blocks coded, counted and voted on two threads, merged here in order (votes dropped
    # on the threads against each query's last place as the block left): the same lists
    # as one thread, with blocks of a few targets, some kept from the first pass or none.
    from dnaembed.cluster import kmer_tasks
    from dnaembed.execute.inline import InlineExecutor

    monkeypatch.setattr(kmers_module, "KEPT_BYTES", kept_bytes)
    groups, targets, queries = _random_groups(np.random.default_rng(11), 60, (7, 12), 50)
    one = KmerIndex(targets, both=True, k=4, groups=groups, block=block)
    want = one.candidates(queries, 5, min_votes=2)
    index = KmerIndex(targets, both=True, k=4, groups=groups, block=block)
    with InlineExecutor(2) as runner:
        got = kmer_tasks.search_in_tasks(index, queries, 5, runner, min_votes=2)
        assert runner.traffic.tasks == 2 * len(list(index.ranges()))  # both passes' blocks
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert index.cut == one.cut > MAX_TARGETS_PER_KMER
    direct = _brute_force_groups(targets, groups.tolist(), queries, 4, index.cut, 5,
                                 min_votes=2)
    assert np.array_equal(got[0], direct[0]) and np.array_equal(got[1], direct[1])
    assert (got[0] >= 0).sum() > 100
