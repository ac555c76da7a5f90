"""Partitioned clustering: its parts (cells, hashed dedupe, spilled stores, read store, k-mer
index) and the whole chain in one process, on real files and real models."""

from __future__ import annotations

import itertools
import pickle
import shutil

import numpy as np
import pytest
from conftest import assert_clean_error, run_cli
from scale_data import simulate_run, small_encoder

from dnaembed.cluster import partition
from dnaembed.cluster.dedupe import unique_reads
from dnaembed.cluster.dedupe_hashes import sequence_hashes, unique_by_hashes
from dnaembed.cluster.kmers import TARGET_BLOCK, KmerIndex, kmer_codes
from dnaembed.cluster.partition import (
    Partitioner,
    fit_partitioner,
    members_of_cells,
    pairs_sharing_a_partition,
)
from dnaembed.cluster.units import UnitSequences
from dnaembed.encoding import encode_flat, reverse_complement
from dnaembed.errors import InputError
from dnaembed.evaluate.clustering import evaluate_files
from dnaembed.execute.inline import InlineExecutor
from dnaembed.io.bases import PackedBases
from dnaembed.io.readstore import stream_reads
from dnaembed.io.sequences import read_sequences, write_sequences
from dnaembed.io.spill import SpillArray
from dnaembed.io.spill_dir import SpillDir
from dnaembed.io.strings import PackedStrings, oriented_strings, strings_of
from dnaembed.io.tables import read_table
from dnaembed.model.checkpoint import load_model
from dnaembed.pipeline import clustered_files

BASES = np.array(list("ACGT"))


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return simulate_run(tmp_path_factory.mktemp("sim"))


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    return small_encoder(tmp_path_factory.mktemp("model") / "small.pt")


def random_seqs(rng, n, length):
    return ["".join(rng.choice(BASES, length)) for _ in range(n)]


def test_every_pair_within_the_margin_shares_a_partition():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(3000, 8))
    step = rng.normal(size=(1000, 8))
    step *= rng.uniform(0, 0.3, (1000, 1)) / np.linalg.norm(step, axis=1, keepdims=True)
    x = np.concatenate([base, base[:1000] + step]).astype(np.float32)
    part = fit_partitioner(x, cells=12, search_dim=0, margin=0.3, max_cells=12, seed=1)
    cells = part.assign(x)
    members = members_of_cells(cells, part.cells)
    assert sorted(np.concatenate(members).tolist()) == sorted(
        np.repeat(np.arange(len(x)), (cells >= 0).sum(axis=1)).tolist())
    # Pairs of points closer than the margin: each point's nearest cell holds the other.
    lo, hi = np.arange(1000), np.arange(3000, 4000)
    near = np.linalg.norm(x[lo] - x[hi], axis=1) <= part.margin
    lo, hi = lo[near], hi[near]
    assert len(lo) > 500
    home_lo, home_hi = cells[lo, 0], cells[hi, 0]
    assert (cells[hi] == home_lo[:, None]).any(axis=1).all()
    assert (cells[lo] == home_hi[:, None]).any(axis=1).all()
    assert pairs_sharing_a_partition(lo, hi, cells).all()
    # Without a margin each point is in one cell, and some of the pairs are cut apart.
    bare = fit_partitioner(x, cells=12, search_dim=0, margin=0.0, max_cells=12, seed=1).assign(x)
    assert (bare[:, 1:] == -1).all()
    assert not pairs_sharing_a_partition(lo, hi, bare).all()
    # Same seed, same cells.
    again = fit_partitioner(x, cells=12, search_dim=0, margin=0.3, max_cells=12, seed=1)
    assert np.array_equal(again.centroids, part.centroids)


def test_the_cells_fitted_on_one_thread_or_three_are_the_same():
    # Enough points for faiss to split its distances into blocks (of 4,096 queries),
    # which its threads then share.
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(1500, 16))
    x = (centres[rng.integers(0, 1500, 20_000)] + 0.3 * rng.normal(size=(20_000, 16)))
    fits = [fit_partitioner(x.astype(np.float32), cells=300, search_dim=8, margin=0.5,
                            max_cells=4, seed=2, threads=threads) for threads in (1, 3, 1)]
    assert all(np.array_equal(f.centroids, fits[0].centroids) for f in fits[1:])
    assert len(np.unique(fits[0].centroids, axis=0)) == 300


