import gzip

from conftest import assert_clean_error, run_cli

from dnaembed.io.sequences import read_sequences
from dnaembed.io.tables import read_table


def test_simulate_writes_reads_truth_refs_and_summary(tmp_path):
    proc = run_cli("simulate", "-o", "sim", "--strands", "100", "--preset", "illumina-array",
                   "--primers", "20", "--reverse-fraction", "0.5", "--contaminants", "0.05",
                   "--seed", "4", cwd=tmp_path, check=True)
    out = proc.stdout.decode()
    assert "reads" in out and "substitutions" in out and "illumina-array" in out
    reads = read_sequences(tmp_path / "sim.fastq.gz")
    truth = read_table(tmp_path / "sim.truth.tsv")
    refs = read_sequences(tmp_path / "sim.refs.fasta")
    assert len(refs) == 100 and all(len(s) == 190 for s in refs.seqs)
    # Every ref shares the same primers.
    assert len({s[:20] for s in refs.seqs}) == 1 and len({s[-20:] for s in refs.seqs}) == 1
    assert [r[0] for r in truth] == reads.ids
    assert {r[1] for r in truth} <= set(refs.ids) | {"contaminant"}
    assert any(r[1] == "contaminant" for r in truth)
    assert {r[2] for r in truth} == {"+", "-"}
    header = (tmp_path / "sim.truth.tsv").read_text().splitlines()[0]
    assert header.startswith("# dnaembed ") and "seed=4" in header
    assert reads.quals is not None and len(reads.quals[0]) == len(reads.seqs[0])


def test_same_seed_same_bytes_different_seed_different(tmp_path):
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        run_cli("simulate", "-o", name, "--strands", "50", "--seed", seed, "-q", cwd=tmp_path,
                check=True)
    a = gzip.decompress((tmp_path / "a.fastq.gz").read_bytes())
    b = gzip.decompress((tmp_path / "b.fastq.gz").read_bytes())
    c = gzip.decompress((tmp_path / "c.fastq.gz").read_bytes())
    assert a == b and a != c
    assert (tmp_path / "a.truth.tsv").read_bytes() == (tmp_path / "b.truth.tsv").read_bytes()


def test_refs_input_including_stdin(tmp_path, write):
    refs = write("refs.fa", ">s1\nacgtacgtacgtacgtacgtacgtacgtacgt\n"
                            ">s2\nTTTTGGGGCCCCAAAATTTTGGGGCCCCAAAA\n")
    run_cli("simulate", "--refs", str(refs), "-o", "r", "--coverage", "fixed",
            "--mean-coverage", "3", cwd=tmp_path, check=True)
    truth = read_table(tmp_path / "r.truth.tsv")
    assert sorted(r[1] for r in truth) == ["s1"] * 3 + ["s2"] * 3
    assert read_sequences(tmp_path / "r.refs.fasta").seqs[0] == "ACGT" * 8
    proc = run_cli("simulate", "--refs", "-", "-o", "stdin", "-q", cwd=tmp_path,
                   stdin=refs.read_bytes())
    assert proc.returncode == 0 and (tmp_path / "stdin.fastq.gz").exists()
    # The references are an input: -o r over r.refs.fasta is refused, nothing written.
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert_clean_error(run_cli("simulate", "--refs", "r.refs.fasta", "-o", "r", cwd=tmp_path),
                       "is the input --refs", code=2)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_bad_inputs_fail_cleanly_without_output(tmp_path, write):
    assert_clean_error(run_cli("simulate", "--preset", "foo", "-o", "x", cwd=tmp_path),
                       "'foo' is not one of 'illumina', 'illumina-array'", code=2)
    assert_clean_error(run_cli("simulate", "--sub", "1.5", "-o", "x", cwd=tmp_path),
                       "--sub", code=2)
    assert_clean_error(run_cli("simulate", "--del", "-0.1", "-o", "x", cwd=tmp_path),
                       "--del", code=2)
    bad = write("bad.fa", ">ok\nACGT\n>r2\nAC-T\n")
    assert_clean_error(run_cli("simulate", "--refs", str(bad), "-o", "x", cwd=tmp_path),
                       "bad.fa: record 2 (r2): invalid character '-'")
    assert_clean_error(run_cli("simulate", "--refs", str(write("empty.fa", "")), "-o", "x",
                               cwd=tmp_path), "no strands")
    assert_clean_error(run_cli("simulate", "-o", str(tmp_path / "nodir" / "x"), cwd=tmp_path),
                       "does not exist")
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o500)
    try:
        proc = run_cli("simulate", "-o", str(readonly / "x"), "--strands", "10", cwd=tmp_path)
        if proc.returncode != 0:  # root may write anyway; otherwise a clean error
            assert_clean_error(proc, "cannot write")
    finally:
        readonly.chmod(0o700)
    assert not any(p.name.startswith("x.") for p in tmp_path.iterdir())


