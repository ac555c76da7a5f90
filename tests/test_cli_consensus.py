"""`dnaembed consensus` end to end: the real CLI in a subprocess, real files."""

from __future__ import annotations

import pytest
from conftest import assert_clean_error, run_cli

from dnaembed.encoding import reverse_complement
from dnaembed.io.sequences import read_sequences
from dnaembed.io.tables import read_table


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A small nanopore set in both orientations, some reads truncated, with its truth."""
    d = tmp_path_factory.mktemp("sim")
    run_cli(
        "simulate", "-o", str(d / "s"), "--strands", "60", "--preset", "illumina-array",
        "--reverse-fraction", "0.5", "--truncate-fraction", "0.1", "--mean-coverage", "8",
        "--coverage", "fixed", "-q", check=True,
    )
    return d


def _exact(refs_path, strands_path) -> float:
    refs = read_sequences(refs_path)
    ref = dict(zip(refs.ids, refs.seqs))
    out = read_sequences(strands_path)
    hits = sum(ref[i] in (s, reverse_complement(s)) for i, s in zip(out.ids, out.seqs))
    return hits / len(refs)


def test_truth_as_clusters_recovers_the_strands(simulated):
    d = simulated
    out, report = d / "strands.fasta", d / "report.tsv"
    proc = run_cli(
        "consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"), "-o", str(out),
        "--length", "150", "--report", str(report), check=True,
    )
    assert b"60 strands from 480 reads" in proc.stdout
    assert _exact(d / "s.refs.fasta", out) >= 0.95
    strands = read_sequences(out)
    # The truth table's orientation column puts every strand in its design orientation.
    designs = read_sequences(d / "s.refs.fasta")
    refs = dict(zip(designs.ids, designs.seqs))
    assert sum(refs[i] == s for i, s in zip(strands.ids, strands.seqs)) >= 57
    rows = read_table(report)
    assert len(rows) == 60 and all(int(r[1]) == 8 for r in rows)
    assert report.read_text().splitlines()[1].startswith("#cluster_id\tsize\tconfidence")
    header = out.read_text().splitlines()[0]
    assert "size=8 confidence=" in header and "distance=" in header


def test_inferred_orientation_stdout_and_same_output_twice(simulated):
    d = simulated
    args = ("consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"), "--orientation",
            "infer", "--seed", "5", "-q")
    first = run_cli(*args, check=True)
    second = run_cli(*args, "-t", "2", check=True)
    assert first.stdout == second.stdout
    assert first.stdout.startswith(b">strand")
    (d / "inferred.fasta").write_bytes(first.stdout)
    assert _exact(d / "s.refs.fasta", d / "inferred.fasta") >= 0.95


def test_medoid_only_and_min_size(simulated, tmp_path):
    d = simulated
    out = tmp_path / "m.fasta.gz"
    run_cli("consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"), "--medoid-only",
            "-o", str(out), "-q", check=True)
    medoids = read_sequences(out)
    reads = set(read_sequences(d / "s.fastq.gz").seqs)
    assert len(medoids) == 60
    # Medoids are reads (in the strand's orientation).
    assert all(s in reads or reverse_complement(s) in reads for s in medoids.seqs)
    proc = run_cli("consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"), "--min-size",
                   "9", "-o", str(tmp_path / "none.fasta"), check=True)
    assert b"0 strands" in proc.stdout
    assert (tmp_path / "none.fasta").read_text() == ""


def test_unknown_reads_in_the_table_are_an_error_without_output(simulated, tmp_path):
    d = simulated
    table = tmp_path / "c.tsv"
    table.write_text((d / "s.truth.tsv").read_text() + "ghost\tstrand00001\t+\n")
    out = tmp_path / "out.fasta"
    proc = run_cli("consensus", str(d / "s.fastq.gz"), str(table), "-o", str(out))
    err = assert_clean_error(proc, "read ghost: not in the reads file")
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [table]  # no temporary left behind either


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("read000000 strand1\n", "expected at least 2 tab-separated columns"),
        ("read000000\tstrand1\nread000000\tstrand2\n", "read000000: listed twice"),
    ],
)
def test_malformed_tables(simulated, tmp_path, content, fragment):
    table = tmp_path / "c.tsv"
    table.write_text(content)
    out = tmp_path / "out.fasta"
    proc = run_cli("consensus", str(simulated / "s.fastq.gz"), str(table), "-o", str(out))
    assert_clean_error(proc, fragment)
    assert not out.exists()


def test_missing_inputs_and_unwritable_output(simulated, tmp_path):
    d = simulated
    proc = run_cli("consensus", str(tmp_path / "nope.fq"), str(d / "s.truth.tsv"))
    assert_clean_error(proc, "nope.fq: no such file")
    proc = run_cli("consensus", str(d / "s.fastq.gz"), str(tmp_path / "nope.tsv"))
    assert_clean_error(proc, "nope.tsv: no such file")
    proc = run_cli("consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"),
                   "-o", str(tmp_path / "no" / "dir.fasta"))
    assert_clean_error(proc, "does not exist")
    proc = run_cli("consensus", "-", "-")
    assert_clean_error(proc, "READS and CLUSTERS cannot both be standard input", code=2)


def test_empty_inputs_give_an_empty_fasta(tmp_path):
    reads, table, out = tmp_path / "r.fq", tmp_path / "c.tsv", tmp_path / "o.fasta"
    reads.write_text("")
    table.write_text("#read_id\tcluster_id\n")
    proc = run_cli("consensus", str(reads), str(table), "-o", str(out), check=True)
    assert b"0 strands from 0 reads" in proc.stdout
    assert out.read_text() == ""
    # Reads but an empty table: every read is in no cluster.
    reads = tmp_path / "r.fasta"
    reads.write_text(">a\nACGT\n>b\nACGA\n")
    proc = run_cli("consensus", str(reads), str(table), "-o", str(out), check=True)
    assert b"0 strands from 2 reads" in proc.stdout


def test_a_clusters_table_from_a_pipe_is_read_as_a_file_is(simulated, tmp_path):
    # `consensus READS <(zcat clusters.tsv.gz)` and a named pipe: the table was refused
    # as "no such file" (only a regular file passed the check), while READS from a pipe,
    # and the table on standard input, were read.
    import os
    import subprocess
    import sys
    import threading

    d = simulated
    expected = run_cli("consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"), "-q",
                       check=True).stdout
    script = f'exec "$0" -m dnaembed consensus {d / "s.fastq.gz"} <(gzip -c {d / "s.truth.tsv"}) -q'
    proc = subprocess.run(["bash", "-c", script, sys.executable], capture_output=True,
                          env=dict(os.environ, DNAEMBED_NO_PROGRESS="1"), timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == expected and proc.stderr == b""
    fifo = tmp_path / "table.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes,
                              args=((d / "s.truth.tsv").read_bytes(),), daemon=True)
    writer.start()
    piped = run_cli("consensus", str(d / "s.fastq.gz"), str(fifo), "-q", timeout=300)
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout == expected
    assert_clean_error(run_cli("consensus", str(d / "s.fastq.gz"), str(tmp_path / "none")),
                       "none: no such file")


def test_a_cluster_id_with_whitespace_is_refused_before_the_work(simulated, tmp_path):
    # A table from another tool with ids like "Cluster 13": every strand of the FASTA was
    # named "Cluster" (a FASTA name ends at the first space), unlike strands.tsv's ids.
    d = simulated
    rows = [line.split("\t") for line in (d / "s.truth.tsv").read_text().splitlines()
            if not line.startswith("#")]
    table = tmp_path / "spaced.tsv"
    table.write_text("".join(f"{r[0]}\tCluster {r[1]}\n" for r in rows))
    out = tmp_path / "s.fasta"
    proc = run_cli("consensus", str(d / "s.fastq.gz"), str(table), "-o", str(out),
                   "--report", str(tmp_path / "r.tsv"))
    err = assert_clean_error(proc, f"{table}: read {rows[0][0]}: cluster id "
                             f"'Cluster {rows[0][1]}' holds whitespace")
    assert err.count("\n") == 1 and sorted(p.name for p in tmp_path.iterdir()) == [
        "spaced.tsv"]
    table.write_text("".join(f"{r[0]}\tCluster_{r[1]}\n" for r in rows))
    run_cli("consensus", str(d / "s.fastq.gz"), str(table), "-o", str(out), "-q",
            check=True)
    assert len(set(read_sequences(out).ids)) == 60


def test_another_tools_clusters_file_is_read_with_format_and_named_without(simulated,
                                                                           tmp_path):
    # A vsearch .uc file given as CLUSTERS failed "read H: listed twice", a .clstr file
    # "line 1: expected at least 2 tab-separated columns": no word of what the file was,
    # and no way to read it.
    reads = str(simulated / "s.fastq.gz")
    run_cli("cluster", reads, "-o", str(tmp_path / "c.tsv"), "-q", "--seed", "1", check=True)
    expected = run_cli("consensus", reads, str(tmp_path / "c.tsv"), "--orientation", "infer",
                       "-q", check=True).stdout
    assert expected.count(b">") >= 55
    for fmt, name in (("uc", "a vsearch .uc file"), ("clstr", "a CD-HIT .clstr file"),
                      ("mmseqs", "an MMseqs2 cluster TSV")):
        path = tmp_path / f"c.{fmt}"
        run_cli("cluster", reads, "-o", str(path), "--format", fmt, "-q", "--seed", "1",
                check=True)
        err = assert_clean_error(run_cli("consensus", reads, str(path), "-o",
                                         str(tmp_path / "x.fa")),
                                 f"{path}: ", f"(it looks like {name}: give --format {fmt})")
        assert err.count("\n") == 1 and not (tmp_path / "x.fa").exists()
        out = run_cli("consensus", reads, str(path), "--format", fmt, "-q", check=True).stdout
        if fmt == "mmseqs":  # clusters named by their representative read, not numbered
            assert sorted(out.splitlines()[1::2]) == sorted(expected.splitlines()[1::2])
        else:
            assert out == expected


def test_a_table_with_a_byte_order_mark_reads_as_without(simulated, tmp_path):
    # Notepad's UTF-8 or a spreadsheet's export starts the file with a byte-order mark: it
    # became part of the first read id ("read \ufeffr1: not in the reads file", the mark
    # invisible) or of the column line, which was then read as a read.
    d = simulated
    expected = run_cli("consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"), "-q",
                       check=True).stdout
    text = (d / "s.truth.tsv").read_bytes()
    no_header = b"".join(line for line in text.splitlines(keepends=True)
                         if not line.startswith(b"#"))
    for name, body in (("bom.tsv", text), ("bom-rows.tsv", no_header)):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + body)
        proc = run_cli("consensus", str(d / "s.fastq.gz"), str(tmp_path / name), "-q")
        assert proc.returncode == 0, proc.stderr.decode()
        assert proc.stdout == expected


def test_the_report_on_standard_output_is_the_table_alone(simulated, tmp_path):
    # `--report - -o FILE`: the result line "60 strands from 480 reads ...: FILE" came
    # after the report's rows, the last line of the table.
    d = simulated
    proc = run_cli("consensus", str(d / "s.fastq.gz"), str(d / "s.truth.tsv"), "-o",
                   str(tmp_path / "s.fa"), "--report", "-", check=True)
    lines = proc.stdout.decode().splitlines()
    assert lines[1].startswith("#cluster_id\t") and len(lines) == 2 + 60
    assert all(len(line.split("\t")) == 8 for line in lines[2:]), lines[-1]
    assert "60 strands from 480 reads" in proc.stderr.decode()


def test_cluster_ids_sort_numbers_by_value_and_any_other_text_after(tmp_path):
    # A cluster id '²' (a digit to str.isdigit, not to int) was "internal error: ValueError"
    # in the sort, then in the FASTA writer (names are ASCII): an error naming it now.
    reads = tmp_path / "r.fa"
    reads.write_text(">a\nACGTACGTAC\n>b\nACGTACGTAC\n>c\nTTGTACGTAC\n>d\nGGGTACGTAC\n")
    (tmp_path / "c.tsv").write_text("a\tx2\nb\tx2\nc\t10\nd\t9\n")
    proc = run_cli("consensus", str(reads), str(tmp_path / "c.tsv"), "-q", check=True)
    names = [line.split()[0] for line in proc.stdout.decode().splitlines()[::2]]
    assert names == [">9", ">10", ">x2"]
    (tmp_path / "c.tsv").write_text("a\t\u00b2\nb\t\u00b2\nc\t10\nd\t9\n")
    proc = run_cli("consensus", str(reads), str(tmp_path / "c.tsv"), "-q")
    assert_clean_error(proc, "c.tsv: read a: cluster id '\u00b2' is not ASCII")
    from dnaembed.io.tables import cluster_id_key

    assert sorted(["\u00b2", "10", "9", "x"], key=cluster_id_key) == ["9", "10", "x", "\u00b2"]


def test_another_tools_file_through_a_named_pipe_fails_without_waiting(simulated, tmp_path):
    # The format hint read the file again: a named pipe's reopening waited for good for a
    # writer that had gone.
    import os
    import subprocess
    import threading

    reads = str(simulated / "s.fastq.gz")
    run_cli("cluster", reads, "-o", str(tmp_path / "c.uc"), "--format", "uc", "-q",
            check=True)
    fifo = tmp_path / "c.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=((tmp_path / "c.uc").read_bytes(),),
                              daemon=True)
    writer.start()
    try:
        proc = run_cli("consensus", reads, str(fifo), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("consensus waited for good on the named pipe")
    err = assert_clean_error(proc, f"{fifo}: read H: listed twice")
    assert err.count("\n") == 1


def test_positions_that_every_read_holds_as_n_are_not_confident(tmp_path):
    # Three reads that all held N over 20 positions (or were N throughout) gave a strand
    # with those Ns at confidence 1.000, as if the reads had agreed on a base.
    import random

    rng = random.Random(1)
    strand = "".join(rng.choice("ACGT") for _ in range(100))
    masked = strand[:40] + "N" * 20 + strand[60:]
    reads = tmp_path / "r.fa"
    reads.write_text("".join(f">n{i}\n{'N' * 100}\n>p{i}\n{masked}\n>s{i}\n{strand}\n"
                             for i in range(3)))
    table = tmp_path / "c.tsv"
    table.write_text("".join(f"{kind}{i}\t{kind}\n" for kind in "nps" for i in range(3)))
    out = run_cli("consensus", str(reads), str(table), "-q", check=True).stdout.decode()
    confidence = {line.split()[0][1:]: float(line.split("confidence=")[1].split()[0])
                  for line in out.splitlines() if line.startswith(">")}
    assert confidence == {"n": 0.0, "p": 0.8, "s": 1.0}, out
    assert masked in out  # the strand keeps its Ns: the reads said nothing there


def test_a_cluster_of_long_noisy_reads_is_polished_in_windows_not_for_hours(tmp_path):
    # Three nanopore reads of 20 kb: weighing each of ~3,600 contested edits by every
    # read's alignment to the whole strand took hours at 50 kb (10 kb: 86 s). Long strands
    # weigh an edit in a window around it: 2.0 s here. Unpolished, this strand ends 308
    # edits from its design (1.5%); polished, 139.
    import Levenshtein

    prefix = tmp_path / "long"
    run_cli("simulate", "-o", str(prefix), "--strands", "1", "--length", "20000",
            "--coverage", "fixed", "--mean-coverage", "3", "--seed", "1", "-q", check=True)
    table = tmp_path / "c.tsv"
    table.write_text("".join(f"{rid}\t0\n" for rid in read_sequences(f"{prefix}.fastq.gz").ids))
    out = tmp_path / "s.fasta"
    run_cli("consensus", f"{prefix}.fastq.gz", str(table), "-o", str(out), check=True,
            timeout=120)
    (strand,) = read_sequences(out).seqs
    (ref,) = read_sequences(f"{prefix}.refs.fasta").seqs
    assert Levenshtein.distance(strand, ref) < 0.01 * len(ref)