def test_a_chunk_embedded_without_its_cells_has_the_same_vectors(small_model):
    from dnaembed.cluster.partition_tasks import EmbedTask, embed_chunk
    from dnaembed.io.bases import ReadBlock
    from dnaembed.io.strings import pack_strings

    model = load_model(small_model).model
    reads = ReadBlock(*pack_strings(random_seqs(np.random.default_rng(3), 300, 60)))
    sample = embed_chunk(model, EmbedTask(reads)).vectors
    part = fit_partitioner(sample, cells=4, search_dim=8, margin=0.5, max_cells=2, seed=0)
    with_cells = embed_chunk(model, EmbedTask(reads, True, part))
    without = embed_chunk(model, EmbedTask(reads, True, part, cells=False))
    assert without.cells is None and with_cells.cells.shape == (300, 2)
    assert np.array_equal(with_cells.vectors, without.vectors)


def test_hashed_dedupe_gives_the_exact_grouping_even_when_hashes_collide():
    rng = np.random.default_rng(2)
    base = random_seqs(rng, 60, 30)
    seqs = []
    for _ in range(400):
        s = base[rng.integers(len(base))]
        seqs.append(reverse_complement(s) if rng.random() < 0.4 else s)
    seqs[5] = seqs[17] = ""
    seqs.append("ACGT")  # a palindrome: its own reverse complement
    lengths = np.array([len(s) for s in seqs])

    def fetch(rows):
        return [seqs[i] for i in rows.tolist()]

    for both in (True, False):
        expected = unique_reads(seqs, both)
        fwd, rev = sequence_hashes(seqs, both)
        colliding = (np.zeros_like(fwd), None if rev is None else np.zeros_like(rev))
        for hashes in ((fwd, rev), colliding):
            got = unique_by_hashes(*hashes, lengths, fetch)
            for name in ("first", "inverse", "flipped", "counts"):
                assert np.array_equal(getattr(got, name), getattr(expected, name)), (both, name)


def test_spilled_and_in_memory_stores_give_the_same_rows(tmp_path):
    rng = np.random.default_rng(3)
    blocks = [rng.normal(size=(n, 5)).astype(np.float16) for n in (7, 300, 1, 50)]
    rows = rng.integers(0, 358, 100)
    with SpillDir(tmp_path) as spill:
        stores = [SpillArray((5,), np.float16), SpillArray((5,), np.float16,
                                                           spill_to=spill.new_file("v")),
                  SpillArray((5,), np.float16, spill_to=spill.new_file("w"), spill_after=1000)]
        for store in stores:
            for block in blocks:
                store.append(block)
            store.finish()
        assert [s.spilled for s in stores] == [False, True, True]
        every = np.concatenate(blocks)
        mask = rng.random(358) < 0.3
        for store in stores:
            # Rows by any kind of index: integers of either width (also negative), a list,
            # a mask, a slice; each a copy.
            for index in (rows, rows.astype(np.int32), rows - 358, rows.tolist(), mask,
                          slice(5, 40)):
                taken = store.take(index)
                assert np.array_equal(taken, every[index])
                taken[...] = 0  # a copy: the store's rows stay
                assert np.array_equal(store.take(index), every[index])
            assert store.row_bytes(299, 303) == np.concatenate(blocks)[299:303].tobytes()
            store.close()
        ids = ["r1", "β-read", "", "r" * 300]
        packed = PackedStrings(spill_to=spill.new_file("ids"), encoding="utf-8")
        packed.append(ids[:2])
        packed.append(ids[2:])
        packed.finish()
        assert list(packed) == ids and packed[1] == "β-read"
        assert packed.take(np.array([3, 0])) == [ids[3], ids[0]]
        packed.close()
        # Every length modulo 4, empty reads, and reads with an N (kept whole by PackedBases).
        seqs = ["".join(rng.choice(list("ACGT" if n % 7 else "ACGTN"), n))
                for n in rng.integers(0, 40, 500)]
        for store, where in itertools.product((PackedStrings, PackedBases),
                                              ("memory", "file", "moved")):
            spill_to = None if where == "memory" else spill.new_file(where)
            packed = store(spill_to=spill_to, spill_after=1 << 30 if where == "moved" else None)
            packed.append(seqs[:123])
            packed.append(seqs[123:])
            packed.finish()
            # Held in memory, then moved to its file.
            assert packed.spilled == (where == "file") and packed.spill() == (where == "moved")
            assert store is PackedStrings or len(packed.other_rows) > 10  # the N path is used
            assert [packed[i] for i in range(len(seqs))] == seqs
            pick = rng.integers(0, len(seqs), 300)  # repeats, empty strings, any order
            data, lengths = packed.packed(pick)
            assert data.tobytes() == "".join(seqs[i] for i in pick).encode()
            assert lengths.tolist() == [len(seqs[i]) for i in pick]
            # As tasks take them (two-bit codes from PackedBases): the same strings.
            block = packed.block(pick)
            assert block.two_bit == (store is PackedBases) and len(block) == len(pick)
            assert block.strings() == [seqs[i] for i in pick]
            assert packed.block(pick[:0]).strings() == []
            assert_codes(block.codes(), [seqs[i] for i in pick])
            assert_codes(packed.block(pick[:0]).codes(), [])
            # In bulk from a store, one by one from a list: the same strings.
            units = UnitSequences(packed, np.arange(len(seqs))[::-1].copy())
            flip = rng.integers(0, 2, len(pick)).astype(bool)
            as_listed = [units.reversed()[i] if f else units[i] for i, f in zip(pick, flip)]
            assert oriented_strings(units, units.reversed(), pick, flip) == as_listed
            # Coded where a task's thread codes them: the same, from either orientation.
            assert_codes(units.oriented_block(pick, flip).codes(), as_listed)
            assert_codes(units.reversed().oriented_block(pick, ~flip).codes(), as_listed)
            assert units.reverses(units.reversed()) and not units.reverses(units)
            assert strings_of(units, pick) == strings_of([units[i] for i in range(500)], pick)
            packed.close()
        directory = spill.path
        assert directory.is_dir()
    assert not directory.exists()


