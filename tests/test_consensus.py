"""Strand reconstruction (dnaembed.consensus) and recovery scores (dnaembed.evaluate.recovery)."""

from __future__ import annotations

import numpy as np
import pytest

from dnaembed.consensus import chunks as consensus_module
from dnaembed.consensus import consensus_strands
from dnaembed.encoding import reverse_complement
from dnaembed.errors import DnaembedError, InputError
from dnaembed.evaluate.recovery import match_references, recovery_scores
from dnaembed.io.sequences import ReadSet
from dnaembed.io.tables import read_cluster_table
from dnaembed.sim.channel import PRESETS
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import ReadLayout, simulate_reads
from dnaembed.sim.strands import random_strands


def _strand(n: int = 150, seed: int = 1) -> str:
    return random_strands(1, n, np.random.default_rng(seed))[0]


def _sub(s: str, i: int) -> str:
    new = "C" if s[i] != "C" else "G"
    return s[:i] + new + s[i + 1 :]


def _ins(s: str, i: int, base: str = "T") -> str:
    return s[:i] + base + s[i:]


def _del(s: str, i: int) -> str:
    return s[:i] + s[i + 1 :]


def _one(reads, **kwargs):
    out = consensus_strands(list(reads), [0] * len(reads), **kwargs)
    assert len(out) == 1
    return out[0]


def test_identical_reads_give_that_read():
    s = _strand()
    out = _one([s] * 6)
    assert out.sequence == s
    assert out.size == 6
    assert out.confidence == 1.0 and out.agreement == 1.0 and out.mean_distance == 0.0


def test_single_read_cluster_gives_the_read_with_no_confidence():
    s = _strand()
    out = _one([s])
    assert out.sequence == s
    assert out.size == 1
    assert out.confidence == 0.0  # one read: every position could be overturned


def test_injected_errors_are_voted_out():
    s = _strand(seed=2)
    # Every read carries different errors: substitutions, insertions, deletions.
    reads = [
        _sub(_del(s, 100), 10),
        _ins(_sub(s, 120), 40, "A"),
        _del(_ins(s, 90, "G"), 20),
        _sub(_sub(s, 60), 140),
        _del(_del(s, 130), 5),
    ]
    out = _one(reads)
    assert out.sequence == s
    assert out.iterations >= 1
    # The medoid itself carries errors: the refinement did the work.
    assert out.medoid != s


def test_minority_homopolymer_deletion_and_shared_error_patterns():
    s = "ACGT" * 5 + "AAAAAA" + "CGTACGGTCA" * 4 + "TTTT" + "GACT" * 10
    reads = [s] * 3 + [s.replace("AAAAAA", "AAAAA")] * 2 + [s.replace("TTTT", "TTT")]
    assert _one(reads).sequence == s
    # A majority-shared insertion wins, as it should.
    reads = [_ins(s, 50, "G")] * 4 + [s] * 2
    assert _one(reads).sequence == _ins(s, 50, "G")


def test_mixed_orientations_inferred():
    s = _strand(seed=3)
    reads = [s, _sub(s, 30), _del(s, 70), _ins(s, 110, "C"), s]
    mixed = [reverse_complement(r) if i % 2 else r for i, r in enumerate(reads)]
    out = _one(mixed)
    # Orientation of the output: that of most reads (here 3 of 5 forward).
    assert out.sequence == s
    assert out.reversed_reads == 2
    # All reads reverse-complemented: the output follows them.
    out = _one([reverse_complement(r) for r in reads])
    assert out.sequence == reverse_complement(s)


def test_orientation_given_per_read():
    s = _strand(seed=4)
    reads = [s, _sub(s, 30), _del(s, 70), _ins(s, 110, "C")]
    signs = ["+", "-", "-", "+"]
    seqs = [reverse_complement(r) if g == "-" else r for r, g in zip(reads, signs)]
    out = _one(seqs, orientation=signs)
    assert out.sequence == s
    ids = [f"r{i}" for i in range(4)]
    out = consensus_strands(
        ReadSet(ids, seqs), dict.fromkeys(ids, "c"), orientation=dict(zip(ids, signs))
    )
    assert out[0].sequence == s
    # 0/1 flags as the clustering pipeline gives them.
    assert _one(seqs, orientation=np.array([0, 1, 1, 0], dtype=np.int8)).sequence == s


