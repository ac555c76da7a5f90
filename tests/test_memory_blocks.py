"""Work done in blocks to bound memory gives what the whole gives, bit for bit.

The query tasks check their queries' candidates a block at a time, the k-mer
index streams its targets a block at a time through a block of queries, the
exact check calls the C kernel a slice of pairs at a time: each block size is a
module constant, set here to a tiny and to a huge value on the same real input.
"""

from __future__ import annotations

import numpy as np
import pytest

import dnaembed.cluster.candidates as candidates_module
import dnaembed.cluster.kmers as kmers_module
import dnaembed.cluster.partition_tasks as tasks_module
from dnaembed.cluster.candidates import CandidatePairs, levenshtein_pairs
from dnaembed.cluster.kmers import KmerIndex
from dnaembed.cluster.neighbour_lists import NeighbourLists
from dnaembed.cluster.partition_tasks import QueryTask, query_partition
from dnaembed.cluster.rounds import PairCollector, distinct_pairs
from dnaembed.cluster.threshold import Threshold
from dnaembed.encoding import reverse_complement
from dnaembed.io.bases import ReadBlock
from dnaembed.io.spill import SpillArray

BASES = np.array(list("ACGT"))


def _mutated(rng, seq: str, edits: int) -> str:
    s = list(seq)
    for pos in rng.integers(0, len(s), edits).tolist():
        s[pos] = str(rng.choice(BASES))
    return "".join(s)


def _reads(rng, strands: int, copies: int, length: int = 60) -> list[str]:
    bases = ["".join(rng.choice(BASES, length)) for _ in range(strands)]
    return [_mutated(rng, b, 2) for b in bases for _ in range(copies)]


def _packed(seqs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    data = np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8).copy()
    return data, np.array([len(s) for s in seqs], dtype=np.int32)


def _query_task(rng) -> QueryTask:
    """Members and queries (as read, reverse-complemented) of one strand set,
    with vectors that place copies of a strand together."""
    # Copies of a strand sequenced either way: a reverse-complemented query finds the others.
    reads = [reverse_complement(r) if i % 2 else r
             for i, r in enumerate(_reads(rng, strands=40, copies=5))]
    centres = rng.normal(size=(40, 8))
    vectors = (np.repeat(centres, 5, axis=0) + 0.05 * rng.normal(size=(200, 8)))
    members = np.arange(0, 200, 2, dtype=np.int64)  # every other read is a member
    queries = np.concatenate([np.arange(200), np.arange(0, 200, 3)]).astype(np.int64)
    reverse = np.zeros(len(queries), dtype=bool)
    reverse[200:] = True
    return QueryTask(members, vectors[members].astype(np.float16),
                     ReadBlock(*_packed([reads[m] for m in members.tolist()])), queries,
                     vectors[queries].astype(np.float16),
                     ReadBlock(*_packed([reads[u] for u in queries.tolist()])), reverse,
                     Threshold(12, "user", reference_length=60.0), neighbours=6)


def test_query_task_in_check_blocks_gives_the_same_pairs(monkeypatch):
    task = _query_task(np.random.default_rng(3))
    monkeypatch.setattr(tasks_module, "QUERY_CHECK_BLOCK", 1 << 20)
    whole = query_partition(task)
    monkeypatch.setattr(tasks_module, "QUERY_CHECK_BLOCK", 7)
    blocks = query_partition(task)
    assert len(whole.lo) > 50 and whole.parity.any()
    n = 200
    assert all(np.array_equal(a, b) for a, b in zip(
        distinct_pairs(whole.lo, whole.hi, whole.parity, whole.dist, n=n),
        distinct_pairs(blocks.lo, blocks.hi, blocks.parity, blocks.dist, n=n)))
    assert whole.candidates == blocks.candidates


