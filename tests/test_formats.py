"""Other tools' cluster formats: `cluster --format`, `--centers --size-labels`, `evaluate
--format` on real vsearch, CD-HIT-EST and MMseqs2 output, compressed outputs by name."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_clean_error, run_cli

from dnaembed.cluster.result import ClusterResult
from dnaembed.encoding import reverse_complement
from dnaembed.errors import InputError
from dnaembed.io.formats import (
    parse_clstr,
    parse_mmseqs,
    parse_starcode,
    parse_uc,
    read_assignments,
    write_cluster_format,
)
from dnaembed.io.sequences import read_sequences
from dnaembed.io.tables import read_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from peers.convert import complete, write_cluster_tsv, write_fasta  # noqa: E402

needs = {tool: pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} not installed")
         for tool in ("vsearch", "cd-hit-est", "mmseqs")}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """30 strands of 110 nt at nanopore rates, half the reads reverse-complemented; clustered."""
    d = tmp_path_factory.mktemp("formats")
    run_cli("simulate", "-o", str(d / "s"), "--strands", "30", "--length", "110",
            "--preset", "nanopore", "--reverse-fraction", "0.5", "--seed", "8", "-q",
            check=True)
    run_cli("cluster", str(d / "s.fastq.gz"), "-o", str(d / "c.uc"), "--format", "uc",
            "--centers", str(d / "centers.fasta"), "--size-labels", "--json",
            str(d / "c.json"), "-q", check=True)
    reads = read_sequences(d / "s.fastq.gz")
    write_fasta(d / "s.fasta", reads.ids, reads.seqs)
    return d


def _partition(mapping: dict[str, str]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for rid, label in mapping.items():
        groups.setdefault(label, set()).add(rid)
    return {frozenset(g) for g in groups.values()}


def _cigar_lengths(cigar: str) -> tuple[int, int]:
    """(query, target) bases an alignment in vsearch's letters covers."""
    query = target = 0
    for count, op in re.findall(r"(\d*)([MDI])", cigar):
        n = int(count or 1)
        query += n if op in "MD" else 0
        target += n if op in "MI" else 0
    return query, target


def test_uc_output_has_vsearch_fields(sim):
    reads = read_sequences(sim / "s.fastq.gz")
    seq = dict(zip(reads.ids, reads.seqs))
    records = [line.split("\t") for line in (sim / "c.uc").read_text().splitlines()]
    assert all(len(r) == 10 for r in records)
    kinds = [r[0] for r in records]
    assert set(kinds) == {"S", "H", "C"}
    assert kinds.index("C") == len(kinds) - kinds.count("C")  # summaries last
    centroids = {r[1]: r[8] for r in records if r[0] == "S"}
    sizes = {r[1]: int(r[2]) for r in records if r[0] == "C"}
    assert set(centroids) == set(sizes) == {str(c) for c in range(len(centroids))}
    members = [r[8] for r in records if r[0] in "SH"]
    assert sorted(members) == sorted(reads.ids)  # every read once
    for r in records:
        if r[0] == "S":
            assert r[2] == str(len(seq[r[8]])) and r[3:8] == ["*"] * 5 and r[9] == "*"
        elif r[0] == "H":
            assert r[9] == centroids[r[1]] and r[2] == str(len(seq[r[8]]))
            assert 0.0 <= float(r[3]) <= 100.0 and r[4] in "+-" and r[5:7] == ["0", "0"]
            query = seq[r[8]] if r[4] == "+" else reverse_complement(seq[r[8]])
            if r[7] == "=":
                assert query == seq[r[9]]
            else:
                assert _cigar_lengths(r[7]) == (len(query), len(seq[r[9]]))
        else:
            assert r[8] == centroids[r[1]]
    assert sum(sizes.values()) == len(reads)
    # The same clusters as the default table; reverse reads are on the '-' strand.
    table = run_cli("cluster", str(sim / "s.fastq.gz"), "-q", check=True).stdout.decode()
    rows = [line.split("\t") for line in table.splitlines() if not line.startswith("#")]
    assert _partition(parse_uc((sim / "c.uc").read_text().splitlines())) == _partition(
        {r[0]: r[1] for r in rows})
    strands = {r[8]: r[4] for r in records if r[0] == "H"}
    sign = {r[0]: r[2] for r in rows}
    for rid, strand in strands.items():
        rep = centroids[next(r[1] for r in records if r[0] == "H" and r[8] == rid)]
        assert (strand == "-") == (sign[rid] != sign[rep])


