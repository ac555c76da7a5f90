"""The clustering library: estimators, threshold, dedupe, rescue, pipeline (bundled model)."""

import numpy as np
import pytest

from dnaembed.cluster import DbscanClusterer, GraphClusterer, KMeansClusterer, make_clusterer
from dnaembed.cluster.candidates import CandidatePairs, candidate_pairs, distances_within_cuts
from dnaembed.cluster.dedupe import unique_reads
from dnaembed.cluster.kmers import KmerIndex
from dnaembed.cluster.search import Neighbours
from dnaembed.encoding import reverse_complement
from dnaembed.errors import DnaembedError
from dnaembed.evaluate.clustering import clustering_scores
from dnaembed.model.checkpoint import load_model
from dnaembed.model.inference import embed_sequences
from dnaembed.pipeline import cluster_reads
from dnaembed.sim.channel import get_preset
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import ReadLayout, simulate_reads
from dnaembed.sim.strands import random_strands


@pytest.fixture(scope="module")
def model():
    return load_model(None).model


def simulated(preset, n_strands, *, reverse=0.0, truncate=0.0, coverage=8, seed=1, length=120):
    strands = random_strands(n_strands, (length, length), np.random.default_rng(seed))
    return simulate_reads(
        strands, get_preset(preset), Coverage(model="fixed", mean=coverage),
        ReadLayout(reverse_fraction=reverse, truncate_fraction=truncate, truncate_mean=40),
        seed=seed,
    )


def scores(sim, result):
    truth = {r: str(s) for r, s in zip(sim.ids, sim.strand.tolist()) if s >= 0}
    return clustering_scores({r: str(c) for r, c in zip(sim.ids, result.labels.tolist())}, truth)


def orientation_errors(sim, result):
    """Reads whose orientation disagrees with their cluster's majority (relative to truth)."""
    bad = 0
    for members in result.members():
        rel = sim.reverse[members].astype(int) ^ result.orientation[members]
        bad += min(int(rel.sum()), len(rel) - int(rel.sum()))
    return bad


# ------------------------------------------------------------------ methods


def test_graph_recovers_the_truth_in_both_orientations(model):
    sim = simulated("nanopore", 40, reverse=0.5)
    result = cluster_reads(sim.seqs, model)
    s = scores(sim, result)
    assert s["A_1.0"] == 1.0, s
    assert result.n_clusters == 40
    assert orientation_errors(sim, result) == 0
    assert result.threshold.source == "data"
    # The representative is a member of its cluster, in orientation 0.
    assert (result.labels[result.representatives] == np.arange(40)).all()
    assert (result.orientation[result.representatives] == 0).all()


def test_hnsw_on_a_projection_recovers_the_truth_and_repeats_itself(model):
    # 480 reads of 512-d vectors: enough for the HNSW graph's 64-d projection (a forced
    # --index hnsw; by default HNSW starts at 20,000 reads), with full-width re-ranking.
    from dnaembed.cluster.search import PROJECT_MIN_ROWS, PROJECTED_DIM

    sim = simulated("nanopore", 60, reverse=0.5)
    assert len(sim.seqs) >= PROJECT_MIN_ROWS * PROJECTED_DIM
    runs = []
    for _ in range(2):
        est = GraphClusterer(index="hnsw", seed=3)
        runs.append(cluster_reads(sim.seqs, model, clusterer=est))
        assert est.stats_["index_dim"] == PROJECTED_DIM < model.config.embedding_dim
    a, b = runs
    assert scores(sim, a)["A_1.0"] == 1.0 and orientation_errors(sim, a) == 0
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.orientation, b.orientation)


def test_plus_strand_splits_reads_of_both_orientations(model):
    sim = simulated("illumina", 10, reverse=0.5)
    both = cluster_reads(sim.seqs, model, strand="both")
    plus = cluster_reads(sim.seqs, model, strand="plus")
    assert both.n_clusters == 10
    assert plus.n_clusters == 20  # each strand's forward and reverse reads apart
    assert not plus.orientation.any()