def test_closed_pipe_is_quiet(tmp_path):
    import subprocess
    import sys

    # The reader is gone before the summary is printed: 141 (128 + SIGPIPE), no message.
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m dnaembed simulate --strands 200 "
         "-o p -q | head -c 0"], cwd=tmp_path, capture_output=True,
    )
    assert proc.returncode == 141 and proc.stderr == b"", proc.stderr


def test_usage_error_exit_2():
    assert_clean_error(run_cli("simulate", "--no-such-option"), "No such option", code=2)
    assert run_cli("--version").stdout.decode().startswith("dnaembed")


def test_numbers_that_are_not_finite_are_usage_errors(tmp_path):
    # click's float ranges let nan through every bound and inf past an open one:
    # `--mean-coverage inf` ended in "internal error: ValueError", `--homopolymer-bias inf`
    # in reads without substitutions, `train --lr inf` in a diverged run.
    cases = [("simulate", "--mean-coverage", "inf"), ("simulate", "--sub", "nan"),
             ("simulate", "--homopolymer-bias", "inf"), ("simulate", "--dispersion", "inf"),
             ("train", "--lr", "inf")]
    for command, option, value in cases:
        proc = run_cli(command, "-o", str(tmp_path / "out"), option, value)
        assert_clean_error(proc, f"Invalid value for '{option}': '{value}' is not a finite "
                           "number", code=2)
    assert list(tmp_path.iterdir()) == []


def test_strands_too_long_to_align_are_left_out_of_the_summary(tmp_path):
    # The summary aligned every sampled read to its strand: 2 x 10^6 nt ran past 300 s.
    proc = run_cli("simulate", "-o", str(tmp_path / "s"), "--strands", "2", "--length", "20000",
                   "--seed", "1", check=True, timeout=120)
    out = proc.stdout.decode()
    assert "errors measured by aligning 0 reads to their strands of at most 10,000 nt:" in out
    assert "substitutions     not measured (requested 2.000%)" in out


def test_option_conflicts_name_the_options(tmp_path):
    # They exited 1 with the library's words ("GC bounds must satisfy ...", "5' primer").
    out = str(tmp_path / "s")
    assert_clean_error(run_cli("simulate", "-o", out, "--gc-min", "0.8", "--gc-max", "0.2"),
                       "--gc-min 0.8 is above --gc-max 0.2", code=2)
    assert_clean_error(run_cli("simulate", "-o", out, "--primer-5", "ACGZ"),
                       "--primer-5 'ACGZ': a primer is a sequence of A, C, G and T", code=2)
    assert list(tmp_path.iterdir()) == []


def test_design_conflicts_name_the_options(tmp_path, write):
    # They exited 1 with the library's words: "channel substitution + deletion rates must not
    # exceed 1", "a shared region of 200 nt at position 0 does not fit ...".
    refs = write("refs.fa", ">a\nACGTACGTACGT\n>b\nACGTACGTACGTAAAA\n")
    cases = [
        (["--sub", "0.6", "--del", "0.6"], "--sub 0.6 and --del 0.6: the channel's "
         "substitution and deletion rates add up to more than 1"),
        (["--sub", "0.99"], "--sub 0.99 and --preset nanopore (deletion 0.019): the channel's "
         "substitution and deletion rates"),
        (["--shared-region", "200"], "--shared-region 200, --shared-start 0 and --length 150: "
         "the shared region does not fit in the shortest design (150 nt)"),
        (["--shared-region", "10", "--shared-start", "145", "--length", "150-160"],
         "--shared-region 10, --shared-start 145 and --length 150-160: the shared region"),
        (["--partners", "0.5", "--partner-shift", "150"], "--partner-shift 150 and --length "
         "150: the partner shift is not shorter than the shortest design (150 nt)"),
        (["--partners", "0.5", "--partner-edits", "145", "--shared-region", "10"],
         "--partner-edits 145, --shared-region 10 and --length 150: the partner edits do not "
         "fit in the shortest design (150 nt, 140 positions outside the shared region)"),
        (["--refs", str(refs), "--shared-region", "13"], f"--shared-region 13, --shared-start "
         f"0 and --refs {refs}: the shared region does not fit in the shortest design (12 nt)"),
        (["--refs", str(refs), "--window-shift", "5"], f"--window-shift 5 and --refs {refs}: "
         "overlapping windows are made from random strands"),
        (["--gc-window", "21", "--gc-min", "0.5", "--gc-max", "0.52"], "--gc-window 21, "
         "--gc-min 0.5 and --gc-max 0.52: no 21-base window can have a GC fraction in"),
    ]
    for args, message in cases:
        err = assert_clean_error(run_cli("simulate", "-o", "s", *args, cwd=tmp_path),
                                 message, code=2)
        assert "shared_length" not in err and "partner_" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.fa"]