def test_truncated_reads_vote_only_where_they_align():
    s = _strand(seed=5)
    full = [s, _sub(s, 20), _del(s, 140)]
    # Truncated at the 3' end as read; the reverse reads lose the strand's 5' end.
    short = [s[:90], _sub(s, 50)[:70], reverse_complement(s[60:]), reverse_complement(s[40:])]
    out = _one(full + short)
    assert out.sequence == s
    assert len(out.sequence) == 150
    # Truncated reads are never the starting point.
    assert len(out.medoid) >= 149


def test_read_with_a_missing_middle_does_not_vote_its_junk():
    s = _strand(seed=6)
    chimera = s[:60] + s[120:]  # a real-data artefact: a large internal deletion
    out = _one([s, _sub(s, 10), _del(s, 100), chimera, chimera])
    assert out.sequence == s


def test_expected_length_chooses_and_fits():
    s = _strand(seed=7)
    # Two reads: one lost a base, one gained a substitution. Without the length the
    # tie goes either way; the expected length prefers the full-length read.
    a, b = _del(s, 75), _sub(s, 40)
    out = _one([a, b], expected_length=150)
    assert len(out.sequence) == 150


def test_simulated_clusters_are_recovered():
    rng = np.random.default_rng(8)
    strands = random_strands(40, 150, rng)
    sim = simulate_reads(
        strands, PRESETS["illumina-array"], Coverage("fixed", mean=8),
        ReadLayout(reverse_fraction=0.5, truncate_fraction=0.1), seed=9,
    )
    reads = ReadSet(sim.ids, sim.seqs, sim.quals)
    out = consensus_strands(reads, sim.strand.tolist(), expected_length=150)
    assert len(out) == 40
    exact = sum(
        o.sequence in (strands[int(o.cluster_id)], reverse_complement(strands[int(o.cluster_id)]))
        for o in out
    )
    assert exact >= 38
    medoid = consensus_strands(reads, sim.strand.tolist(), refine=False)
    assert all(o.sequence == o.medoid for o in medoid)


def test_long_strands_polished_in_windows_as_well_as_whole(monkeypatch):
    # Strands past POLISH_WHOLE_MAX_LENGTH weigh a trial edit on a window around it, not
    # on every read's alignment to the whole strand; truncated reads (aligned as infixes)
    # included. Unpolished, these strands end ~0.033 edits a base from their designs.
    from rapidfuzz.distance import Levenshtein

    from dnaembed.consensus import polish

    rng = np.random.default_rng(3)
    strands = random_strands(2, 2500, rng)
    sim = simulate_reads(strands, PRESETS["nanopore-hard"], Coverage("fixed", mean=6),
                         ReadLayout(truncate_fraction=0.4), seed=4)

    def edits() -> int:
        out = consensus_strands(sim.seqs, sim.strand.tolist())
        return sum(Levenshtein.distance(o.sequence, strands[int(o.cluster_id)]) for o in out)

    assert polish.POLISH_WHOLE_MAX_LENGTH < 2500
    windows = edits()
    monkeypatch.setattr(polish, "POLISH_WHOLE_MAX_LENGTH", 10**6)
    whole = edits()
    assert windows <= whole + 2 and windows < 0.015 * 2 * 2500, (windows, whole)


def test_same_seed_same_output_whatever_the_processes(monkeypatch):
    rng = np.random.default_rng(10)
    strands = random_strands(30, 120, rng)
    sim = simulate_reads(strands, PRESETS["nanopore"], Coverage("negbin", mean=8), seed=11)
    labels = sim.strand.tolist()
    first = consensus_strands(sim.seqs, labels, seed=3)
    again = consensus_strands(sim.seqs, labels, seed=3)
    assert [o.sequence for o in first] == [o.sequence for o in again]
    # Small chunks in two processes: the same strands.
    monkeypatch.setattr(consensus_module, "CHUNK_CLUSTERS", 10)
    serial = consensus_strands(sim.seqs, labels, seed=3)
    parallel = consensus_strands(sim.seqs, labels, seed=3, threads=2)
    assert [o.sequence for o in serial] == [o.sequence for o in parallel]
    assert [o.confidence for o in serial] == [o.confidence for o in parallel]