def test_kmer_votes_in_blocks_give_the_same_candidates(monkeypatch):
    rng = np.random.default_rng(5)
    targets = _reads(rng, strands=300, copies=1, length=50)
    picks = rng.integers(0, len(targets), 400)
    queries = [reverse_complement(targets[i][5:45]) if j % 2 else _mutated(rng, targets[i], 3)
               for j, i in enumerate(picks.tolist())]
    found, flips = KmerIndex(targets, both=True, k=10).candidates(queries, 3)
    monkeypatch.setattr(kmers_module, "TARGET_BLOCK", 7)
    monkeypatch.setattr(kmers_module, "QUERY_BLOCK", 13)
    found_blocks, flips_blocks = KmerIndex(targets, both=True, k=10).candidates(queries, 3)
    assert (found[:, 0] == picks).mean() > 0.9
    assert np.array_equal(found, found_blocks) and np.array_equal(flips, flips_blocks)


@pytest.mark.parametrize("n", [1_000, 2**30])  # packed as one number, and not
def test_pairs_collected_task_by_task_are_each_pair_once(n):
    rng = np.random.default_rng(8)
    lo = rng.integers(0, 900, 3_000)
    hi = lo + rng.integers(1, 50, 3_000)
    parity = rng.integers(0, 2, 3_000).astype(np.int8)
    dist = (lo * 7 + hi + parity) % 30  # one distance per pair, wherever it is found
    pairs = PairCollector(n, 29)
    assert pairs.packed == (n == 1_000)
    for part in np.array_split(np.arange(3_000), 7):  # every pair found in two tasks
        pairs.add(lo[part], hi[part], parity[part], dist[part])
        pairs.add(lo[part[::-1]], hi[part[::-1]], parity[part[::-1]], dist[part[::-1]])
    got = pairs.distinct()
    want = sorted(set(zip(lo.tolist(), hi.tolist(), parity.tolist(), dist.tolist())))
    assert list(zip(*(a.tolist() for a in got))) == want
    with pytest.raises(ValueError, match="above the bound"):
        pairs.add(lo[:1], hi[:1], parity[:1], np.array([30]))


class _CountingTargets(list):
    """Targets that count how often each is read."""

    def __init__(self, seqs):
        super().__init__(seqs)
        self.reads = np.zeros(len(seqs), dtype=np.int64)

    def __getitem__(self, i):
        self.reads[i] += 1
        return super().__getitem__(i)


@pytest.mark.parametrize(("kept_bytes", "passes"), [(kmers_module.KEPT_BYTES, 1), (0, 2)])
def test_kmer_index_reads_its_targets_twice_whatever_the_number_of_queries(
        kept_bytes, passes, monkeypatch):
    # Both grow with the input: reading the targets once per block of queries would cost
    # the square of it (the rescue at 10^6 reads). Once when the first pass keeps their
    # k-mers for the vote pass, twice when it cannot.
    monkeypatch.setattr(kmers_module, "KEPT_BYTES", kept_bytes)
    rng = np.random.default_rng(6)
    targets = _CountingTargets(_reads(rng, strands=50, copies=1, length=40))
    queries = [_mutated(rng, targets[i % 50], 2) for i in range(3 * 4_096 + 1)]
    targets.reads[:] = 0
    found, _ = KmerIndex(targets, both=True, k=10).candidates(queries, 2)
    assert (found[:, 0] == np.arange(len(queries)) % 50).mean() > 0.95
    assert targets.reads.tolist() == [passes] * 50


def test_exact_check_in_slices_gives_the_same_distances(monkeypatch):
    rng = np.random.default_rng(7)
    seqs = _reads(rng, strands=30, copies=4)
    rc = [reverse_complement(s) for s in seqs]
    lo = rng.integers(0, 119, 500)
    pairs = CandidatePairs(lo, lo + 1 + rng.integers(0, 119 - lo), rng.integers(0, 2, 500)
                           .astype(np.int8), np.zeros(500, np.float32))
    monkeypatch.setattr(candidates_module, "CHECK_BATCH", 1 << 20)
    whole = levenshtein_pairs(seqs, rc, pairs, cutoff=20)
    monkeypatch.setattr(candidates_module, "CHECK_BATCH", 17)
    assert np.array_equal(whole, levenshtein_pairs(seqs, rc, pairs, cutoff=20))
    assert (whole <= 4).any() and (whole == 21).any()


