"""`dnaembed embed`, `cluster` and `evaluate` through the real command line."""

import json
import os
import warnings

import numpy as np
import pytest
from conftest import assert_clean_error, run_cli, train_tiny_model

from dnaembed.io.sequences import read_sequences
from dnaembed.model.checkpoint import load_model
from dnaembed.model.inference import embed_sequences


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """A small simulated run: 30 strands, both orientations, truncated reads, contaminants."""
    d = tmp_path_factory.mktemp("sim")
    run_cli("simulate", "-o", str(d / "s"), "--strands", "30", "--length", "110",
            "--preset", "nanopore", "--reverse-fraction", "0.5", "--truncate-fraction", "0.1",
            "--contaminants", "0.02", "--seed", "4", "-q", check=True)
    return d


@pytest.fixture(scope="module")
def short_window_model(tmp_path_factory):
    """A really trained (tiny, briefly) model whose window (64) is shorter than the reads."""
    d = train_tiny_model(tmp_path_factory.mktemp("model"))
    return d / "best.pt"


def read_clusters(path):
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# dnaembed ") and lines[1].startswith("#read_id\tcluster_id")
    return [line.split("\t") for line in lines[2:]]


def test_cluster_then_evaluate(sim, tmp_path):
    out, centers = tmp_path / "c.tsv", tmp_path / "centers.fasta"
    proc = run_cli("cluster", str(sim / "s.fastq.gz"), "-o", str(out), "--centers",
                   str(centers), check=True)
    err = proc.stderr.decode()
    assert "max distance" in err and "clusters (" in err  # threshold and stage times logged
    rows = read_clusters(out)
    ids = read_sequences(sim / "s.fastq.gz").ids
    assert [r[0] for r in rows] == ids  # every read, in input order
    assert all(r[2] in "+-" for r in rows)
    n_clusters = len({r[1] for r in rows})
    assert centers.read_text().count(">") == n_clusters
    assert centers.read_text().startswith(">0 read=")

    proc = run_cli("evaluate", str(out), "--truth", str(sim / "s.truth.tsv"), "--json",
                   check=True)
    scores = json.loads(proc.stdout)
    assert scores["A_0.9"] >= 0.95 and scores["ARI"] > 0.95, scores
    assert scores["truth_noise_reads"] > 0  # contaminants are noise, not a strand
    text = run_cli("evaluate", str(out), "--truth", str(sim / "s.truth.tsv"), check=True)
    assert text.stdout.decode().startswith("A_0.8")


def test_cluster_methods_and_options(sim, tmp_path):
    for method, extra in (("kmeans", ["-k", "30"]), ("dbscan", ["--eps", "30"])):
        out = tmp_path / f"{method}.tsv"
        run_cli("cluster", str(sim / "s.fastq.gz"), "--method", method, *extra,
                "--strand", "plus", "-o", str(out), check=True)
        rows = read_clusters(out)
        assert all(len(r) == 2 for r in rows)  # no orientation column with --strand plus
    proc = run_cli("cluster", str(sim / "s.fastq.gz"), "--max-dist", "20",
                   "--no-orientation-column", "-q", check=True)
    body = [line for line in proc.stdout.decode().splitlines() if not line.startswith("#")]
    assert body and all(len(line.split("\t")) == 2 for line in body)
    assert "max_dist=20" in proc.stdout.decode().splitlines()[0]


def test_same_seed_same_file(sim, tmp_path):
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    for out in (a, b):
        run_cli("cluster", str(sim / "s.fastq.gz"), "--method", "kmeans", "--index", "hnsw",
                "--seed", "7", "-o", str(out), check=True)
    assert a.read_bytes() == b.read_bytes()