@needs["vsearch"]
def test_size_labelled_centers_are_read_by_vsearch_sizein(sim, tmp_path):
    sizes = {r[1]: int(r[2]) for r in (line.split("\t") for line in
             (sim / "c.uc").read_text().splitlines()) if r[0] == "C"}
    sorted_fa = tmp_path / "sorted.fasta"
    subprocess.run(["vsearch", "--sortbysize", str(sim / "centers.fasta"), "--sizein",
                    "--sizeout", "--output", str(sorted_fa), "--quiet"], check=True)
    labels = read_sequences(sorted_fa).ids
    got = [int(re.search(r";size=(\d+)", label).group(1)) for label in labels]
    assert got == sorted(sizes.values(), reverse=True)
    assert all(f"cluster={c};" in label for label in labels for c in
               [re.search(r"cluster=(\d+)", label).group(1)])
    # Clustering the centers with --sizein: vsearch's cluster sizes add up the abundances.
    uc = tmp_path / "again.uc"
    subprocess.run(["vsearch", "--cluster_size", str(sim / "centers.fasta"), "--sizein",
                    "--id", "0.99", "--uc", str(uc), "--quiet"], check=True)
    total = sum(int(r.split("\t")[2]) for r in uc.read_text().splitlines() if r[0] == "C")
    assert total == sum(sizes.values())


def test_clstr_and_mmseqs_writers_and_readers(sim, tmp_path):
    reads = read_sequences(sim / "s.fastq.gz")
    labels = read_assignments(sim / "c.uc", "uc")  # cluster ids 0, 1, ...
    index = {rid: k for k, rid in enumerate(reads.ids)}
    centroids = [line.split("\t") for line in (sim / "c.uc").read_text().splitlines()
                 if line.startswith("S")]
    reps = np.array([index[r[8]] for r in sorted(centroids, key=lambda r: int(r[1]))])
    label = np.array([int(labels[r]) for r in reads.ids])
    result = ClusterResult(label, np.zeros(len(label), dtype=np.int8), reps, "plus", "graph")
    for fmt, parse in (("clstr", parse_clstr), ("mmseqs", parse_mmseqs)):
        path = tmp_path / f"c.{fmt}.gz"
        write_cluster_format(path, fmt, reads.ids, reads.seqs, result)
        assert path.read_bytes()[:2] == b"\x1f\x8b"  # compressed by its name
        text = gzip.decompress(path.read_bytes()).decode()
        assert _partition(parse(text.splitlines())) == _partition(labels)
        assert _partition(read_assignments(path, fmt)) == _partition(labels)
    clstr = gzip.decompress((tmp_path / "c.clstr.gz").read_bytes()).decode()
    assert clstr.count(">Cluster") == len(reps) and clstr.count("... *") == len(reps)
    if Path("/usr/lib/cd-hit/clstr2txt.pl").exists():  # CD-HIT's own reader of .clstr
        (tmp_path / "c.clstr").write_text(clstr)
        rows = subprocess.run(["perl", "/usr/lib/cd-hit/clstr2txt.pl", str(tmp_path / "c.clstr")],
                              capture_output=True, text=True, check=True).stdout.splitlines()
        table = [row.split("\t") for row in rows[1:]]
        assert sorted(r[0] for r in table) == sorted(reads.ids)
        assert _partition({r[0]: r[1] for r in table}) == _partition(labels)
        assert sum(r[4] == "1" for r in table) == len(reps)


def _run_peer(tool: str, fasta: Path, work: Path) -> tuple[Path, str]:
    work.mkdir()
    if tool == "vsearch":
        subprocess.run(["vsearch", "--cluster_fast", str(fasta), "--id", "0.8", "--strand",
                        "both", "--threads", "1", "--uc", str(work / "out.uc"), "--quiet"],
                       check=True, capture_output=True)
        return work / "out.uc", "uc"
    if tool == "cd-hit-est":
        subprocess.run(["cd-hit-est", "-i", str(fasta), "-o", str(work / "out"), "-c", "0.8",
                        "-n", "5", "-r", "1", "-T", "1", "-M", "0", "-d", "0"],
                       check=True, capture_output=True)
        return work / "out.clstr", "clstr"
    subprocess.run(["mmseqs", "easy-linclust", str(fasta), str(work / "out"), str(work / "tmp"),
                    "--min-seq-id", "0.8", "-c", "0.8", "--cov-mode", "1",
                    "--kmer-per-seq-scale", "0.3", "-k", "10", "--kmer-per-seq", "80",
                    "--threads", "1"], check=True, capture_output=True)
    return work / "out_cluster.tsv", "mmseqs"