def test_gc_window_longer_than_the_strands_is_refused(tmp_path):
    # Strands shorter than the window have no whole window: --gc-min/--gc-max did nothing.
    cases = [
        (["--gc-window", "200", "--gc-min", "0.4"], "--gc-window 200, --gc-min 0.4 and "
         "--length 150: the GC window is longer than the shortest strand (150 nt)"),
        (["--length", "15-200", "--gc-max", "0.6"], "--gc-window 20, --gc-max 0.6 and "
         "--length 15-200: the GC window is longer than the shortest strand (15 nt)"),
        # Windows are cut from one long sequence, which the window fits: the designs do not.
        (["--window-shift", "5", "--length", "15", "--gc-max", "0.6"], "--gc-window 20, "
         "--gc-max 0.6 and --length 15: the GC window is longer"),
    ]
    for args, message in cases:
        assert_clean_error(run_cli("simulate", "-o", "s", *args, cwd=tmp_path), message, code=2)
    assert list(tmp_path.iterdir()) == []
    # A window as long as the strands holds.
    run_cli("simulate", "-o", "s", "--strands", "50", "--length", "20", "--gc-min", "0.4",
            "--gc-max", "0.6", "-q", cwd=tmp_path, check=True)
    gc = [sum(c in "GC" for c in s) for s in read_sequences(tmp_path / "s.refs.fasta").seqs]
    assert min(gc) >= 8 and max(gc) <= 12


def test_refs_with_options_of_random_strands_is_refused(tmp_path, write):
    # --refs takes the file's strands: --length, --strands and the synthesis constraints
    # were ignored without a word.
    refs = write("refs.fa", ">a\nACGTACGTACGTACGTACGT\n")
    cases = [
        (["--length", "50", "--strands", "7"], f"--strands 7 and --length 50 cannot go with "
         f"--refs {refs}: the strands come from the file (those options shape random strands)"),
        (["--strands", "1000"], f"--strands 1000 cannot go with --refs {refs}"),  # the default
        (["--gc-min", "0.3", "--max-homopolymer", "3"], "--max-homopolymer 3 and --gc-min 0.3 "
         "cannot go with"),
        (["--gc-window", "10"], "--gc-window 10 cannot go with"),
    ]
    for args, message in cases:
        assert_clean_error(run_cli("simulate", "-o", "s", "--refs", str(refs), *args,
                                   cwd=tmp_path), message, code=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.fa"]


def test_output_prefix_that_is_standard_output_is_refused(tmp_path):
    """`-o -` wrote files named -.fastq.gz, -.truth.tsv and -.refs.fasta (as `run -o -` made a
    directory named -)."""
    proc = run_cli("simulate", "-o", "-", "--strands", "3", "-q", cwd=tmp_path)
    assert_clean_error(proc, "-o/--output is the prefix", "standard output (-)", code=2)
    assert not proc.stdout and list(tmp_path.iterdir()) == []


def test_a_reference_named_like_noise_is_refused(tmp_path, write):
    """A strand named 'contaminant' (or NA, -, *) made a truth whose reads `evaluate` took for
    contaminants: three strands scored as one true cluster."""
    seq = "ACGTTGCATGCATGCATGCAAGTCGATCGATCGTAGCTAGCTAGCTAGCATCGATCGATCGAT"
    for name in ("contaminant", "NA", "-"):
        refs = write(f"{name}.fa", f">ok\n{seq}\n>{name} a description\n{seq[::-1]}\n")
        proc = run_cli("simulate", "--refs", str(refs), "-o", str(tmp_path / "s"), "-q")
        assert_clean_error(proc, f"{name}.fa: record 2 ({name}): a strand id that a truth "
                           "table keeps for reads of no strand")
        assert not list(tmp_path.glob("s.*"))
