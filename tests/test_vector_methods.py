"""k-means and DBSCAN on the embedding, and the vectors in scikit-learn (bundled model)."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_clean_error, run_cli

from dnaembed.cluster import DbscanClusterer, KMeansClusterer
from dnaembed.cluster.candidates import CandidatePairs, candidate_pairs
from dnaembed.cluster.density import core_distances, density_clusters
from dnaembed.cluster.neighbour_kmeans import NeighbourGraph, greedy_seeds
from dnaembed.cluster.search import Neighbours
from dnaembed.encoding import reverse_complement
from dnaembed.evaluate.clustering import clustering_scores
from dnaembed.model.checkpoint import load_model
from dnaembed.model.inference import embed_sequences
from dnaembed.pipeline import cluster_reads
from dnaembed.sim.channel import get_preset
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import ReadLayout, simulate_reads
from dnaembed.sim.strands import random_strands

DOCS = Path(__file__).resolve().parent.parent / "docs" / "vector-clustering.md"


@pytest.fixture(scope="module")
def model():
    return load_model(None).model


def simulated(preset, n_strands, *, reverse=0.0, coverage=8, seed=1, length=120, primers=0,
              model="fixed"):
    rng = np.random.default_rng(seed)
    strands = random_strands(n_strands, (length, length), rng)
    if primers:
        left, right = ("".join(rng.choice(list("ACGT"), primers)) for _ in range(2))
        strands = [left + s + right for s in strands]
    coverage = Coverage(model=model, mean=coverage, dispersion=5.0)
    return simulate_reads(strands, get_preset(preset), coverage,
                          ReadLayout(reverse_fraction=reverse), seed=seed)


def scores(sim, labels):
    truth = {r: str(s) for r, s in zip(sim.ids, sim.strand.tolist()) if s >= 0}
    return clustering_scores({r: str(c) for r, c in zip(sim.ids, labels.tolist())}, truth)


def mutate(seq, rng, edits):
    out = list(seq)
    for p in rng.choice(len(out), edits, replace=False):
        out[p] = "ACGT"[("ACGT".index(out[p]) + 1 + int(rng.integers(3))) % 4]
    return "".join(out)


def pairs_of(edges):
    lo = np.array([min(a, b) for a, b, _ in edges])
    hi = np.array([max(a, b) for a, b, _ in edges])
    d = np.array([x for _, _, x in edges], dtype=np.int64)
    return CandidatePairs(lo, hi, np.zeros(len(lo), np.int8), d.astype(np.float32)), d


# ------------------------------------------------------------------ DBSCAN


def test_core_distances_count_collapsed_copies():
    # Read 0: neighbours 1 (distance 2) and 2 (distance 5); read 3 weighs 3 on its own.
    edges, d = pairs_of([(0, 1, 2), (0, 2, 5), (1, 2, 4)])
    w = np.array([1, 1, 1, 3])
    core = core_distances(4, edges.lo, edges.hi, d, w, 3)
    assert core.tolist() == [5.0, 4.0, 5.0, 0.0]
    heavy = core_distances(4, edges.lo, edges.hi, d, np.array([2, 1, 1, 1]), 3)
    assert heavy[0] == 2.0  # itself twice, plus read 1
    assert np.isinf(core_distances(4, edges.lo, edges.hi, d, w, 4)[:3]).all()


def test_density_split_keeps_two_groups_joined_by_a_bridge_apart():
    # Two groups of 6 reads (distances 2-4 within), read 12 within 8-9 of both.
    rng = np.random.default_rng(0)
    edges = [(b + i, b + j, int(rng.integers(2, 5))) for b in (0, 6)
             for i in range(6) for j in range(i + 1, 6)]
    edges += [(12, 0, 8), (12, 1, 9), (12, 6, 8), (12, 7, 9)]
    pairs, d = pairs_of(edges)
    w = np.ones(13)
    core = core_distances(13, pairs.lo, pairs.hi, d, w, 3)
    plain = density_clusters(13, pairs, d, core, w, eps=10, min_cluster_size=None)
    assert len(set(plain.groups.tolist())) == 1  # DBSCAN: chained through read 12
    split = density_clusters(13, pairs, d, core, w, eps=10, min_cluster_size=5)
    assert split.splits == 1
    g = split.groups
    assert len(set(g[:6].tolist())) == 1 and len(set(g[6:12].tolist())) == 1 and g[0] != g[6]


def test_density_border_and_noise_reads():
    # A core group of 4, a border read within eps of one of them, a pair of lone reads.
    edges, d = pairs_of([(0, 1, 1), (0, 2, 1), (1, 2, 2), (0, 3, 2), (3, 4, 6), (5, 6, 3)])
    w = np.ones(7)
    core = core_distances(7, edges.lo, edges.hi, d, w, 3)
    assert np.isfinite(core[:4]).all() and np.isinf(core[4:]).all()
    found = density_clusters(7, edges, d, core, w, eps=10, min_cluster_size=5)
    assert found.groups[4] == found.groups[0]  # border read: joins its nearest core read
    assert found.noise.tolist() == [False] * 5 + [True, True]
    assert found.groups[5] != found.groups[6]


def test_dbscan_does_not_chain_strands_through_bridge_reads(model):
    rng = np.random.default_rng(2)
    a = "".join(rng.choice(list("ACGT"), 100))
    b = mutate(a, rng, 60)  # a related design, ~50 edits away
    sites = [i for i in range(100) if a[i] != b[i]]
    bridges = []
    for _ in range(2):  # half a, half b: within the cut of both strands
        half = set(rng.choice(sites, len(sites) // 2, replace=False).tolist())
        bridges.append("".join(b[i] if i in half else a[i] for i in range(100)))
    reads = [mutate(a, rng, 2) for _ in range(10)] + [mutate(b, rng, 2) for _ in range(10)]
    reads += bridges
    x = embed_sequences(model, reads)
    plain = DbscanClusterer(eps=34, min_cluster_size=None, rescue=False).fit(x, reads)
    assert plain.labels_[0] == plain.labels_[10]  # what the split prevents
    est = DbscanClusterer(eps=34, rescue=False).fit(x, reads)
    assert len(set(est.labels_[:10].tolist())) == 1 and len(set(est.labels_[10:20].tolist())) == 1
    assert est.labels_[0] != est.labels_[10]
    assert est.stats_["split_clusters"] == 1


def test_dbscan_with_shared_primers_recovers_the_strands(model):
    # Every strand starts and ends with the same 45-nt primers: unrelated reads share 90 of
    # their 150 nt. DBSCAN on embedding distances made 19 clusters of these 40 strands.
    sim = simulated("nanopore", 40, reverse=0.5, length=60, primers=45, coverage=8)
    result = cluster_reads(sim.seqs, model, method="dbscan")
    s = scores(sim, result.labels)
    assert s["A_0.9"] >= 0.95 and s["ARI"] >= 0.95, s
    assert np.bincount(result.labels).max() <= 12


def test_dbscan_eps_min_samples_and_reproducibility(model):
    sim = simulated("illumina", 15, reverse=0.5, coverage=6)
    a = cluster_reads(sim.seqs, model, method="dbscan", params={"seed": 4, "index": "hnsw"})
    b = cluster_reads(sim.seqs, model, method="dbscan", params={"seed": 4, "index": "hnsw"})
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.orientation, b.orientation)
    assert scores(sim, a.labels)["A_1.0"] == 1.0
    # min_samples above every strand's size: no core read, every distinct read is noise.
    none = cluster_reads(sim.seqs, model, method="dbscan",
                         params={"min_samples": 50, "rescue": False})
    assert none.stats["core_reads"] == 0 and none.n_clusters == none.stats["distinct"]
    tight = cluster_reads(sim.seqs, model, method="dbscan", params={"eps": 1, "rescue": False})
    assert tight.stats["eps"] == 1 and tight.n_clusters > 15


# ------------------------------------------------------------------ k-means


def test_greedy_seeding_seeds_every_strand_of_several_reads(model):
    # Uneven strands (1 to ~30 reads): k-means++ in proportion leaves some unseeded.
    sim = simulated("nanopore", 80, coverage=10, model="negbin", seed=3)
    x = embed_sequences(model, sim.seqs)
    strands = set(sim.strand.tolist())
    est = KMeansClusterer(n_clusters=len(strands), niter=0, rescue=False).fit(x, sim.seqs)
    assert scores(sim, est.labels_)["A_0.9"] >= 0.95
    from dnaembed.cluster.search import NeighbourIndex, self_neighbours

    found = self_neighbours(NeighbourIndex(x, kind="exact"), x, 16)
    graph = NeighbourGraph.from_pairs(len(x), candidate_pairs(found))
    seeds = greedy_seeds(graph, np.ones(len(x)), len(strands), np.random.default_rng(0))
    sizes = np.bincount(sim.strand)
    seeded = np.bincount(sim.strand[seeds], minlength=len(sizes))
    # Every strand of several reads has a seed. (A lone read far from all others can lose
    # its seed to a second one in a large, noisy strand: the k-means objective's choice.)
    assert (seeded[sizes >= 2] >= 1).all()


def test_kmeans_estimates_k_and_refines_exactly(model):
    sim = simulated("nanopore", 40, reverse=0.5, coverage=8, seed=5)
    est = cluster_reads(sim.seqs, model, method="kmeans")
    assert est.stats["k"] == 40 and scores(sim, est.labels)["A_1.0"] == 1.0
    # Too few centroids: k-means puts two strands under one; the refinement takes them apart.
    few = cluster_reads(sim.seqs, model, method="kmeans", params={"n_clusters": 34})
    refined = cluster_reads(sim.seqs, model, method="kmeans",
                            params={"n_clusters": 34, "refine": True})
    assert scores(sim, few.labels)["A_0.9"] <= 34 / 40
    assert scores(sim, refined.labels)["A_0.9"] >= 0.95
    assert refined.stats["refine_new_clusters"] >= 6
    again = cluster_reads(sim.seqs, model, method="kmeans",
                          params={"n_clusters": 34, "refine": True})
    assert np.array_equal(again.labels, refined.labels)


def test_kmeans_estimates_k_of_strands_read_more_often_than_its_lists_are_long(model):
    # 40 reads a strand, lists of 16: every read's candidates were all verified and the
    # estimate counted clusters of ~17 (k = 532 for 300 strands, A_0.9 0.47). Reads whose
    # lists are full are searched again with longer lists.
    sim = simulated("nanopore", 50, coverage=40, seed=6)
    est = cluster_reads(sim.seqs, model, method="kmeans")
    assert 50 <= est.stats["k"] <= 53, est.stats["k"]
    assert scores(sim, est.labels)["A_0.9"] >= 0.95


def reference_lloyd(x, w, graph, seeds, niter):
    """Lloyd on the graph, everything recomputed each iteration (float64, one read at a time)."""
    x64 = x.astype(np.float64)
    centroids = x64[seeds].copy()
    assign = np.full(len(x), -1)
    assign[seeds] = np.arange(len(seeds))
    history = []
    for step in range(niter + 1):
        if step:
            for c in range(len(seeds)):
                mine = assign == c
                if mine.any():
                    centroids[c] = (w[mine, None] * x64[mine]).sum(0) / w[mine].sum()
        new = assign.copy()
        for i in range(len(x)):
            nb = graph.indices[graph.indptr[i]:graph.indptr[i + 1]]
            cands = sorted(({int(c) for c in assign[nb]} | {int(assign[i])}) - {-1})
            if not cands:
                cands = list(range(len(seeds)))
            d = ((x64[i] - centroids[cands]) ** 2).sum(1)
            new[i] = cands[int(np.argmin(d))]
        history.append(int((new != assign).sum()))
        assign = new
        if step and history[-1] == 0:
            break
    return assign, history


def test_lloyd_recomputing_only_what_changed_matches_a_full_recomputation():
    # Gaussian blobs, a 6-NN graph, seeds drawn at random (several in some blobs, none in
    # others), so that reads keep moving for several iterations.
    from dnaembed.cluster.neighbour_kmeans import lloyd

    rng = np.random.default_rng(4)
    centres = rng.normal(0, 10, (40, 16))
    x = (centres[rng.integers(0, 40, 1200)] + rng.normal(0, 1.5, (1200, 16))).astype(np.float32)
    w = rng.integers(1, 4, len(x)).astype(np.float64)
    d2 = ((x[:, None, :].astype(np.float64) - x[None]) ** 2).sum(-1)
    nearest = np.argsort(d2, axis=1)[:, :7]
    found = Neighbours(np.take_along_axis(d2, nearest, 1).astype(np.float32), nearest)
    graph = NeighbourGraph.from_pairs(len(x), candidate_pairs(found))
    seeds = np.sort(rng.choice(len(x), 35, replace=False))
    expected, history = reference_lloyd(x, w, graph, seeds, 20)
    assert len(history) >= 4 and history[2] > 0  # moves after the first full pass
    assign, dist = lloyd(x, w, graph, seeds, 20)
    assert np.array_equal(assign, expected)
    centroids = np.stack([np.average(x[assign == c], axis=0, weights=w[assign == c])
                          for c in assign])
    np.testing.assert_allclose(dist, ((x - centroids) ** 2).sum(1), rtol=1e-4, atol=1e-3)


def test_kmeans_same_seed_same_output_whatever_the_threads(model):
    sim = simulated("nanopore", 60, reverse=0.5, coverage=8, seed=6)
    x = embed_sequences(model, sim.seqs)
    rc = embed_sequences(model, [reverse_complement(s) for s in sim.seqs])
    runs = [KMeansClusterer(threads=t, seed=2, refine=True).fit(x, sim.seqs, reverse=rc)
            for t in (1, 2)]
    assert np.array_equal(runs[0].labels_, runs[1].labels_)
    assert np.array_equal(runs[0].orientation_, runs[1].orientation_)
    assert scores(sim, runs[0].labels_)["A_0.9"] >= 0.95


# ------------------------------------------------------------------ scikit-learn


def documented_snippet(marker: str) -> str:
    """The Python block of docs/vector-clustering.md that follows ``<!-- test: MARKER -->``."""
    text = DOCS.read_text()
    found = re.search(rf"<!-- test: {marker} -->\s*```python\n(.*?)```", text, re.S)
    assert found, f"no block marked {marker} in {DOCS}"
    return found.group(1)


def test_documented_hdbscan_example_recovers_the_strands(tmp_path):
    # The example as the docs give it: `dnaembed embed`, then scikit-learn's HDBSCAN.
    run_cli("simulate", "-o", str(tmp_path / "reads"), "--strands", "40", "--length", "120",
            "--preset", "nanopore", "--seed", "2", "-q", check=True)
    run_cli("embed", str(tmp_path / "reads.fastq.gz"), "-o", str(tmp_path / "reads.npy"),
            check=True)
    script = tmp_path / "example.py"
    script.write_text(documented_snippet("sklearn-hdbscan"))
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, timeout=300)
    proc = run_cli("evaluate", str(tmp_path / "clusters.tsv"), "--truth",
                   str(tmp_path / "reads.truth.tsv"), "--json", check=True)
    import json

    s = json.loads(proc.stdout)
    assert s["A_0.9"] >= 0.9 and s["ARI"] >= 0.9, s


# ------------------------------------------------------------------ command line


def test_cli_method_options(tmp_path):
    run_cli("simulate", "-o", str(tmp_path / "s"), "--strands", "20", "--length", "110",
            "--preset", "nanopore", "--reverse-fraction", "0.5", "--seed", "3", "-q",
            check=True)
    reads = str(tmp_path / "s.fastq.gz")
    out = tmp_path / "k.tsv"
    run_cli("cluster", reads, "--method", "kmeans", "--refine", "-o", str(out), check=True)
    assert "refine=True" in out.read_text().splitlines()[0]
    run_cli("cluster", reads, "--method", "dbscan", "--min-cluster-size", "4", "-o",
            str(tmp_path / "d.tsv"), check=True)
    assert "min_cluster_size=4" in (tmp_path / "d.tsv").read_text().splitlines()[0]
    assert_clean_error(run_cli("cluster", reads, "--refine"),
                       "--refine applies to --method kmeans", code=2)
    assert_clean_error(run_cli("cluster", reads, "--method", "kmeans", "--min-cluster-size",
                               "4"), "--min-cluster-size applies to --method dbscan", code=2)
    assert_clean_error(run_cli("cluster", reads, "--method", "dbscan", "--min-cluster-size",
                               "1"), "--min-cluster-size", code=2)