def test_embed_streams_vectors_and_ids(sim, tmp_path):
    out = tmp_path / "emb.npy"
    run_cli("embed", str(sim / "s.fastq.gz"), "-o", str(out), "--chunk-size", "100",
            "--precision", "float32", check=True)
    x = np.load(out)
    ids = (tmp_path / "emb.ids.txt").read_text().splitlines()
    model = load_model(None).model
    assert x.shape == (len(ids), model.config.embedding_dim) and x.dtype == np.float32
    # Streaming in chunks gives the vectors of embedding everything at once.
    reads = read_sequences(sim / "s.fastq.gz")
    assert reads.ids == ids
    whole = embed_sequences(model, reads.seqs, precision="float32")
    assert np.allclose(x, whole, atol=1e-4)
    run_cli("embed", str(sim / "s.fastq.gz"), "-o", str(tmp_path / "h.npy"), "--dtype",
            "float16", check=True)
    half = np.load(tmp_path / "h.npy")
    assert half.dtype == np.float16 and np.allclose(half, whole, rtol=0.03, atol=0.05)


def test_empty_one_read_and_all_n_inputs(tmp_path, write):
    empty = write("empty.fasta", "")
    proc = run_cli("cluster", str(empty), "-o", str(tmp_path / "e.tsv"), check=True)
    assert read_clusters(tmp_path / "e.tsv") == []
    assert "no reads" in proc.stderr.decode()
    run_cli("embed", str(empty), "-o", str(tmp_path / "e.npy"), check=True)
    assert np.load(tmp_path / "e.npy").shape == (0, load_model(None).model.config.embedding_dim)
    one = write("one.fasta", ">r1\nACGTACGTAAACCCGGGTTT\n")
    run_cli("cluster", str(one), "-o", str(tmp_path / "one.tsv"), check=True)
    assert read_clusters(tmp_path / "one.tsv") == [["r1", "0", "+"]]
    all_n = write("n.fasta", "".join(f">n{i}\n{'N' * 100}\n" for i in range(5))
                  + ">a\n" + "ACGT" * 25 + "\n>e\n\n")
    run_cli("cluster", str(all_n), "-o", str(tmp_path / "n.tsv"), check=True)
    rows = read_clusters(tmp_path / "n.tsv")
    assert len({r[1] for r in rows[:5]}) == 1 and len({r[1] for r in rows}) == 3


def test_model_window_shorter_than_the_reads(sim, tmp_path, short_window_model):
    out = tmp_path / "c.tsv"
    proc = run_cli("cluster", str(sim / "s.fastq.gz"), "-m", str(short_window_model), "-o",
                   str(out), check=True)
    assert "longer than the model's window of 64" in proc.stderr.decode()
    assert len(read_clusters(out)) > 0
    proc = run_cli("embed", str(sim / "s.fastq.gz"), "-m", str(short_window_model), "-o",
                   str(tmp_path / "e.npy"), check=True)
    assert "first 64 bases" in proc.stderr.decode()
    assert np.load(tmp_path / "e.npy").shape[1] == 16