def test_kmeans_recovers_the_truth(model):
    sim = simulated("nanopore", 12, reverse=0.5)
    result = cluster_reads(sim.seqs, model, method="kmeans")
    assert scores(sim, result)["A_0.9"] == 1.0
    # Not by luck of the seeding: scikit-learn's default greedy k-means++ merged two
    # strands here for 2 seeds of 12.
    for seed in range(1, 6):
        other = cluster_reads(sim.seqs, model, method="kmeans", params={"seed": seed})
        assert scores(sim, other)["A_0.9"] == 1.0, seed
    assert result.stats["k"] == 12  # estimated from the data
    given = cluster_reads(sim.seqs, model, method="kmeans", params={"n_clusters": 12})
    assert np.array_equal(given.labels, result.labels)


def test_dbscan_recovers_the_truth(model):
    sim = simulated("illumina", 12, reverse=0.5)
    result = cluster_reads(sim.seqs, model, method="dbscan")
    assert scores(sim, result)["A_0.9"] == 1.0
    assert result.stats["eps"] == result.threshold.max_dist


def test_truncated_reads_are_rescued(model):
    sim = simulated("illumina-array", 30, reverse=0.5, truncate=0.3, coverage=10)
    short = sim.truncated & (np.array([len(s) for s in sim.seqs]) < 100)
    assert short.sum() > 20
    with_rescue = cluster_reads(sim.seqs, model)
    without = cluster_reads(sim.seqs, model, params={"rescue": False})
    assert with_rescue.stats["rescued"] > 0

    def placed(result):
        # A short read is placed when it sits in the cluster holding most of its strand.
        ok = 0
        for i in np.flatnonzero(short):
            mates = np.flatnonzero(sim.strand == sim.strand[i])
            main = np.bincount(result.labels[mates]).argmax()
            ok += result.labels[i] == main
        return ok / short.sum()

    assert placed(with_rescue) >= 0.9 > placed(without)
    assert scores(sim, with_rescue)["A_0.9"] > scores(sim, without)["A_0.9"]
    assert orientation_errors(sim, with_rescue) == 0


def test_identical_reads_end_in_one_cluster(model):
    rng = np.random.default_rng(5)
    seq = "".join(rng.choice(list("ACGT"), 110))
    others = ["".join(rng.choice(list("ACGT"), 110)) for _ in range(5)]
    reads = [seq] * 30 + [reverse_complement(seq)] * 5 + others
    result = cluster_reads(reads, model)
    assert len(set(result.labels[:35].tolist())) == 1
    assert (result.orientation[30:35] != result.orientation[0]).all()
    assert result.n_clusters == 6
    plus = cluster_reads(reads, model, strand="plus")
    assert len(set(plus.labels[:30].tolist())) == 1 and plus.labels[30] != plus.labels[0]


def test_guard_stops_a_bridge_read_from_chaining_two_strands(model):
    rng = np.random.default_rng(2)
    a = list(rng.choice(list("ACGT"), 100))
    b = list(a)
    sites = rng.choice(100, 60, replace=False)
    for p in sites:
        b[p] = "ACGT"[("ACGT".index(b[p]) + 1) % 4]
    bridge = list(a)  # 30 edits from each of a and b; a and b are ~51 apart
    for p in sites[:30]:
        bridge[p] = b[p]

    def noisy(s, n):
        out = []
        for _ in range(n):
            r = list(s)
            for p in rng.choice(100, 2, replace=False):
                r[p] = "ACGT"[("ACGT".index(r[p]) + 1) % 4]
            out.append("".join(r))
        return out

    reads = noisy(a, 8) + noisy(b, 8) + ["".join(bridge)]
    x = embed_sequences(model, reads)
    # The bridge is within the cut of both strands; their representatives are not within
    # the guard's 1.25 x 34 = 42 edits of each other.
    guarded = GraphClusterer(max_dist=34, guard_factor=1.25, rescue=False).fit(x, reads)
    assert guarded.labels_[0] != guarded.labels_[8]
    assert len(set(guarded.labels_[:8])) == 1 and len(set(guarded.labels_[8:16])) == 1
    assert guarded.stats_["guard_refusals"] > 0
    unguarded = GraphClusterer(max_dist=34, guard=False, rescue=False).fit(x, reads)
    assert unguarded.labels_[0] == unguarded.labels_[8]  # what the guard prevents