@pytest.mark.parametrize("tool", [pytest.param(t, marks=needs[t]) for t in needs])
def test_evaluate_format_scores_real_peer_output_as_the_benchmark_did(sim, tmp_path, tool):
    """`evaluate --format` on the tool's own file = the benchmark's convert-then-TSV scores."""
    output, fmt = _run_peer(tool, sim / "s.fasta", tmp_path / tool)
    reads = read_sequences(sim / "s.fastq.gz")
    mapping = read_assignments(output, fmt)
    assert set(mapping) <= set(reads.ids) and len(mapping) >= 0.9 * len(reads)
    filled, _ = complete(mapping, reads.ids)
    write_cluster_tsv(filled, tmp_path / "converted.tsv")
    truth = str(sim / "s.truth.tsv")
    direct = json.loads(run_cli("evaluate", str(output), "--format", fmt, "--truth", truth,
                                "--reads", str(sim / "s.fastq.gz"), "--json",
                                check=True).stdout)
    converted = json.loads(run_cli("evaluate", str(tmp_path / "converted.tsv"), "--truth",
                                   truth, "--json", check=True).stdout)
    for key in ("A_0.8", "A_0.9", "A_1.0", "ARI", "NMI", "reads_scored"):
        assert direct[key] == pytest.approx(converted[key], abs=1e-12), key


def test_starcode_and_malformed_inputs():
    ids = ["r1", "r2", "r3", "r4"]
    got = parse_starcode(["ACGT\t2\t1,2", "TTTT\t2\tTTTT,TTTA\t4,3"], ids)
    assert _partition(got) == {frozenset({"r1", "r2"}), frozenset({"r3", "r4"})}
    with pytest.raises(InputError, match="line 1: no sequence numbers.*--seq-id"):
        parse_starcode(["ACGT\t2"], ids, "x.txt")
    with pytest.raises(InputError, match="x.txt: line 1: sequence number 9"):
        parse_starcode(["ACGT\t1\t9"], ids, "x.txt")
    with pytest.raises(InputError, match="x.uc: line 2: not a .uc record"):
        parse_uc(["S\t0\t5\t*\t*\t*\t*\t*\tr1\t*", "hello"], "x.uc")
    with pytest.raises(InputError, match="line 1: member line before any"):
        parse_clstr(["0\t5nt, >r1... *"], "x.clstr")
    with pytest.raises(InputError, match="line 1: expected representative<TAB>member"):
        parse_mmseqs(["r1 r2"], "x.tsv")


def test_evaluate_format_errors(sim, tmp_path, write):
    truth = str(sim / "s.truth.tsv")
    bad = write("bad.uc", "not a uc file\n")
    assert_clean_error(run_cli("evaluate", str(bad), "--format", "uc", "--truth", truth),
                       "bad.uc: line 1: not a .uc record")
    starcode = write("s.txt", "ACGT\t2\t1,2\n")
    assert_clean_error(run_cli("evaluate", str(starcode), "--format", "starcode", "--truth",
                               truth), "--reads", code=2)
    assert_clean_error(run_cli("evaluate", str(bad), "--format", "nope", "--truth", truth),
                       "--format", code=2)


