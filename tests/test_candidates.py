"""The bundled candidate encoder: the model of the neighbour search of `cluster` and `run`."""

import hashlib

import numpy as np
import pytest
import torch
from conftest import assert_clean_error, run_cli

from dnaembed.errors import DnaembedError
from dnaembed.evaluate.embedding import separation_auc
from dnaembed.model.checkpoint import (
    CANDIDATE_MODEL,
    FULL_MODEL,
    bundled_model_path,
    load_model,
    load_search_model,
    search_model_name,
)
from dnaembed.model.encoder import count_parameters
from dnaembed.model.inference import embed_sequences
from dnaembed.sim.channel import PRESETS
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import simulate_reads
from dnaembed.sim.strands import random_strands


@pytest.fixture(scope="module")
def candidates():
    return load_model(CANDIDATE_MODEL).model


def test_bundled_candidate_model_is_small_and_one_pass(candidates):
    path = bundled_model_path(CANDIDATE_MODEL)
    assert path.stat().st_size < 2 * 1024 * 1024
    cfg = candidates.config
    assert (cfg.ends, cfg.views, cfg.embedding_dim) == (1, 1, 64)
    full = load_model(FULL_MODEL).model
    # A quarter of the full model's passes, each through far fewer weights.
    assert count_parameters(candidates) * 4 < count_parameters(full)


def test_candidate_model_digest_is_checked(candidates, tmp_path):
    payload = torch.load(bundled_model_path(CANDIDATE_MODEL), weights_only=True)
    assert len(payload["sha256"]) == 64
    first = sorted(payload["state_dict"])[0]
    payload["state_dict"][first] = payload["state_dict"][first] + 1e-3
    tampered = tmp_path / "tampered.pt"
    torch.save(payload, tampered)
    with pytest.raises(DnaembedError, match="do not match their checksum"):
        load_model(tampered)


def test_candidate_embedding_is_deterministic(candidates):
    seqs = random_strands(120, 150, np.random.default_rng(3))
    a = embed_sequences(candidates, seqs, precision="float32")
    b = embed_sequences(candidates, seqs, precision="float32")
    assert hashlib.sha256(a.tobytes()).digest() == hashlib.sha256(b.tobytes()).digest()
    # The batch only splits the work: the same vectors to rounding.
    c = embed_sequences(candidates, seqs, batch_size=50, precision="float32")
    assert np.allclose(a, c, atol=1e-4)


def test_candidate_distances_separate_same_strand_from_unrelated(candidates):
    rng = np.random.default_rng(11)
    strands = random_strands(150, 150, rng)
    sim = simulate_reads(strands, PRESETS["nanopore"], Coverage("fixed", 2), seed=11)
    first, second = {}, {}
    for i, s in enumerate(sim.strand.tolist()):
        (second if s in first else first).setdefault(s, i)
    keys = sorted(second)
    e = embed_sequences(candidates, sim.seqs, precision="float32")
    a, b = e[[first[k] for k in keys]], e[[second[k] for k in keys]]
    same = ((a - b) ** 2).sum(axis=1)
    other = ((a - np.roll(b, 1, axis=0)) ** 2).sum(axis=1)
    assert separation_auc(same, other) > 0.99
    # On the edit-distance scale: reads of one strand ~2 x 6% x 150 apart, unrelated ~80.
    assert np.median(same) < 35 < np.median(other)


def test_search_model_defaults_follow_the_method(tmp_path):
    assert search_model_name(None, "graph") == CANDIDATE_MODEL
    assert search_model_name(None, "kmeans") == search_model_name(None, "dbscan") == FULL_MODEL
    assert search_model_name("my.pt", "graph") == "my.pt"
    assert load_search_model(None, "graph").model.config.embedding_dim == 64
    assert load_search_model(FULL_MODEL, "graph").model.config.views == 2
    with pytest.raises(DnaembedError, match="no such model file"):
        load_search_model(tmp_path / "missing.pt", "graph")
    with pytest.raises(DnaembedError, match="unknown bundled model"):
        bundled_model_path("bundled-other")


def test_cluster_uses_the_candidate_encoder_unless_told(tmp_path):
    run_cli("simulate", "-o", str(tmp_path / "s"), "--strands", "20", "--length", "120",
            "--preset", "nanopore", "--seed", "2", "-q", check=True)
    reads = str(tmp_path / "s.fastq.gz")
    tables = {}
    for name, extra in (("default", []), ("full", ["-m", "default"])):
        out = tmp_path / f"{name}.tsv"
        run_cli("cluster", reads, "-o", str(out), *extra, check=True)
        tables[name] = out.read_text().splitlines()
    assert "model=candidates" in tables["default"][0]
    assert "model=default" in tables["full"][0]
    # Either encoder only proposes candidates: the exact check gives the same strands here.
    assert len({r.split("\t")[1] for r in tables["default"][2:]}) == len(
        {r.split("\t")[1] for r in tables["full"][2:]})
    bad = run_cli("cluster", reads, "-o", str(tmp_path / "x.tsv"), "-m", str(tmp_path / "no.pt"))
    assert_clean_error(bad, "no.pt: no such model file")
