"""`dnaembed run` (cluster + consensus), `evaluate --refs` and `demo`: real CLI, real files."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_error, run_cli

from dnaembed.encoding import reverse_complement
from dnaembed.io.sequences import read_sequences
from dnaembed.io.tables import read_table


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """40 strands of 120 nt read in both orientations, some reads truncated."""
    d = tmp_path_factory.mktemp("sim")
    run_cli("simulate", "-o", str(d / "s"), "--strands", "40", "--length", "120",
            "--preset", "illumina-array", "--reverse-fraction", "0.5",
            "--truncate-fraction", "0.05", "--mean-coverage", "8", "--coverage", "fixed",
            "--seed", "3", "-q", check=True)
    return d


def test_run_writes_clusters_and_strands_and_scores_them(sim, tmp_path):
    out = tmp_path / "out"
    proc = run_cli("run", str(sim / "s.fastq.gz"), "-o", str(out), "--length", "120",
                   "--truth", str(sim / "s.truth.tsv"), "--refs", str(sim / "s.refs.fasta"),
                   "--json", check=True)
    summary = json.loads(proc.stdout)
    counts, scores = summary["counts"], summary["scores"]
    assert counts["reads"] == 320
    assert scores["clustering"]["A_0.9"] >= 0.95, summary
    assert scores["recovery"]["exact"] >= 0.95, summary
    # Every read is in the clusters table, with an orientation.
    rows = read_table(out / "clusters.tsv")
    assert len(rows) == 320 and {r[2] for r in rows} == {"+", "-"}
    # The strands are the designs (in one orientation or the other), one per cluster.
    refs = set(read_sequences(sim / "s.refs.fasta").seqs)
    strands = read_sequences(out / "strands.fasta")
    found = sum(s in refs or reverse_complement(s) in refs for s in strands.seqs)
    assert found >= 38
    assert len(strands) == counts["strands"] == counts["clusters"]
    report = read_table(out / "strands.tsv")
    assert [r[0] for r in report] == strands.ids
    assert sum(int(r[1]) for r in report) == 320  # every non-empty read voted somewhere

    # The same scores from `evaluate`, on the files `run` wrote.
    proc = run_cli("evaluate", str(out / "strands.fasta"), "--refs", str(sim / "s.refs.fasta"),
                   "--json", check=True)
    assert json.loads(proc.stdout)["exact"] == scores["recovery"]["exact"]
    text = run_cli("evaluate", str(out / "strands.fasta"), "--refs",
                   str(sim / "s.refs.fasta"), check=True).stdout.decode()
    assert "exact" in text and "within 3" in text


def test_run_same_seed_same_files(sim, tmp_path):
    for name in ("a", "b"):
        run_cli("run", str(sim / "s.fastq.gz"), "-o", str(tmp_path / name), "--seed", "2",
                "-q", check=True)
    for file in ("clusters.tsv", "strands.fasta", "strands.tsv"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()


def test_run_plus_strand_and_min_size(sim, tmp_path):
    out = tmp_path / "out"
    run_cli("run", str(sim / "s.fastq.gz"), "-o", str(out), "--strand", "plus",
            "--min-size", "3", "-q", check=True)
    rows = read_table(out / "clusters.tsv")
    assert all(len(r) == 2 for r in rows)  # no orientation column
    assert all(int(r[1]) >= 3 for r in read_table(out / "strands.tsv"))


def test_run_bad_inputs_fail_cleanly_without_output(sim, tmp_path, write):
    bad = write("bad.fa", ">r1\nACGT\n>r2\nACXT\n")
    out = tmp_path / "out"
    err = assert_clean_error(run_cli("run", str(bad), "-o", str(out)), "bad.fa", "r2")
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    err = assert_clean_error(run_cli("run", str(sim / "s.fastq.gz"), "-o", str(out),
                                     "--refs", str(tmp_path / "missing.fasta")), "missing.fasta")
    assert not out.exists()
    err = assert_clean_error(run_cli("run", str(sim / "s.fastq.gz"), "-o", str(out),
                                     "--truth", str(tmp_path / "nope.tsv")), "nope.tsv")
    assert not out.exists()
    blocker = write("file", "x")
    assert_clean_error(run_cli("run", str(sim / "s.fastq.gz"), "-o", str(blocker)),
                       "is a file", code=2)
    assert_clean_error(run_cli("run", str(sim / "s.fastq.gz"), "-o", str(out), "-m",
                               str(tmp_path / "nope.pt")), "nope.pt")


def test_run_on_an_empty_file(tmp_path, write):
    empty = write("empty.fq", "")
    out = tmp_path / "out"
    run_cli("run", str(empty), "-o", str(out), "-q", check=True)
    assert read_table(out / "clusters.tsv") == []
    assert read_sequences(out / "strands.fasta").seqs == []


def test_the_printed_line_names_the_directory_with_one_slash():
    # "-o out/" printed "... strands in out// (clusters.tsv, ...)".
    from dnaembed.cli.run import format_run

    summary = {"counts": {"reads": 3, "clusters": 2, "strands": 2}}
    for out_dir in ("out", "out/"):
        assert format_run(summary, out_dir) == ("3 reads -> 2 clusters -> 2 strands in out/ "
                                                "(clusters.tsv, strands.fasta, strands.tsv)")


def test_evaluate_needs_exactly_one_reference(sim):
    strands = str(sim / "s.refs.fasta")
    assert_clean_error(run_cli("evaluate", strands), "--truth", "--refs", code=2)
    assert_clean_error(run_cli("evaluate", strands, "--refs", strands, "--truth",
                               str(sim / "s.truth.tsv")), "one of", code=2)
    # The references against themselves: everything recovered exactly.
    proc = run_cli("evaluate", strands, "--refs", strands, "--json", check=True)
    scores = json.loads(proc.stdout)
    assert scores["exact"] == 1.0 and scores["error_per_position"] == 0.0


def test_demo_runs_the_whole_chain(tmp_path):
    proc = run_cli("demo", "-o", str(tmp_path / "demo"), "--strands", "30", check=True)
    text = proc.stdout.decode()
    assert "A_0.9" in text and "exact" in text
    for name in ("reads.fastq.gz", "reads.truth.tsv", "reads.refs.fasta", "clusters.tsv",
                 "strands.fasta"):
        assert (tmp_path / "demo" / name).exists(), name


def test_a_truth_on_standard_input_is_scored_and_messages_name_the_outputs(sim, tmp_path):
    # `--truth -` was read once to check it, then again to score: "internal error:
    # ValueError: I/O operation on closed file". And the warning of clustered reads the
    # truth lacks named clusters.tsv by its temporary path, OUT/.dnaembed-XXXX.tmp/...
    lines = (sim / "s.truth.tsv").read_text().splitlines()
    (tmp_path / "half.tsv").write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    by_file = run_cli("run", str(sim / "s.fastq.gz"), "-o", str(tmp_path / "a"), "--truth",
                      str(tmp_path / "half.tsv"), "--json", check=True)
    piped = run_cli("run", str(sim / "s.fastq.gz"), "-o", str(tmp_path / "b"), "--truth", "-",
                    "--json", stdin=(tmp_path / "half.tsv").read_bytes())
    assert piped.returncode == 0, piped.stderr.decode()
    scores = [json.loads(p.stdout)["scores"] for p in (by_file, piped)]
    assert scores[0] == scores[1] and scores[0]["clustering"]["A_0.9"] < 0.9
    err = piped.stderr.decode()
    assert f"{tmp_path / 'b' / 'clusters.tsv'}: " in err and "are not in <stdin>" in err, err
    assert ".dnaembed-" not in err + by_file.stderr.decode()


def test_a_truth_of_more_reads_than_the_run_scores_the_runs_reads(sim, tmp_path):
    # The whole data set's truth with a subset of its reads: every other read of the truth
    # counted as a cluster the run missed (A_0.9 near 0), and the warning said to give
    # --reads, which run has not.
    from dnaembed.io.sequences import write_sequences

    reads = read_sequences(sim / "s.fastq.gz")
    half = sorted(set(reads.ids[::2]))
    keep = [i for i, rid in enumerate(reads.ids) if rid in set(half)]
    write_sequences(tmp_path / "half.fastq", [reads.ids[i] for i in keep],
                    [reads.seqs[i] for i in keep], [reads.quals[i] for i in keep])
    rows = [line for line in (sim / "s.truth.tsv").read_text().splitlines()
            if line.split("\t")[0] in set(half)]
    (tmp_path / "half.tsv").write_text("\n".join(rows) + "\n")
    scores = []
    for truth in (sim / "s.truth.tsv", tmp_path / "half.tsv"):
        proc = run_cli("run", str(tmp_path / "half.fastq"), "-o", str(tmp_path / truth.stem),
                       "--truth", str(truth), "--json", "--seed", "1", check=True)
        scores.append(json.loads(proc.stdout)["scores"]["clustering"])
        assert "--reads" not in proc.stderr.decode()
    assert scores[0] == scores[1] and scores[0]["A_0.9"] >= 0.9, scores
    (tmp_path / "other.tsv").write_text("zz\tstrand1\n")
    proc = run_cli("run", str(tmp_path / "half.fastq"), "-o", str(tmp_path / "x"), "--truth",
                   str(tmp_path / "other.tsv"))
    assert_clean_error(proc, "other.tsv: no read of a strand among the run's reads")
    assert not (tmp_path / "x").exists()