def test_every_output_compressed_by_its_name(sim, tmp_path):
    reads = str(sim / "s.fastq.gz")
    run_cli("cluster", reads, "-o", str(tmp_path / "c.tsv.gz"), "--centers",
            str(tmp_path / "centers.fa.gz"), "--json", str(tmp_path / "s.json.gz"), "-q",
            check=True)
    run_cli("consensus", reads, str(tmp_path / "c.tsv.gz"), "-o", str(tmp_path / "s.fa.gz"),
            "--report", str(tmp_path / "r.tsv.gz"), "--json", str(tmp_path / "k.json.gz"),
            "-q", check=True)
    for name in ("c.tsv.gz", "centers.fa.gz", "s.json.gz", "s.fa.gz", "r.tsv.gz", "k.json.gz"):
        assert (tmp_path / name).read_bytes()[:2] == b"\x1f\x8b", name
    rows = read_table(tmp_path / "c.tsv.gz")
    assert len(rows) == len(read_sequences(reads))
    summary = json.loads(gzip.decompress((tmp_path / "s.json.gz").read_bytes()))
    assert summary["counts"]["clusters"] == len({r[1] for r in rows})
    assert len(read_sequences(tmp_path / "s.fa.gz")) == len(read_table(tmp_path / "r.tsv.gz"))


def test_peer_readers_refuse_a_read_twice_empty_ids_and_bad_numbers():
    """A read on two lines was scored in its last cluster, an empty id or label as a read or
    cluster of its own, and starcode's '1,,2' ended in 'internal error: ValueError'."""
    ids = ["r1", "r2", "r3"]
    uc_s = "S\t0\t5\t*\t*\t*\t*\t*\tr1\t*"
    with pytest.raises(InputError, match=r"x.uc: line 3: read r2 listed twice \(first on line 2"):
        parse_uc([uc_s, "H\t0\t5\t99\t+\t0\t0\t5M\tr2\tr1", "H\t1\t5\t99\t+\t0\t0\t5M\tr2\tr1"],
                 "x.uc")
    # A file cut short within its last query label: nine fields, and r2 for r23.
    with pytest.raises(InputError, match="x.uc: line 2: not a .uc record"):
        parse_uc([uc_s, "H\t0\t5\t99\t+\t0\t0\t5M\tr2"], "x.uc")
    with pytest.raises(InputError, match="x.uc: line 1: empty read id"):
        parse_uc(["S\t0\t5\t*\t*\t*\t*\t*\t\t*"], "x.uc")
    with pytest.raises(InputError, match="x.uc: line 1: read r1: empty cluster number"):
        parse_uc(["S\t\t5\t*\t*\t*\t*\t*\tr1\t*"], "x.uc")
    # vsearch --notrunclabels: the whole header; the read id is its first word.
    assert parse_uc(["S\t0\t5\t*\t*\t*\t*\t*\tr1 run=7 ch=3\t*"]) == {"r1": "0"}
    with pytest.raises(InputError, match="x.clstr: line 4: read r1 listed twice"):
        parse_clstr([">Cluster 0", "0\t5nt, >r1... *", ">Cluster 1", "0\t5nt, >r1... *"],
                    "x.clstr")
    with pytest.raises(InputError, match="x.clstr: line 2: empty read id"):
        parse_clstr([">Cluster 0", "0\t5nt, >... *"], "x.clstr")
    assert parse_mmseqs(["r1 ch=1\tr2 ch=4"]) == {"r2": "r1"}  # createtsv --full-header
    with pytest.raises(InputError, match="x.tsv: line 2: read r1 listed twice"):
        parse_mmseqs(["r1\tr1", "r2\tr1"], "x.tsv")
    with pytest.raises(InputError, match="x.tsv: line 1: read r2: empty representative"):
        parse_mmseqs(["\tr2"], "x.tsv")
    with pytest.raises(InputError, match="x.txt: line 2: read r2 listed twice"):
        parse_starcode(["ACGT\t2\t1,2", "TTTT\t2\t2,3"], ids, "x.txt")
    # Two runs' files joined: their cluster numbers both start at 0 and merged clusters.
    with pytest.raises(InputError, match=r"x.uc: line 2: a second centroid \(S\) record of "
                       r"cluster 0 \(first on line 1\): are two files joined"):
        parse_uc([uc_s, "S\t0\t5\t*\t*\t*\t*\t*\tr2\t*"], "x.uc")
    with pytest.raises(InputError, match="x.clstr: line 3: a second '>Cluster' line of "
                       "cluster 0"):
        parse_clstr([">Cluster 0", "0\t5nt, >r1... *", ">Cluster 0", "0\t5nt, >r2... *"],
                    "x.clstr")
    # An id with dots of its own: up to CD-HIT's last '...', not its first.
    assert parse_clstr([">Cluster 0", "0\t5nt, >r1...b2... *", "1\t5nt, >r...3... at "
                        "+/90.00%"]) == {"r1...b2": "0", "r...3": "0"}
    for numbers in ("1,,2", ",1", "1,", "²"):
        with pytest.raises(InputError, match="x.txt: line 1: no sequence numbers"):
            parse_starcode([f"ACGT\t2\t{numbers}"], ids, "x.txt")