def test_clean_errors_and_no_partial_output(sim, tmp_path, write):
    out = tmp_path / "c.tsv"
    reads = str(sim / "s.fastq.gz")
    assert_clean_error(run_cli("cluster", reads, "-m", str(tmp_path / "nope.pt"), "-o",
                               str(out)), "no such model file")
    assert_clean_error(run_cli("cluster", str(tmp_path / "missing.fq"), "-o", str(out)),
                       "missing.fq: no such file")
    bad = write("bad.fasta", ">r1\nACGTXX\n")
    assert_clean_error(run_cli("cluster", str(bad), "-o", str(out)), "invalid character")
    assert_clean_error(run_cli("embed", str(bad), "-o", str(tmp_path / "e.npy")),
                       "invalid character")
    garbage = tmp_path / "garbage.fq"
    garbage.write_bytes(b"\x00\x01binary")
    assert_clean_error(run_cli("cluster", str(garbage), "-o", str(out)), "garbage.fq")
    if os.geteuid() != 0:  # root reads anything
        locked = write("locked.fasta", ">r\nACGT\n")
        locked.chmod(0)
        assert_clean_error(run_cli("cluster", str(locked), "-o", str(out)), "permission")
    assert_clean_error(run_cli("cluster", reads, "-o", str(tmp_path / "no" / "c.tsv")),
                       "does not exist")
    assert_clean_error(run_cli("cluster", reads, "--index-dim", "-1", "-o", str(out)),
                       "--index-dim", code=2)
    assert_clean_error(run_cli("cluster", reads, "--k", "3"), "--k applies to --method kmeans",
                       code=2)
    # Options with a default, given for a method that would ignore them.
    assert_clean_error(run_cli("cluster", reads, "--index", "hnsw", "-o", str(out)),
                       "--index applies to --method kmeans and dbscan only", code=2)
    assert_clean_error(run_cli("cluster", reads, "--method", "kmeans", "--partition-size",
                               "1024", "-o", str(out)),
                       "--partition-size applies to --method graph only", code=2)
    assert not out.exists() and not (tmp_path / "e.npy").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_evaluate_errors(sim, tmp_path, write):
    clusters = write("c.tsv", "r1\t0\nr1\t1\n")
    truth = str(sim / "s.truth.tsv")
    assert_clean_error(run_cli("evaluate", str(clusters), "--truth", truth), "listed twice")
    other = write("o.tsv", "x1\t0\nx2\t0\n")
    assert_clean_error(run_cli("evaluate", str(other), "--truth", truth), "same reads")
    assert_clean_error(run_cli("evaluate", str(other)), "--truth", code=2)
    assert_clean_error(run_cli("evaluate", str(tmp_path / "none.tsv"), "--truth", truth),
                       "no such file")
    # An empty truth or set of references scored nan with status 0.
    empty, no_refs = write("empty.tsv", ""), write("empty.fasta", "")
    assert_clean_error(run_cli("evaluate", str(other), "--truth", str(empty)),
                       "empty.tsv: no reads (an empty truth table)")
    assert_clean_error(run_cli("evaluate", str(sim / "s.refs.fasta"), "--refs", str(no_refs)),
                       "empty.fasta: no reference sequences")
    assert_clean_error(run_cli("evaluate", str(other), "--format", "starcode", "--truth",
                               truth), "--format starcode needs --reads", code=2)
    assert_clean_error(run_cli("evaluate", "-", "--truth", "-"),
                       "RESULT and --truth cannot both be standard input", code=2)
    # Clustered reads that the truth lacks are said: they scored A_gamma 0 beside ARI 1.
    rows = (sim / "s.truth.tsv").read_text().splitlines()
    half = write("half.tsv", "\n".join(rows[: len(rows) // 2]) + "\n")
    proc = run_cli("evaluate", truth, "--truth", str(half), check=True)
    assert f"s.truth.tsv: {len(rows) - len(rows) // 2:,} of the clustered reads are not in " \
        f"{half}: scored as reads of no strand" in proc.stderr.decode()


def test_evaluate_refs_json_names_the_strands_file(sim, tmp_path):
    """The JSON's "strands" (the file's name) was replaced by the scores' count of strands."""
    refs = str(sim / "s.refs.fasta")
    proc = run_cli("evaluate", refs, "--refs", refs, "--json", check=True)
    scores = json.loads(proc.stdout)
    assert scores["strands_file"] == refs and scores["refs"] == refs
    assert scores["strands"] == scores["references"] == len(read_sequences(refs))
    assert scores["exact"] == 1.0


def test_evaluate_refuses_an_empty_reference(tmp_path, write):
    """An empty reference matched an empty strand exactly ("exact 1.0") and its error per
    position was 0/0: numpy's RuntimeWarning, two lines of source, on stderr."""
    write("s.fa", ">s\n\n")
    write("r.fa", ">x\nACGTACGTAC\n>e\n\n")
    err = assert_clean_error(run_cli("evaluate", "s.fa", "--refs", "r.fa", cwd=tmp_path),
                             "r.fa: record 2 (e): empty sequence")
    assert len(err.strip().splitlines()) == 1 and "Warning" not in err
    # Empty recovered strands are strands like any other.
    write("r1.fa", ">x\nACGTACGTAC\n")
    proc = run_cli("evaluate", "s.fa", "--refs", "r1.fa", "--json", cwd=tmp_path, check=True)
    assert json.loads(proc.stdout)["found"] == 0.0 and not proc.stderr
    # The library's scores of an empty reference found: nan, not numpy's 0/0.
    from dnaembed.evaluate.recovery import recovery_scores

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = recovery_scores([""], [""])
    assert scores["exact"] == 1.0 and np.isnan(scores["error_per_position"])


def simulate_cluster_score(tmp_path, *simulate_args: str) -> tuple[str, dict]:
    """Simulate a run (``simulate_args``), cluster it on one thread: the log, the scores."""
    prefix = tmp_path / "sim"
    run_cli("simulate", "-o", str(prefix), *simulate_args, "-q", check=True)
    out = tmp_path / "c.tsv"
    log = run_cli("cluster", f"{prefix}.fastq.gz", "-o", str(out), "-t", "1",
                  check=True).stderr.decode()
    scores = json.loads(run_cli("evaluate", str(out), "--truth", f"{prefix}.truth.tsv",
                                "--json", check=True).stdout)
    return log, scores


def test_a_sparse_run_of_strands_sharing_primers_is_not_merged(tmp_path):
    # A quarter of a read per strand (the head of a big run, a small pool sampled): nearly
    # every sampled pair is unrelated, in two populations (the same orientation, sharing
    # the primers, and the other), and the threshold took the nearer of those for the
    # same-strand pairs: max distance 94 of 190 nt, every read in a few clusters, A_0.9 0.
    log, scores = simulate_cluster_score(
        tmp_path, "--strands", "4000", "--preset", "nanopore", "--primers", "20",
        "--reverse-fraction", "0.5", "--coverage", "poisson", "--mean-coverage", "0.25",
        "--seed", "3")
    assert int(log.split("max distance ")[1].split()[0]) < 60, log
    assert scores["A_0.9"] >= 0.99, scores


def test_few_strands_read_many_times_keep_their_partners_apart(tmp_path):
    # 10 designs in pairs 20 substitutions apart, 300 reads each: a read's neighbours are
    # all its own strand's, the sample had no second peak, and the fallback cut (45 edits)
    # merged each pair of partners: 5 clusters of 10 strands, A_0.9 0.
    _, scores = simulate_cluster_score(
        tmp_path, "--strands", "10", "--preset", "illumina-array", "--partners", "1.0",
        "--partner-edits", "20", "--coverage", "fixed", "--mean-coverage", "300",
        "--seed", "0")
    assert scores["A_0.9"] == 1.0, scores


@pytest.mark.parametrize(("preset", "edits", "strands", "seed", "before"), [
    ("illumina-array", "8", "300", "0", 0.01),  # the tail measured over both: cut 18
    ("nanopore", "20", "400", "1", 0.01),  # the same, and the trough's bin within the cut
    # Past the valley (pairs ~16 edits apart, partners ~49, unrelated ~79): the cut was
    # below them, the rescue's bound (halfway to the unrelated peak) was not, and it moved
    # the reads of strands read once or twice into their partners' clusters.
    ("nanopore", "40", "300", "0", 0.96),
])
def test_partners_close_to_the_same_strand_pairs_stay_apart(tmp_path, preset, edits,
                                                            strands, seed, before):
    # Every design has a partner EDITS substitutions away, read ~10 times (some strands
    # once or twice). ``before``: A_0.9 of the code before.
    log, scores = simulate_cluster_score(
        tmp_path, "--strands", strands, "--preset", preset, "--partners", "1.0",
        "--partner-edits", edits, "--seed", seed)
    assert scores["A_0.9"] >= 0.97, scores
    assert "related designs" in log, log
