"""scripts/check_fine_lists.py: a strand's pairs, the pieces its met pairs leave, the lists."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import check_fine_lists as fine  # noqa: E402


def test_every_pair_of_a_strand_and_none_of_unlabelled_reads():
    strand = np.array(["a", "b", "a", "", "a", "b", ""])
    lo, hi = fine.strand_pairs(strand)
    pairs = {tuple(sorted(p)) for p in zip(lo.tolist(), hi.tolist())}
    assert pairs == {(0, 2), (0, 4), (2, 4), (1, 5)}


def test_pieces_count_each_strand_once_when_whole_and_each_cut_off_read():
    strand = np.array(["a", "a", "a", "b", "b", "c"])  # c: one read, one piece
    lo, hi = fine.strand_pairs(strand)
    every = np.ones(len(lo), dtype=bool)
    assert fine.pieces_per_strand(every, lo, hi, strand) == 1.0
    # Read 2 meets neither mate: strand a in two pieces, so 4 pieces for 3 strands.
    cut = ~((lo == 2) | (hi == 2))
    assert fine.pieces_per_strand(cut, lo, hi, strand) == 4 / 3


def test_probing_every_list_meets_every_pair_and_one_list_misses_some():
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((60, 8)).astype(np.float32) * 3
    strand = np.repeat(np.arange(60), 10).astype(str)
    y = (centres[strand.astype(int)] + rng.standard_normal((600, 8))).astype(np.float32)
    lo, hi = fine.strand_pairs(strand)
    rows = fine.fine_rows(y, 30, [1, 20], lo, hi, strand, seed=0)
    one, every = ([float(c) for c in row.strip("| ").split(" | ")[2:]] for row in rows)
    assert one[0] >= 30  # a read's own list: 30 reads on average, more where lists differ
    assert every[1] == 0.0 and every[2] == 1.0  # all 20 lists: every pair met, whole strands
    assert one[1] > 0.0 and one[2] > 1.0  # its own list only: some pairs unmet
    assert every[0] == 600.0  # every read searched against all 600


def reads_and_centroids(seed: int, reads: int, lists: int):
    """Random reads and list centroids in 8 dimensions, and each read's exact nearest lists
    (a function of ``k``)."""
    from dnaembed.cluster.search import faiss_module

    rng = np.random.default_rng(seed)
    y = rng.standard_normal((reads, 8)).astype(np.float32)
    centroids = rng.standard_normal((lists, 8)).astype(np.float32)
    index = faiss_module().IndexFlatL2(8)
    index.add(centroids)
    return y, centroids, lambda k: fine.nearest_of(index, y, k)


def test_two_levels_through_every_group_find_the_nearest_lists_and_fewer_groups_miss_some():
    y, centroids, exact = reads_and_centroids(1, 3000, 100)
    nearest = exact(40)
    groups = fine.group_count(100)
    found, measured = fine.two_level(centroids, nearest, y, groups, seed=0)
    assert (found[:, :8] == nearest[:, :8]).all() and measured == groups + 100
    found, measured = fine.two_level(centroids, nearest, y, 1, seed=0)
    assert measured < groups + 100
    assert (found[:, 0] >= 0).all() and (found[:, :8] != nearest[:, :8]).any()


def test_a_wide_hnsw_search_of_few_lists_finds_the_nearest_and_counts_its_distances():
    y, centroids, exact = reads_and_centroids(2, 500, 50)
    found, measured = fine.through_graph(centroids, y, 5, ef=200)
    assert (found == exact(5)).all()  # ef over all 50: exact
    assert 0 < measured <= 50 + 32 * 4


def test_the_cost_rows_time_every_step_and_count_the_scanned_distances():
    y, _, _ = reads_and_centroids(3, 2000, 1)
    sample = np.arange(0, 2000, 2)
    rows = fine.cost_rows(y, sample, 20, seed=0)
    assert len(rows) == 6 and all(row.startswith("| 2,000 | ") for row in rows)
    cells = [[c.strip() for c in row.split("|")[1:-1]] for row in rows]
    assert "100 lists" in cells[0][1] and float(cells[0][2].split()[0]) >= 0
    # Per read and per distance figures are positive numbers with their units.
    for row in cells[2:]:
        assert float(row[3].split()[0]) > 0 and row[3].endswith("µs")
    assert float(cells[4][4].split()[0]) > 0 and float(cells[5][4].split()[0]) > 0
    assert "2,000 members" in cells[5][1]  # fewer reads than a cell: one of all of them