def test_neighbour_lists_keep_unit_ids_in_int32():
    lists = NeighbourLists(np.array([3, 8, 11]), k=2, both=True)
    lists.put(np.array([8, 3]), np.array([True, False]), np.array([[5, -1], [9, 2]]),
              np.array([[0.5, np.inf], [1.0, 2.0]], dtype=np.float32))
    indices, distances = lists(np.array([3, 8]))
    assert indices.dtype == np.int32
    assert indices.tolist() == [[9, 2, -1, -1], [-1, -1, 5, -1]]
    assert distances[1, 2] == pytest.approx(0.5)
    # A row without lists (a part the split made): none, at an infinite distance.
    indices, distances = lists(np.array([5, 8]))
    assert indices.tolist() == [[-1, -1, -1, -1], [-1, -1, 5, -1]]
    assert np.isinf(distances[0]).all() and distances[1, 2] == pytest.approx(0.5)
    empty = NeighbourLists(np.zeros(0, np.int64), k=2, both=False)
    assert empty(np.array([1]))[0].tolist() == [[-1, -1]]


def test_closed_in_memory_array_lets_its_rows_go():
    array = SpillArray((4,), np.float16)
    array.append(np.ones((1000, 4)))
    array.finish()
    assert array.take(np.array([0, 999])).shape == (2, 4)
    array.close()
    assert array._buffer == bytearray()