def test_same_seed_same_output(model):
    sim = simulated("nanopore-hard", 20, reverse=0.5, truncate=0.2)
    a = cluster_reads(sim.seqs, model, params={"seed": 3, "index": "hnsw"})
    b = cluster_reads(sim.seqs, model, params={"seed": 3, "index": "hnsw"})
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.orientation, b.orientation)
    km1 = cluster_reads(sim.seqs, model, method="kmeans", params={"seed": 3})
    km2 = cluster_reads(sim.seqs, model, method="kmeans", params={"seed": 3})
    assert np.array_equal(km1.labels, km2.labels)


# ------------------------------------------------------------------ edge cases


def test_no_reads_one_read_empty_reads_and_all_n(model):
    assert cluster_reads([], model).n_clusters == 0
    one = cluster_reads(["ACGTACGTAC"], model)
    assert one.labels.tolist() == [0] and one.representatives.tolist() == [0]
    empties = cluster_reads(["", "", "ACGT" * 20, "ACGT" * 20], model)
    # Empty reads carry nothing to cluster on: each is a singleton.
    assert empties.n_clusters == 3 and empties.labels[0] != empties.labels[1]
    n_reads = cluster_reads(["N" * 120] * 4 + ["ACGT" * 30], model)
    assert len(set(n_reads.labels[:4].tolist())) == 1 and n_reads.n_clusters == 2
    for method in ("kmeans", "dbscan"):
        assert cluster_reads(["ACGTACGTAC"], model, method=method).labels.tolist() == [0]


def test_estimator_interface(model):
    sim = simulated("illumina", 6)
    x = embed_sequences(model, sim.seqs)
    est = GraphClusterer(neighbours=8)
    labels = est.fit_predict(x, sim.seqs)
    assert labels is est.labels_ and est.n_clusters_ == 6
    assert est.get_params()["neighbours"] == 8
    assert set(est.timings_) >= {"search", "check", "link"}
    with pytest.raises(DnaembedError, match="one row per read"):
        est.fit(x[:-1], sim.seqs)
    with pytest.raises(DnaembedError, match="sample_weight"):
        est.fit(x, sim.seqs, sample_weight=np.zeros(len(x)))
    with pytest.raises(DnaembedError, match="neighbours"):
        GraphClusterer(neighbours=0).fit(x, sim.seqs)
    with pytest.raises(DnaembedError, match="unknown clustering method"):
        make_clusterer("spectral")
    assert isinstance(make_clusterer("kmeans", n_clusters=None), KMeansClusterer)
    assert isinstance(make_clusterer("dbscan", eps=3.0), DbscanClusterer)


# ------------------------------------------------------------------ parts


def test_unique_reads_collapse_copies_in_either_orientation():
    s = "AACCGGTTAC"
    reads = [s, "GGGG", s, reverse_complement(s), "", ""]
    both = unique_reads(reads, both_strands=True)
    assert both.counts.tolist() == [3, 1, 1, 1]
    assert both.inverse.tolist() == [0, 1, 0, 0, 2, 3]
    assert both.flipped.tolist() == [0, 0, 0, 1, 0, 0]
    plus = unique_reads(reads, both_strands=False)
    assert plus.counts.tolist() == [2, 1, 1, 1, 1]