def test_labels_rules_min_size_and_empty_inputs():
    s, t = _strand(seed=12), _strand(seed=13)
    reads = [s, s, t, "", s, t]
    labels = ["a", "a", "b", "a", None, -1]
    out = consensus_strands(reads, labels)
    assert [(o.cluster_id, o.size) for o in out] == [("a", 2), ("b", 1)]  # empty read ignored
    assert [o.cluster_id for o in consensus_strands(reads, labels, min_size=2)] == ["a"]
    assert consensus_strands([], []) == []
    assert consensus_strands([s, t], [None, -1]) == []
    assert consensus_strands(["", ""], [0, 0]) == []
    with pytest.raises(DnaembedError, match="2 labels for 3 reads"):
        consensus_strands([s, s, s], [0, 0])
    with pytest.raises(DnaembedError, match="need reads with ids"):
        consensus_strands([s], {"r1": 0})
    with pytest.raises(DnaembedError, match="expected length"):
        consensus_strands([s], [0], expected_length=0)
    with pytest.raises(DnaembedError, match="orientation"):
        consensus_strands([s], [0], orientation=["x"])


def test_read_cluster_table(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("# dnaembed cluster\n#read_id\tcluster_id\torientation\nr1\t0\t+\nr2\t0\t-\n")
    table = read_cluster_table(path, ["r1", "r2", "r3"])
    assert table.labels == {"r1": "0", "r2": "0"}
    assert table.orientation == {"r1": "+", "r2": "-"}
    path.write_text("r1\t0\nr2\t1\n")
    assert read_cluster_table(path).orientation is None
    path.write_text("r1\t0\t0.5\nr2\t1\t0.7\n")  # a third column that is not an orientation
    assert read_cluster_table(path).orientation is None
    path.write_text("r1\t0\nr1\t1\n")
    with pytest.raises(InputError, match="r1: listed twice"):
        read_cluster_table(path)
    path.write_text("r1\t0\nr9\t1\n")
    with pytest.raises(InputError, match="r9: not in the reads file"):
        read_cluster_table(path, ["r1", "r2"])
    path.write_text("r1 0\n")
    with pytest.raises(InputError, match="line 1: expected at least 2"):
        read_cluster_table(path)


# ---------------------------------------------------------------- recovery


def test_recovery_scores_exact_near_reverse_and_missing():
    rng = np.random.default_rng(14)
    primer = "ACGTTGCAAGCTTGCA"  # shared by every strand, as in real pools
    refs = [primer + s + primer for s in random_strands(6, 100, rng)]
    strands = [
        refs[0],  # exact
        _sub(refs[1], 50),  # distance 1
        reverse_complement(refs[2]),  # exact, other orientation
        _del(_sub(_sub(refs[3], 30), 60), 90),  # distance 3
        _strand(132, seed=15),  # junk
    ]
    match = match_references(refs, strands)
    assert match.nearest[:4].tolist() == [0, 1, 2, 3]
    assert match.distance[:4].tolist() == [0, 1, 0, 3]
    assert match.reverse.tolist()[:3] == [False, False, True]
    scores = recovery_scores(refs, strands, match=match)
    assert scores["references"] == 6
    assert scores["exact"] == pytest.approx(2 / 6)
    assert scores["within_1"] == pytest.approx(3 / 6)
    assert scores["within_3"] == pytest.approx(4 / 6)
    assert scores["strands_not_exact_match"] == 3
    only = recovery_scores(refs, strands, subset=[0, 1], match=match)
    assert only["references"] == 2 and only["exact"] == 0.5
    assert recovery_scores(refs, [])["exact"] == 0.0


def test_recovery_of_long_strands_matches_every_pair_compared():
    # Candidates past a reference's first (the one sharing the most k-mers) are compared
    # only up to the largest first distance. Here the first is not always the nearest: a
    # decoy keeps a reference's first half (many shared k-mers, half its length away),
    # the true strand has a substitution every 9 bases (few shared 12-mers, 11% away).
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    rng = np.random.default_rng(21)
    refs = random_strands(3, 3000, rng)
    spaced = refs[0]
    for i in range(4, len(spaced), 9):
        spaced = _sub(spaced, i)
    decoy = refs[0][:1500] + _strand(1500, seed=22)
    strands = [decoy, spaced, _del(refs[1], 700), reverse_complement(_sub(refs[2], 5)),
               _strand(3000, seed=23)]
    match = match_references(refs, strands)
    both = strands + [reverse_complement(s) for s in strands]
    every = process.cdist(refs, both, scorer=Levenshtein.distance)
    assert match.distance.tolist() == every.min(axis=1).tolist() == [333, 1, 1]
    assert match.nearest.tolist() == (every.argmin(axis=1) % len(strands)).tolist() == [1, 2, 3]


def test_recovery_short_sequences_fall_back_to_exact_search():
    refs = ["ACGTAC", "GGGTTT"]
    match = match_references(refs, ["ACGTAA", "GGGTTT"])
    assert match.nearest.tolist() == [0, 1]
    assert match.distance.tolist() == [1, 0]