def _resident_file_bytes() -> int:
    """This process's resident pages of mapped files (Linux), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) << 10
    pytest.skip("no RssFile in /proc/self/status")


def test_a_spilled_array_keeps_its_pages_resident_only_within_resident_up_to(tmp_path):
    # 64 MiB of rows, read back a partition at a time, each partition's rows scattered
    # over the whole file (as round 1 reads its members' vectors).
    rows, width = 1 << 16, 512
    array = SpillArray((width,), np.float16, spill_to=tmp_path / "vectors.f16")
    for start in range(0, rows, 4096):
        array.append(np.full((4096, width), start // 4096, np.float16))
    array.finish()
    parts = np.array_split(np.random.default_rng(5).permutation(rows), 32)

    def read_every_part() -> int:
        """Resident bytes of mapped files, after the reads, beyond those before."""
        before = _resident_file_bytes()
        for part in parts:
            assert (array.take(np.sort(part))[:, 0] == np.sort(part) // 4096).all()
        return _resident_file_bytes() - before

    assert read_every_part() < 16 << 20  # given back after every 8 MB (RELEASE_BYTES)
    with array.resident_up_to(16 << 20):  # less than the file: given back as it grows
        assert read_every_part() < 32 << 20
    with array.resident_up_to(array.nbytes):  # the whole file: held in memory (below)
        assert read_every_part() < 16 << 20  # so no page of the mapping stays
    assert read_every_part() < 16 << 20  # the mapping again, released as before
    array.close()


def test_a_spilled_array_allowed_all_its_bytes_reads_them_from_a_copy(tmp_path):
    # Within resident_up_to(the whole file) the rows come from a copy made at its start;
    # before and after, from the mapping: bytes written to the file meanwhile show there.
    path = tmp_path / "v.f32"
    array = SpillArray((4,), np.float32, spill_to=path)
    array.append(np.arange(40, dtype=np.float32).reshape(10, 4))
    array.finish()
    rows = np.array([0, 9])
    with array.resident_up_to(array.nbytes):
        with open(path, "r+b") as file:
            file.write(np.full(40, -1, np.float32).tobytes())
        assert array.take(rows).tolist() == [[0, 1, 2, 3], [36, 37, 38, 39]]
    assert array.take(rows).tolist() == [[-1] * 4, [-1] * 4]
    with array.resident_up_to(array.nbytes - 1):  # less than the file: the mapping
        with open(path, "r+b") as file:
            file.write(np.full(40, -2, np.float32).tobytes())
        assert array.take(rows).tolist() == [[-2] * 4, [-2] * 4]
    array.close()


def test_an_array_closed_while_held_in_memory_closes_its_mapping(tmp_path):
    array = SpillArray((4,), np.float32, spill_to=tmp_path / "v.f32")
    array.append(np.arange(40, dtype=np.float32).reshape(10, 4))
    array.finish()
    mapping = array._mapped.map
    with array.resident_up_to(array.nbytes):
        assert array.take(np.array([9]))[0].tolist() == [36, 37, 38, 39]
        array.close()
    assert mapping.closed


def test_a_memory_budget_lets_round_1_keep_its_spilled_vectors_resident():
    from dnaembed.cluster.budget import MB, ROUND1_RESIDENT_PER_READ, plan_work

    work = plan_work(2048 * MB, None, units=3_000_000)
    assert work.plan.spill_vectors
    assert work.plan.resident_vectors == ROUND1_RESIDENT_PER_READ * 3_000_000
    assert "search vectors 366.2 MB (float16) spilled to the tmpdir (held in memory in " \
           "round 1)" in work.describe()
    assert plan_work(None, None, units=3_000_000).plan.resident_vectors == 0
    work.plan.resident_vectors = 100 * MB  # a plan that lets fewer stay: as many pages
    assert "search vectors 366.2 MB (float16) spilled to the tmpdir (up to 100.0 MB of them " \
           "resident in round 1)" in work.describe()


def test_a_budget_leaves_the_reads_what_the_tasks_do_not_take():
    """At 3 x 10^6 reads under 2G the chunks (16,384 reads) take less than the tasks'
    share: the rest holds the sequences at two bits per base (38 bytes a read at 150 nt)."""
    from dnaembed.cluster.budget import MB, PROCESS_BASE, READS_SHARE, plan_work
    from dnaembed.execute.inline import InlineExecutor

    with InlineExecutor(2) as runner:  # two tasks at a time, as on a 2-core machine
        work = plan_work(2048 * MB, runner, units=3_000_000)
    assert work.plan.chunk_size == 16_384 and work.plan.spill_vectors
    assert work.reads_in_memory > 38 * 3_000_000
    assert "reads in memory up to 139 MB (the sequences at two bits per base)" in work.describe()
    # While streaming, the reads not yet counted, they get their share only.
    streaming = plan_work(2048 * MB, None)
    assert streaming.reads_in_memory == int(READS_SHARE * (2048 * MB - PROCESS_BASE))
    # Little room: the chunks are cut to fit the tasks' share, and the reads get theirs.
    with InlineExecutor(2) as runner:
        tight = plan_work(900 * MB, runner, units=1_000_000)
    assert tight.plan.chunk_size < 16_384 and tight.reads_in_memory < 38 * 1_000_000


def test_a_budget_counts_the_distances_between_the_cells():
    """Assigning keeps the cells' distances to one another (cells squared of them) in every
    process: 2 x 10^6 reads in cells of 256 make 7,813 cells, ~0.7 GB resident each."""
    from dnaembed.cluster.budget import MB, plan_work
    from dnaembed.errors import DnaembedError

    with pytest.raises(DnaembedError) as refused:
        plan_work(2048 * MB, None, units=2_000_000, params={"partition_size": 256})
    message = str(refused.value)
    assert "1,863 MB for the distances between the 7,813 cells" in message, message
    assert "raise --partition-size" in message and "\n" not in message
    work = plan_work(2048 * MB, None, units=2_000_000, params={"partition_size": 4096})
    assert work.plan.partition_size == 4096 and work.reads_in_memory > 0
