"""Cluster centres for rounds 2..: the mean vector of each cluster's reads in its
representative's orientation, the same whether the vectors are in memory or spilled."""

from __future__ import annotations

import numpy as np
import pytest

import dnaembed.cluster.centres as centres
from dnaembed.cluster.candidates import CandidatePairs
from dnaembed.cluster.centres import cluster_centres, mean_rows
from dnaembed.cluster.graph import _GuardedLinker
from dnaembed.cluster.threshold import Threshold
from dnaembed.encoding import reverse_complement
from dnaembed.io.spill import SpillArray


def _array(rows: np.ndarray, spill_to=None) -> SpillArray:
    array = SpillArray((rows.shape[1],), np.float16, spill_to=spill_to)
    for start in range(0, len(rows), 97):
        array.append(rows[start : start + 97])
    return array.finish()


@pytest.mark.parametrize("spilled", [False, True])
@pytest.mark.parametrize(("block", "dims_at_once"), [(5, 8), (1 << 16, 8), (64, 3)])
def test_means_of_the_counted_rows_of_each_group(tmp_path, monkeypatch, spilled, block,
                                                 dims_at_once):
    monkeypatch.setattr(centres, "BLOCK_ROWS", block)
    # The sums of 42 groups in float32, dims_at_once dimensions a pass (3: 3, 3, then 2).
    monkeypatch.setattr(centres, "SUM_BYTES", 4 * 42 * dims_at_once)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(500, 8)).astype(np.float16)
    group = rng.integers(0, 40, len(vectors)).astype(np.int32)
    counted = rng.random(len(vectors)) < 0.7
    array = _array(vectors, tmp_path / "v.f16" if spilled else None)
    assert array.spilled == spilled
    got = mean_rows(array, group, counted, 42)
    assert got.dtype == np.float16 and got.shape == (42, 8)
    for g in range(42):
        rows = vectors[(group == g) & counted].astype(np.float64)
        expected = rows.mean(axis=0) if len(rows) else np.zeros(8)
        np.testing.assert_allclose(got[g], expected, atol=2e-3, rtol=2e-3)
    # Groups 40 and 41 have no rows; every group's mean is the same bytes at any block size.
    assert not got[40:].any()
    monkeypatch.setattr(centres, "BLOCK_ROWS", 3)
    monkeypatch.setattr(centres, "SUM_BYTES", 4 * 42 * 5)
    assert mean_rows(array, group, counted, 42).tobytes() == got.tobytes()
    array.close()


def test_a_cluster_centre_leaves_out_its_reads_of_the_other_orientation():
    rng = np.random.default_rng(2)
    seqs = ["".join(rng.choice(list("ACGT"), 20)) for _ in range(7)]
    vectors = rng.normal(size=(7, 4)).astype(np.float16)
    linker = _GuardedLinker(seqs, [reverse_complement(s) for s in seqs], np.zeros(7),
                            np.ones(7), Threshold(max_dist=30, source="user"), 1.0, guard=False)
    # Cluster {0, 1, 2, 3}: 2 linked as 1's reverse complement, 3 as 2's (so as read, as 0
    # and 1 are); cluster {4, 5}; 6 alone.
    lo, hi, parity = np.array([0, 1, 2, 4]), np.array([1, 2, 3, 5]), np.array([0, 1, 1, 0])
    linker.link(CandidatePairs(lo, hi, parity.astype(np.int8), np.zeros(4)),
                np.arange(4, dtype=np.int32))
    reps, _ = linker.clusters()
    got = cluster_centres(_array(vectors), linker, reps)
    assert len(got) == len(reps) == 3
    v = vectors.astype(np.float64)
    by_rep = {int(r): got[i] for i, r in enumerate(reps)}
    first = next(r for r in by_rep if r in (0, 1, 2, 3))
    expected = v[[2]] if first == 2 else v[[0, 1, 3]]
    np.testing.assert_allclose(by_rep[first], expected.mean(axis=0), atol=2e-3)
    second = next(r for r in by_rep if r in (4, 5))
    np.testing.assert_allclose(by_rep[second], v[[4, 5]].mean(axis=0), atol=2e-3)
    np.testing.assert_allclose(by_rep[6], v[6], atol=2e-3)