def test_evaluate_names_lines_and_refuses_empty_clusters(tmp_path, write):
    """A truth's repeated read was named by its rank among the rows ('data row 3'), not its
    line; an empty clusters file scored every read a singleton with status 0; an empty
    cluster id was a cluster of its own."""
    truth = write("t.tsv", "# made by hand\n#read_id\tstrand_id\nr1\ts1\n\nr2\ts1\nr1\ts2\n")
    clusters = write("c.tsv", "r1\t0\nr2\t0\n")
    err = assert_clean_error(run_cli("evaluate", str(clusters), "--truth", str(truth)),
                             "t.tsv: line 6: read r1 listed twice (first on line 3)")
    assert len(err.strip().splitlines()) == 1
    good = write("g.tsv", "r1\ts1\nr2\ts1\nr3\ts2\n")
    for fmt in ("tsv", "uc", "clstr", "mmseqs"):
        empty = write(f"empty.{fmt}", "")
        assert_clean_error(run_cli("evaluate", str(empty), "--format", fmt, "--truth",
                                   str(good)), f"empty.{fmt}: no clustered reads")
    unlabelled = write("u.tsv", "r1\t0\nr2\t\nr3\t1\n")
    assert_clean_error(run_cli("evaluate", str(unlabelled), "--truth", str(good)),
                       "u.tsv: line 2: read r2: empty cluster id")


def test_evaluate_scores_only_the_given_reads_and_warns_of_missing_ones(tmp_path, write):
    """With --reads, the truth's reads that are not among them were scored as singletons
    (a subset scored A_1.0 0.5 for a perfect clustering); without it, the missing reads
    go to stderr with their count."""
    truth = write("t.tsv", "r1\ts1\nr2\ts1\nr3\ts2\nr4\ts2\n")
    reads = write("r.fa", ">r1\nACGT\n>r2\nACGT\n")
    clusters = write("c.mm", "r1\tr1\nr1\tr2\n")
    proc = run_cli("evaluate", str(clusters), "--format", "mmseqs", "--truth", str(truth),
                   "--reads", str(reads), "--json", check=True)
    scores = json.loads(proc.stdout)
    assert scores["A_1.0"] == 1.0 and scores["reads_scored"] == 2
    assert scores["reads_missing"] == 0 and scores["true_clusters"] == 1
    assert b"lacks" not in proc.stderr
    proc = run_cli("evaluate", clusters.name, "--format", "mmseqs", "--truth", truth.name,
                   "--json", cwd=tmp_path, check=True)
    assert json.loads(proc.stdout)["reads_missing"] == 2
    assert "c.mm lacks 2 of the 4 reads of t.tsv with a strand" in proc.stderr.decode()
    assert "give --reads" in proc.stderr.decode()
    # A read given to the tool and left out: the warning, without a --reads hint.
    write("r3.fa", ">r1\nACGT\n>r2\nACGT\n>r3\nACGT\n")
    proc = run_cli("evaluate", clusters.name, "--format", "mmseqs", "--truth", truth.name,
                   "--reads", "r3.fa", cwd=tmp_path, check=True)
    err = proc.stderr.decode()
    assert "c.mm lacks 1 of the 3 reads of t.tsv" in err and "--reads" not in err
    other = write("o.fa", ">x1\nACGT\n")
    write("x.tsv", "x1\t0\n")
    err = assert_clean_error(run_cli("evaluate", "x.tsv", "--truth", truth.name, "--reads",
                                     other.name, cwd=tmp_path),
                             "t.tsv: no read of a strand among the reads of o.fa")
    assert len(err.strip().splitlines()) == 1