def test_kmer_index_finds_the_strand_of_a_fragment_in_either_orientation():
    rng = np.random.default_rng(4)
    targets = ["".join(rng.choice(list("ACGT"), 150)) for _ in range(200)]
    shared = "GACGCGTCTAGCTGCATCTCGTACA"  # in every target: must not count
    targets = [shared + t for t in targets]
    queries = [targets[7][:60], reverse_complement(targets[9][20:90]), shared, "ACGT"]
    found, flips = KmerIndex(targets, both=True).candidates(queries, 2)
    assert found[0, 0] == 7 and flips[0, 0] == 0
    assert found[1, 0] == 9 and flips[1, 0] == 1
    assert (found[2:] == -1).all()


def test_each_pair_is_checked_against_its_own_cut_whatever_the_others_cuts():
    import Levenshtein

    rng = np.random.default_rng(4)
    bases = np.array(list("ACGT"))
    seqs = ["".join(rng.choice(bases, int(n))) for n in rng.integers(100, 260, 60)]
    seqs += [s[: len(s) - 7] + "ACG" for s in seqs[:20]]  # near copies, a few edits away
    rc = [reverse_complement(s) for s in seqs]
    lo = rng.integers(0, len(seqs) - 1, 400)
    hi = lo + 1 + rng.integers(0, len(seqs) - 1 - lo)
    lo, hi = np.r_[lo, np.arange(20)], np.r_[hi, np.arange(60, 80)]
    parity = rng.integers(0, 2, len(lo)).astype(np.int8)
    parity[-20:] = 0
    pairs = CandidatePairs(lo, hi, parity, np.zeros(len(lo), np.float32))
    # Cuts on both sides of rapidfuzz's one-word kernel (2 cut + 1 <= 64), mixed in one call.
    cuts = rng.choice([0, 5, 29, 31, 32, 60, 120], len(lo))
    got = distances_within_cuts(seqs, rc, pairs, cuts)
    exact = np.array([Levenshtein.distance(rc[a] if p else seqs[a], seqs[b])
                      for a, b, p in zip(lo.tolist(), hi.tolist(), parity.tolist())])
    within = exact <= cuts
    assert within.sum() >= 20 and (~within).sum() >= 100
    assert np.array_equal(got[within], exact[within])
    assert (got[~within] > cuts[~within]).all()


def test_candidate_pairs_of_large_read_numbers_in_int32_are_not_wrapped():
    rows = np.array([999_000, 5], dtype=np.int32)
    indices = np.array([[998_999, 7], [999_000, -1]], dtype=np.int32)
    pairs = candidate_pairs(Neighbours(np.ones((2, 2), np.float32), indices), rows=rows)
    assert sorted(zip(pairs.lo.tolist(), pairs.hi.tolist())) == [
        (5, 999_000), (7, 999_000), (998_999, 999_000)]


@pytest.mark.parametrize("seed", range(6))
def test_assembled_labels_follow_their_definition(seed):
    # Raw group labels of any values, centralities with ties (and -inf), weights: each
    # group's representative is its most central read (ties: the earliest); ids go by
    # decreasing weight (ties: the group whose first read comes first); orientations
    # are relative to the representative.
    from dnaembed.cluster.labels import assemble

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    groups = rng.integers(0, n // 3 + 1, n) * 7 + 3
    centrality = np.round(rng.random(n) * 3)
    centrality[rng.random(n) < 0.1] = -np.inf
    parity = rng.integers(0, 2, n)
    weights = rng.integers(1, 4, n).astype(np.float64)
    labels, orient, reps = assemble(groups, parity, centrality, weights)
    members = {int(g): np.flatnonzero(groups == g).tolist() for g in np.unique(groups)}
    by_rank = sorted(members, key=lambda g: (-weights[members[g]].sum(), members[g][0]))
    assert len(reps) == len(members)
    for new_id, g in enumerate(by_rank):
        reads = members[g]
        rep = min(reads, key=lambda i: (-centrality[i], i))
        assert reps[new_id] == rep
        assert (labels[reads] == new_id).all()
        assert orient[reads].tolist() == [parity[i] ^ parity[rep] for i in reads]