@pytest.mark.parametrize("n_cells", [1, 9, 65_535, 70_000])
def test_members_of_cells_are_the_rows_in_each_cell_in_order(n_cells):
    # Rows in up to 3 cells (-1 pads), cells up to the last, on both sides of 2^16 cells
    # (16-bit keys below): each cell's members are the rows holding it, increasing.
    rng = np.random.default_rng(n_cells)
    cells = np.full((500, 3), -1, dtype=np.int32)
    for row in range(500):  # distinct cells in a row, the nearest always there
        held = rng.choice(n_cells, min(3, n_cells), replace=False)
        cells[row, : len(held)] = held
    cells[:, 1:][rng.random((500, 2)) < 0.3] = -1
    cells[0] = [n_cells - 1, -1, -1]  # the last cell held
    members = members_of_cells(cells, n_cells)
    assert len(members) == n_cells
    held = {}
    for row, row_cells in enumerate(cells.tolist()):
        for c in set(row_cells) - {-1}:
            held.setdefault(c, []).append(row)
    assert {c: m.tolist() for c, m in enumerate(members) if len(m)} == held
    assert all(m.dtype == np.int32 for m in members)


def test_reads_of_similar_lengths_go_to_tasks_as_rows_of_one_width(tmp_path):
    # Reads of 130-163 nt with a few N reads (kept whole by PackedBases), the last ones at
    # the end of the store: tasks get rows of one width, and the same strings. A read far
    # longer than the rest makes the rows too wide: joined instead, the same strings.
    rng = np.random.default_rng(8)
    seqs = ["".join(rng.choice(list("ACGT" if i % 50 else "ACGTN"), n))
            for i, n in enumerate(rng.integers(130, 164, 400))]
    seqs[7] = seqs[7].lower()  # kept whole by PackedBases too
    with SpillDir(tmp_path) as spill:
        for store, spill_to in itertools.product((PackedStrings, PackedBases),
                                                 (None, spill.new_file("seqs"))):
            packed = store(spill_to=spill_to)
            packed.append(seqs)
            packed.finish()
            pick = np.concatenate([rng.integers(0, len(seqs), 200), [7, len(seqs) - 1]])
            block = packed.block(pick)
            longest = max(len(seqs[i]) for i in pick)
            assert block.width == (longest if store is PackedStrings else (longest + 3) // 4)
            assert len(block.data) == block.width * len(pick)
            assert block.strings() == [seqs[i] for i in pick]
            assert packed.take(pick) == [seqs[i] for i in pick]
            assert_codes(block.codes(), [seqs[i] for i in pick])
            packed.close()
        packed = PackedStrings()
        packed.append([*seqs[:10], "ACGT" * 200])
        packed.finish()
        block = packed.block(np.arange(11))
        assert block.width == 0 and block.strings() == [*seqs[:10], "ACGT" * 200]
        assert_codes(block.codes(), [*seqs[:10], "ACGT" * 200])
        packed.close()


def assert_codes(coded: tuple[np.ndarray, np.ndarray], seqs: list[str]) -> None:
    """A block's codes (``ReadBlock.codes``) are the strings' (``encode_flat``)."""
    codes, lengths = encode_flat(seqs)
    assert np.array_equal(coded[0], codes) and coded[0].dtype == np.uint8
    assert np.array_equal(coded[1], lengths)


@pytest.mark.parametrize("two_bit", [False, True])
def test_reads_kept_in_memory_while_streaming_are_spilled_when_the_plan_says(tmp_path, write,
                                                                             two_bit):
    # The number of reads, and so the room they may take, is known only after reading.
    a = write("a.fq", "".join(f"@r{i}\n{'ACGT' * (i + 1)}\n+\n{'I' * 4 * (i + 1)}\n"
                              for i in range(40)))
    (tmp_path / "spill").mkdir()
    with SpillDir(tmp_path / "spill") as spill:
        store = stream_reads([a], spill=spill, spill_after=1 << 20, keep_quals=True,
                             two_bit=two_bit)
        assert isinstance(store.seqs, PackedBases) == two_bit
        assert store.seqs.nbytes == 820 * (1 if two_bit else 4)  # 3,280 bases
        before = (store.ids.take(np.arange(40)), store.seqs.take(np.arange(40)))
        assert not store.seqs.spilled
        assert store.spill_beyond(1 << 20) == []
        # The sequences, read back most often, are spilled last.
        assert store.spill_beyond(store.seqs.nbytes) == ["ids", "qualities"]
        assert store.ids.spilled and store.quals.spilled and not store.seqs.spilled
        assert (store.ids.take(np.arange(40)), store.seqs.take(np.arange(40))) == before
        assert store.seqs[39] == "ACGT" * 40 and store.quals[0] == "IIII"
        assert store.spill_beyond(0) == ["sequences"] and store.spill_beyond(0) == []
        assert (store.ids.take(np.arange(40)), store.seqs.take(np.arange(40))) == before
        store.close()


def cells_by_sorting_every_boundary(part, y: np.ndarray) -> np.ndarray:
    """What ``Partitioner.assign`` gives, the long way: every read's distance to every
    cell's boundary with its nearest, sorted (stable: ties by cell)."""
    c = part.centroids.astype(np.float64)
    c_norm = (c * c).sum(axis=1)
    gaps = np.sqrt(np.maximum(c_norm[:, None] + c_norm[None, :] - 2 * (c @ c.T), 0.0))
    d2 = c_norm[None, :] - 2 * (y.astype(np.float64) @ c.T)
    nearest = np.argmin(d2, axis=1)
    rows = np.arange(len(y))
    with np.errstate(divide="ignore", invalid="ignore"):
        boundary = (d2 - d2[rows, nearest][:, None]) / (2 * gaps[nearest])
    boundary[~np.isfinite(boundary)] = np.inf
    boundary[rows, nearest] = -1.0
    take = min(part.max_cells, part.cells)
    order = np.argsort(boundary, axis=1, kind="stable")[:, :take]
    inside = np.take_along_axis(boundary, order, axis=1) <= part.margin
    want = np.full((len(y), part.max_cells), -1, dtype=np.int32)
    want[:, :take] = np.where(inside, order, -1)
    return want


def test_a_reads_cells_are_those_that_sorting_every_boundary_puts_first(monkeypatch):
    rng = np.random.default_rng(11)
    for trial in range(300):
        dim, cells = int(rng.integers(1, 4)), int(rng.integers(2, 14))
        # Small integers: ties between cells, identical centroids, reads on boundaries.
        centroids = rng.integers(0, 3, (cells, dim)).astype(np.float32)
        y = (rng.integers(0, 3, (60, dim)) + rng.choice([0.0, 0.5], (60, dim))).astype(np.float32)
        part = Partitioner(None, None, centroids, float(rng.choice([0.0, 0.5, 1.0, 2.0])),
                           int(rng.integers(1, cells + 2)))
        got = part.assign(y)
        assert np.array_equal(got, cells_by_sorting_every_boundary(part, y)), trial
        assert np.array_equal(part.nearest(y), got[:, 0]), trial
    # Vectors as the model's are, many cells: the same too, and after pickling (as a task
    # to another process), which leaves the centroids' distances behind.
    x = rng.normal(size=(20_000, 16)).astype(np.float32)
    part = fit_partitioner(x, cells=150, search_dim=0, margin=0.5, max_cells=4, seed=3)
    want = cells_by_sorting_every_boundary(part, x[:5000])
    assert (want[:, 1] >= 0).mean() > 0.2
    assert np.array_equal(part.assign(x[:5000]), want)
    sent = pickle.loads(pickle.dumps(part))
    assert sent._cached is None and part._cached is not None
    assert np.array_equal(sent.assign(x[:5000]), want)
    # A margin as wide as the rounds', which lets many cells through the screen: the same
    # cells whether their dot products come pair by pair or from one product of a block
    # with every centroid (each way forced by the share that chooses between them).
    wide = fit_partitioner(x, cells=150, search_dim=0, margin=2.0, max_cells=6, seed=3)
    want = cells_by_sorting_every_boundary(wide, x[:5000])
    assert (want[:, 5] >= 0).mean() > 0.2
    for share in (0.0, 2.0):  # every block by one product; none
        monkeypatch.setattr(partition, "DENSE_SCREEN", share)
        assert np.array_equal(wide.assign(x[:5000]), want), share
    monkeypatch.undo()
    # Far from the origin: the same as in float64 (the screen is in float32, about the
    # centroids' mean).
    far = Partitioner(None, None, part.centroids + 1000, part.margin, part.max_cells)
    assert np.array_equal(far.assign(x[:5000] + 1000),
                          cells_by_sorting_every_boundary(far, x[:5000] + 1000))


def test_read_store_streams_several_files_and_refuses_a_repeated_id(tmp_path, write):
    a = write("a.fa", ">r1\nACGT\n>r2\nacgn\n")
    b = write("b.fq", "@r3\nAAAA\n+\nIIII\n@r4\n\n+\n\n")
    store = stream_reads([a, b], keep_quals=True)
    assert list(store.ids) == ["r1", "r2", "r3", "r4"]
    assert list(store.seqs) == ["ACGT", "ACGN", "AAAA", ""]
    assert store.quals is None  # not every file has qualities
    assert store.where(2) == (str(b), 1)
    dup = write("c.fa", ">r9\nAC\n>r2\nGG\n")
    with pytest.raises(InputError, match=r"c\.fa: record 2 \(r2\): duplicate read id \(first "
                                         r"seen at .*a\.fa, record 2\)"):
        stream_reads([a, b, dup])


def reference_candidates(targets, queries, top, k, max_targets):
    """k-mer candidates by brute force: shared distinct k-mers per target and orientation."""
    def kmers(s):
        v, _ = kmer_codes([s], k)
        return set(v.tolist())

    fwd = [kmers(t) for t in targets]
    rev = [kmers(reverse_complement(t)) for t in targets]
    holders: dict[int, set[int]] = {}
    for t, (f, r) in enumerate(zip(fwd, rev)):
        for km in f | r:
            holders.setdefault(km, set()).add(t)
    common = {km for km, ts in holders.items() if len(ts) > max_targets}
    out = []
    for q in queries:
        qk = kmers(q) - common
        scores = []
        for t in set().union(*(holders.get(km, set()) for km in qk)):
            votes = max((len(qk & fwd[t]), 0), (len(qk & rev[t]), 1), key=lambda v: (v[0], -v[1]))
            if votes[0]:
                scores.append((-votes[0], t, votes[1]))
        out.append([(t, f) for _, t, f in sorted(scores)[:top]])
    return out


@pytest.mark.parametrize("k", [10, 12])
def test_kmer_index_in_blocks_finds_what_brute_force_finds(k):
    rng = np.random.default_rng(4)
    primer = "".join(rng.choice(BASES, 16))
    targets = [primer + s for s in random_seqs(rng, TARGET_BLOCK + 500, 40)]
    picks = rng.integers(0, len(targets), 60)
    queries = [reverse_complement(targets[i][10:50]) if j % 3 == 0 else targets[i][5:45]
               for j, i in enumerate(picks.tolist())] + random_seqs(rng, 5, 40)
    found, flips = KmerIndex(targets, both=True, k=k).candidates(queries, 3)
    expected = reference_candidates(targets, queries, 3, k, 16)
    for q, want in enumerate(expected):
        got = [(int(t), int(f)) for t, f in zip(found[q], flips[q]) if t >= 0]
        assert got == want, q
    assert found[:60, 0].tolist() == picks.tolist()


def test_partitioned_clusters_match_the_truth(sim, tmp_path):
    model = load_model(None).model
    with (InlineExecutor(2) as runner,
          clustered_files([f"{sim}.fastq.gz"], model, runner,
                          params={"partition_size": 256}) as (result, store)):
        assert result.stats["partitions"] >= 6
        # The rescue's reads have full embedding lists, as read and reverse-complemented.
        stats = result.stats
        assert stats["listed_reads"] > 0
        assert stats["listed_neighbours"] == stats["listed_reads"] * 2 * 16
        out = tmp_path / "c.tsv"
        from dnaembed.io.clusters import write_clusters

        write_clusters(out, store.ids, result, orientation=True)
    scores = evaluate_files(out, f"{sim}.truth.tsv")
    assert scores["A_0.9"] >= 0.97, scores


def test_the_threshold_sample_is_searched_first_and_its_distances_run_past_the_cut(sim):
    model = load_model(None).model
    with (InlineExecutor(2) as runner,
          clustered_files([f"{sim}.fastq.gz"], model, runner,
                          params={"partition_size": 32}) as (result, store)):
        stats = result.stats
        assert stats["partitions"] > 32
        # The sample's distances are full (its unrelated candidates included), though
        # round 1 checks every pair at the threshold.
        histogram = np.asarray(stats["distance_histogram"])
        assert len(histogram) > 2 * result.threshold.max_dist
        assert histogram[result.threshold.max_dist + 1 :].sum() > 0
        assert stats["verified_pairs"] > len(store.ids)


def test_same_output_whatever_the_threads_and_what_is_spilled(sim, small_model, tmp_path):
    model = load_model(small_model).model
    outputs = []
    spill_all = {"spill_vectors": True, "reads_in_memory": 0}
    two_bit_in_memory = {"reads_in_memory": 1 << 30}  # as a budget with room for them gives
    for threads, extra in ((1, {}), (3, {}), (2, spill_all), (1, two_bit_in_memory)):
        with (InlineExecutor(threads) as runner,
              clustered_files([f"{sim}.fastq.gz"], model, runner, tmpdir=tmp_path,
                              params={"partition_size": 256, **extra}) as (result, store)):
            outputs.append((result.labels, result.orientation, result.representatives))
            assert store.seqs.spilled == (extra is spill_all)
            assert isinstance(store.seqs, PackedBases) == bool(extra)
            assert len(list(tmp_path.iterdir())) == 1  # the run's spill directory
        assert list(tmp_path.iterdir()) == []  # gone with the run
    for labels, orientation, reps in outputs[1:]:
        assert np.array_equal(labels, outputs[0][0])
        assert np.array_equal(orientation, outputs[0][1])
        assert np.array_equal(reps, outputs[0][2])


def test_tasks_go_out_largest_first_and_their_order_does_not_change_the_output(
        sim, small_model, monkeypatch):
    from dnaembed import arrays
    from dnaembed.cluster import partitioned, rounds

    # Decreasing cost, ties in index order.
    assert arrays.largest_first(np.array([3, 5, 0, 5, 1])).tolist() == [1, 3, 0, 4, 2]
    assert arrays.largest_first(np.zeros(0, np.int64)).tolist() == []
    model = load_model(small_model).model
    outputs = []
    # Round 1's partitions and the rounds' cells handed out largest first, then smallest
    # first: the pairs of every task are collected before any is used.
    for order in (arrays.largest_first, lambda costs: arrays.largest_first(costs)[::-1]):
        monkeypatch.setattr(partitioned, "largest_first", order)
        monkeypatch.setattr(rounds, "largest_first", order)
        with (InlineExecutor(2) as runner,
              clustered_files([f"{sim}.fastq.gz"], model, runner,
                              params={"partition_size": 64}) as (result, _)):
            assert result.stats["partitions"] > 16
            outputs.append((result.labels, result.orientation, result.representatives))
    for got, want in zip(outputs[1], outputs[0]):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("command", ["cluster", "run"])
def test_one_file_given_twice_is_a_usage_error(sim, tmp_path, command):
    # Its reads were read twice, and the run failed later on a "duplicate read id (first
    # seen at record 1)" of the same file, naming neither argument nor the cause.
    lane = sim.parent / "lane1.fastq.gz"
    out = tmp_path / "out"
    proc = run_cli(command, str(lane), "-", f"{lane.parent}/./{lane.name}", "-o", str(out),
                   "--workers", "2", stdin=b"")
    err = assert_clean_error(proc, f"READS (1) and READS (3) are the same file ({lane.parent}"
                             f"/./{lane.name}): give each file once", code=2)
    assert len(err.splitlines()) == 1 and not out.exists(), err


def test_cluster_takes_several_files_as_one_run(sim, small_model, tmp_path):
    d = sim.parent
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    common = ["-m", str(small_model), "--partition-size", "300", "-q"]
    run_cli("cluster", f"{sim}.fastq.gz", "-o", str(one), *common, check=True)
    run_cli("cluster", str(d / "lane1.fastq.gz"), str(d / "lane2.fastq.gz"), "-o", str(two),
            *common, check=True)
    assert one.read_bytes() == two.read_bytes()
    # An output over an input, or an id in both lanes, is refused without output.
    assert_clean_error(run_cli("cluster", str(d / "lane1.fastq.gz"), "-o",
                               str(d / "lane1.fastq.gz"), *common), "is the input READS",
                       code=2)
    copy = tmp_path / "copy.fastq.gz"
    shutil.copyfile(d / "lane1.fastq.gz", copy)
    assert_clean_error(run_cli("cluster", str(d / "lane1.fastq.gz"), str(copy),
                               "-o", str(tmp_path / "dup.tsv"), *common), "duplicate read id")
    assert not (tmp_path / "dup.tsv").exists()
    assert_clean_error(run_cli("cluster", str(d / "lane1.fastq.gz"), "--method", "kmeans",
                               "--workers", "2", "-o", str(tmp_path / "k.tsv")),
                       "--workers applies to --method graph", code=2)


def test_a_missing_lane_fails_before_a_scheduler_is_asked(sim, tmp_path):
    """Every input is checked first: a wrong path is named at once, not after a model load
    and a Dask cluster started or joined (nothing listens at this scheduler's port)."""
    lane1, missing = str(sim.parent / "lane1.fastq.gz"), str(tmp_path / "lane9.fastq.gz")
    for command in (["cluster", "-o", str(tmp_path / "c.tsv")], ["run", "-o", str(tmp_path / "r")]):
        err = assert_clean_error(run_cli(*command, lane1, missing, "--scheduler",
                                         "tcp://127.0.0.1:9"), "lane9.fastq.gz: no such file")
        assert "scheduler" not in err
    # A --tmpdir that is not there is a usage error, found before any work.
    assert_clean_error(run_cli("cluster", lane1, "-o", str(tmp_path / "c.tsv"), "--tmpdir",
                               str(tmp_path / "nowhere"), "--scheduler", "tcp://127.0.0.1:9"),
                       "nowhere", "does not exist", code=2)
    assert list(tmp_path.iterdir()) == []


def test_kmeans_reads_several_files_too(sim, small_model, tmp_path):
    d = sim.parent
    out = tmp_path / "k.tsv"
    run_cli("cluster", str(d / "lane1.fastq.gz"), str(d / "lane2.fastq.gz"), "-o", str(out),
            "--method", "kmeans", "-m", str(small_model), "-q", check=True)
    ids = [r[0] for r in read_table(out)]
    assert ids == read_sequences(f"{sim}.fastq.gz").ids


def test_run_clusters_several_files(sim, small_model, tmp_path):
    d = sim.parent
    reads = read_sequences(f"{sim}.fastq.gz")
    subset = reads.subset(range(400))
    write_sequences(tmp_path / "a.fastq", subset.ids[:200], subset.seqs[:200], subset.quals[:200])
    write_sequences(tmp_path / "b.fastq", subset.ids[200:], subset.seqs[200:], subset.quals[200:])
    out = tmp_path / "out"
    run_cli("run", str(tmp_path / "a.fastq"), str(tmp_path / "b.fastq"), "-o", str(out),
            "-m", str(small_model), "-q", check=True)
    assert [r[0] for r in read_table(out / "clusters.tsv")] == subset.ids
    assert read_sequences(out / "strands.fasta").seqs
    del d