def test_a_table_that_is_not_utf8_is_named_by_its_line(tmp_path):
    """Python's message ('can't decode byte 0xff in position 5') named no line."""
    path = tmp_path / "c.tsv.gz"
    path.write_bytes(gzip.compress(b"r1\t0\nr2\t0\n\xff\xfe\t1\n"))
    truth = tmp_path / "t.tsv"
    truth.write_text("r1\ts1\nr2\ts1\n")
    for args in (["c.tsv.gz"], ["-", "--format", "mmseqs"]):
        proc = run_cli("evaluate", *args, "--truth", "t.tsv", cwd=tmp_path,
                       stdin=path.read_bytes())
        name = "<stdin>" if args[0] == "-" else "c.tsv.gz"
        err = assert_clean_error(proc, f"{name}: line 3: not UTF-8 text (byte 0xff)")
        assert len(err.strip().splitlines()) == 1


def test_evaluate_a_clustering_of_contaminants_only_is_scored(tmp_path, write):
    """Its reads are the truth's (strand 'contaminant'): 'none of its read ids is in the
    truth (are they tables of the same reads?)' was wrong."""
    write("t.tsv", "r1\tcontaminant\nr2\ts1\n")
    write("c.tsv", "r1\t0\n")
    proc = run_cli("evaluate", "c.tsv", "--truth", "t.tsv", "--json", cwd=tmp_path, check=True)
    scores = json.loads(proc.stdout)
    assert scores["noise_reads"] == 1 and scores["reads_missing"] == 1
    assert "c.tsv lacks 1 of the 1 reads of t.tsv" in proc.stderr.decode()


def test_a_table_cut_short_is_named_with_the_lines_read(tmp_path):
    """A truncated gzip truth said only "cannot read: Compressed file ended ..."."""
    rows = "".join(f"r{i}\ts{i % 50}\n" for i in range(20_000)).encode()
    whole = gzip.compress(rows)
    (tmp_path / "t.tsv.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "c.tsv").write_text("r1\t0\n")
    for args, stdin in ((["--truth", "t.tsv.gz"], None),
                        (["--truth", "-"], whole[: len(whole) // 2])):
        err = assert_clean_error(run_cli("evaluate", "c.tsv", *args, cwd=tmp_path, stdin=stdin),
                                 "cannot read after line ", "ended before")
        lines = int(re.search(r"after line (\d+):", err).group(1))
        assert 0 < lines < 20_000 and len(err.strip().splitlines()) == 1


def test_evaluate_with_the_wrong_format_names_the_right_one(sim, tmp_path):
    """A .uc file read as the default tsv failed with "read H listed twice", a .clstr with
    "expected at least 2 tab-separated columns": the format was not named."""
    truth = str(sim / "s.truth.tsv")
    run_cli("cluster", str(sim / "s.fastq.gz"), "-o", str(tmp_path / "c.tsv"), "-q",
            check=True)
    for fmt in ("clstr", "mmseqs"):
        run_cli("cluster", str(sim / "s.fastq.gz"), "-o", str(tmp_path / f"c.{fmt}"),
                "--format", fmt, "-q", check=True)
    cases = [(sim / "c.uc", "tsv", "uc"), (tmp_path / "c.clstr", "tsv", "clstr"),
             (tmp_path / "c.mmseqs", "tsv", "mmseqs"), (tmp_path / "c.tsv", "uc", "tsv"),
             (tmp_path / "c.tsv", "mmseqs", "tsv"), (sim / "c.uc", "clstr", "uc")]
    for path, given, right in cases:
        err = assert_clean_error(run_cli("evaluate", str(path), "--format", given, "--truth",
                                         truth), f"give --format {right})")
        assert len(err.strip().splitlines()) == 1
    # The right format still scores them alike.
    got = {fmt: json.loads(run_cli("evaluate", str(path), "--format", fmt, "--truth", truth,
                                   "--json", check=True).stdout)["ARI"]
           for path, _, fmt in cases[:4]}
    assert len(set(got.values())) == 1


def test_a_named_pipe_in_the_wrong_format_fails_without_waiting(sim, tmp_path):
    """The hint's second read of the file opened the named pipe again, which waits for a
    writer for good: a pipe (like standard input) gets the error without the hint."""
    import os

    fifo = tmp_path / "c.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat '{sim / 'c.uc'}' > '{fifo}'"])
    try:
        proc = run_cli("evaluate", str(fifo), "--truth", str(sim / "s.truth.tsv"), timeout=60)
    finally:
        writer.kill()
        writer.wait()
    err = assert_clean_error(proc, "c.fifo: line 3: read H listed twice")
    assert "looks like" not in err
