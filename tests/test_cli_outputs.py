"""Outputs through the real CLI: never over an input, all new or all absent, errors that name
the file, gzip on standard input, read ids that start with '#', usage errors (issue 15 c)."""

from __future__ import annotations

import gzip
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_clean_error, ctrl_c_as_in_a_terminal, run_cli

from dnaembed.io.sequences import read_sequences, write_sequences
from dnaembed.io.tables import read_table, write_tsv

RUN_FILES = ("clusters.tsv", "strands.fasta", "strands.tsv")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """25 strands of 300 nt, three reads each: strands.fasta is larger than clusters.tsv."""
    d = tmp_path_factory.mktemp("sim")
    run_cli("simulate", "-o", str(d / "s"), "--strands", "25", "--length", "300",
            "--preset", "illumina-array", "--coverage", "fixed", "--mean-coverage", "3",
            "--seed", "5", "-q", check=True)
    return d


def run_limited(*args: str, max_file_bytes: int) -> subprocess.CompletedProcess:
    """The CLI with a file-size limit: a write past it fails (EFBIG) like a full disk."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "dnaembed", *args], capture_output=True,
                          env=env, preexec_fn=limit, timeout=600)


def no_work_done(proc: subprocess.CompletedProcess) -> bool:
    """The command stopped before reading and clustering (its first log line is 'N reads')."""
    return not any(word in proc.stderr + proc.stdout
                   for word in (b"distinct", b"strands from", b"wrote "))


def test_an_output_equal_to_an_input_is_refused_before_any_work(sim, tmp_path):
    reads = tmp_path / "r.fastq"
    reads.write_bytes(gzip.decompress((sim / "s.fastq.gz").read_bytes()))
    table = tmp_path / "c.tsv"
    shutil.copy(sim / "s.truth.tsv", table)
    second = tmp_path / "r2.fastq"
    shutil.copy(reads, second)
    before = {p: p.read_bytes() for p in (reads, table, second)}
    (tmp_path / "link.fastq").symlink_to(reads)
    os.link(reads, tmp_path / "hard.fastq")
    r, c = str(reads), str(table)
    cases = [
        (("cluster", r, "-o", r), "is the input READS"),
        (("cluster", r, "-o", str(tmp_path / "." / "r.fastq")), "is the input READS"),
        (("cluster", r, "-o", str(tmp_path / "link.fastq")), "is the input READS"),
        (("cluster", r, "-o", str(tmp_path / "hard.fastq")), "is the input READS"),
        (("cluster", r, "--centers", c, "-o", c), "are the same file"),
        (("cluster", r, "-o", str(tmp_path / "x.tsv"), "--json", r), "is the input READS"),
        (("consensus", r, c, "-o", c), "is the input CLUSTERS"),
        (("consensus", r, c, "--report", str(tmp_path / "s.fa"), "-o",
          str(tmp_path / "s.fa")), "are the same file"),
        (("embed", r, "-o", r), "is the input READS"),
        (("run", r, "-o", str(tmp_path), "--truth", str(tmp_path / "clusters.tsv")),
         "is the input --truth"),
        (("evaluate", c, "--truth", c, "--json", c), "is the input"),
        (("cluster", r, "-o", str(tmp_path / "y.tsv"), "--log", r), "is the input READS"),
        (("cluster", r, str(second), "-o", str(tmp_path / "y.tsv"), "--log", str(second)),
         "is the input READS (2)"),
        # An output, not "the input -o/--output".
        (("cluster", r, "-o", str(tmp_path / "y.tsv"), "--log", str(tmp_path / "y.tsv")),
         "-o/--output and --log are the same file"),
    ]
    for args, fragment in cases:
        proc = run_cli(*args)
        assert_clean_error(proc, fragment, code=2)
        assert no_work_done(proc), args
    assert {p: p.read_bytes() for p in before} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_run_outputs_are_all_new_or_all_absent(sim, tmp_path):
    reads = str(sim / "s.fastq.gz")
    out = tmp_path / "out"
    run_cli("run", reads, "-o", str(out), "--seed", "1", "-q", check=True)
    old = {name: (out / name).read_bytes() for name in RUN_FILES}
    small, large = len(old["clusters.tsv"]), len(old["strands.fasta"])
    assert small < large
    # A disk that takes clusters.tsv but not strands.fasta (--seed 2: a new header).
    proc = run_limited("run", reads, "-o", str(out), "--seed", "2", "-q",
                       max_file_bytes=(small + large) // 2)
    assert_clean_error(proc, "strands.fasta: cannot write: File too large")
    assert {name: (out / name).read_bytes() for name in RUN_FILES} == old
    assert sorted(p.name for p in out.iterdir()) == sorted(RUN_FILES)  # no temporary left
    # A run that fails leaves no directory it created.
    new = tmp_path / "new" / "deeper"
    proc = run_limited("run", reads, "-o", str(new), "-q", max_file_bytes=(small + large) // 2)
    assert proc.returncode == 1 and not (tmp_path / "new").exists()


def test_consensus_fasta_and_report_are_all_new_or_all_absent(sim, tmp_path):
    reads, table = str(sim / "s.fastq.gz"), str(sim / "s.truth.tsv")
    fasta, report = tmp_path / "s.fasta", tmp_path / "r.tsv"
    run_cli("consensus", reads, table, "-o", str(fasta), "--report", str(report), "-q",
            check=True)
    small, large = report.stat().st_size, fasta.stat().st_size
    assert small < large
    fasta.unlink()
    report.unlink()
    proc = run_limited("consensus", reads, table, "-o", str(fasta), "--report", str(report),
                       max_file_bytes=(small + large) // 2)
    assert_clean_error(proc, "s.fasta: cannot write")
    assert list(tmp_path.iterdir()) == []


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs tmpfs {where}"],
                          capture_output=True)
    return proc.returncode == 0


def test_a_full_disk_names_the_file(sim, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _can_mount_tmpfs(disk):
        pytest.skip("cannot mount a small tmpfs here (unshare -rm)")
    # A 4 KiB file system in a private mount namespace: the embeddings (38 KB) do not fit.
    script = (f"mount -t tmpfs -o size=4k tmpfs {disk} && exec {sys.executable} -m dnaembed "
              f"embed {sim / 's.fastq.gz'} -o {disk / 'e.npy'} -q")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True,
                          env=dict(os.environ, DNAEMBED_NO_PROGRESS="1"))
    err = assert_clean_error(proc, ": cannot write: No space left on device")
    # The file whose write failed: the vectors or their ids (written side by side).
    assert re.search(rf"{re.escape(str(disk))}/e\.(npy|ids\.txt): cannot write", err), err


def test_an_unwritable_output_is_found_before_the_work(sim, tmp_path):
    reads = str(sim / "s.fastq.gz")
    nowhere = "/proc/dnaembed-test"  # no file can be created in /proc, not even by root
    for args in (("cluster", reads, "-o", f"{nowhere}.tsv"),
                 ("cluster", reads, "-o", str(tmp_path / "c.tsv"), "--centers", f"{nowhere}.fa"),
                 ("consensus", reads, str(sim / "s.truth.tsv"), "-o", f"{nowhere}.fasta"),
                 ("run", reads, "-o", nowhere),
                 ("embed", reads, "-o", f"{nowhere}.npy")):
        proc = run_cli(*args)
        assert_clean_error(proc, nowhere)
        assert no_work_done(proc), args
    assert list(tmp_path.iterdir()) == []


def test_gzip_on_standard_input(sim, tmp_path):
    reads = sim / "s.fastq.gz"
    piped = run_cli("cluster", "-", "-q", stdin=reads.read_bytes(), check=True)
    named = run_cli("cluster", str(reads), "-q", check=True)
    body = [line for line in piped.stdout.splitlines() if not line.startswith(b"#")]
    assert len(body) == 75
    assert body == [line for line in named.stdout.splitlines() if not line.startswith(b"#")]
    proc = run_cli("consensus", str(reads), "-", "-q", stdin=gzip.compress(
        (sim / "s.truth.tsv").read_bytes()), check=True)
    assert proc.stdout.count(b">") == 25


def test_read_ids_starting_with_hash_survive_cluster_consensus_evaluate(sim, tmp_path):
    reads = read_sequences(sim / "s.fastq.gz")
    rename = {rid: (f"#{rid}" if k % 2 else rid) for k, rid in enumerate(reads.ids)}
    rename[reads.ids[1]] = "#read_id"  # looks like a column line
    ids = [rename[r] for r in reads.ids]
    write_sequences(tmp_path / "r.fastq", ids, reads.seqs, reads.quals)
    truth = [(rename[row[0]], *row[1:]) for row in read_table(sim / "s.truth.tsv")]
    write_tsv(tmp_path / "t.tsv", ["read_id", "strand_id", "orientation"], truth)
    clusters = tmp_path / "c.tsv"
    run_cli("cluster", str(tmp_path / "r.fastq"), "-o", str(clusters), "-q", check=True)
    assert [row[0] for row in read_table(clusters)] == ids
    proc = run_cli("consensus", str(tmp_path / "r.fastq"), str(clusters), "--json", "-q",
                   "-o", str(tmp_path / "s.fasta"), check=True)
    import json

    assert json.loads(proc.stdout)["counts"]["reads"] == 75
    n_clusters = len({row[1] for row in read_table(clusters)})
    assert read_sequences(tmp_path / "s.fasta").ids == [str(c) for c in range(n_clusters)]
    scores = json.loads(run_cli("evaluate", str(clusters), "--truth", str(tmp_path / "t.tsv"),
                                "--json", check=True).stdout)
    assert scores["reads_missing"] == 0 and scores["reads_scored"] == 75
    assert scores["A_0.9"] >= 0.95


def test_embed_to_standard_output_is_refused(sim, tmp_path):
    proc = run_cli("embed", str(sim / "s.fastq.gz"), "-o", "-", cwd=tmp_path)
    assert_clean_error(proc, "give a file name", code=2)
    assert list(tmp_path.iterdir()) == []


def test_embed_to_a_stream_is_refused_before_anything_is_written(sim, tmp_path):
    # /dev/stdout here is the pipe that captures it: a stream that cannot seek back to
    # the .npy header. It got a header of 0 rows and the rows, then "stdout.ids.txt:
    # cannot write" (exit 1); a device (-o /dev/null) got its ids file among the devices.
    proc = run_cli("embed", str(sim / "s.fastq.gz"), "-o", "/dev/stdout", cwd=tmp_path)
    err = assert_clean_error(proc, "-o/--output /dev/stdout: not a file", code=2)
    assert err.count("\n") == 1 and proc.stdout == b""
    assert list(tmp_path.iterdir()) == []
    from dnaembed.errors import UsageError
    from dnaembed.io.vectors import check_embedding_output

    with pytest.raises(UsageError, match="not a file"):
        check_embedding_output(os.devnull)
    check_embedding_output(tmp_path / "e.npy")  # a file to be: accepted


def test_unknown_device_or_preset_is_a_usage_error_listing_the_choices(sim, tmp_path):
    reads = str(sim / "s.fastq.gz")
    for args in (("cluster", reads, "--device", "tpu"), ("embed", reads, "-o", "e.npy",
                                                          "--device", "gpu0")):
        assert_clean_error(run_cli(*args, cwd=tmp_path), "auto, cpu, cuda", code=2)
    assert_clean_error(run_cli("simulate", "--preset", "foo", "-o", "x", cwd=tmp_path),
                       "nanopore-hard", code=2)
    assert_clean_error(run_cli("demo", "--preset", "foo", "-o", "d", cwd=tmp_path),
                       "illumina-array", code=2)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_demo_leaves_no_directory(tmp_path):
    # Too small a file-size limit for the simulated reads: the demo fails after mkdir.
    proc = run_limited("demo", "-o", str(tmp_path / "demo"), "--strands", "20", "-q",
                       max_file_bytes=2000)
    assert_clean_error(proc, "File too large")
    assert not (tmp_path / "demo").exists()


def test_a_stopped_demo_in_an_existing_directory_leaves_no_demo_files(tmp_path):
    # An earlier demo's results, then a demo stopped (Ctrl-C) once its reads are written:
    # the earlier clusters beside the new reads would be two demos mixed. The user's own
    # file stays.
    import signal
    import time

    out = tmp_path / "demo"
    out.mkdir()
    for name in ("reads.fastq.gz", "reads.truth.tsv", "reads.refs.fasta", *RUN_FILES):
        (out / name).write_text("an earlier demo's\n")
    (out / "notes.txt").write_text("mine\n")
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    demo = subprocess.Popen([sys.executable, "-m", "dnaembed", "demo", "-o", str(out),
                             "--strands", "1000", "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, preexec_fn=ctrl_c_as_in_a_terminal)
    reads = out / "reads.fastq.gz"
    deadline = time.monotonic() + 300
    while not (reads.exists() and reads.read_bytes()[:2] == b"\x1f\x8b"):  # the new reads
        assert demo.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    demo.send_signal(signal.SIGINT)
    _, err = demo.communicate(timeout=120)
    assert demo.returncode != 0 and b"Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


#: A demo whose simulation calls python-Levenshtein while a Ctrl-C arrives, and loses the
#: KeyboardInterrupt, as C code that clears its calls' errors does: importing torch did,
#: in ~40 ms of its import, and a demo stopped just after its reads appeared ran on.
_CTRL_C_DROPPED = """
import os, signal, sys, Levenshtein
from dnaembed.cli import main

editops = Levenshtein.editops
dropped = []

def editops_dropping_ctrl_c(*args):
    if not dropped:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 1.0)
        except KeyboardInterrupt:
            dropped.append(True)
            print("dropped", file=sys.stderr)
    return editops(*args)

Levenshtein.editops = editops_dropping_ctrl_c
main(["demo", "-o", sys.argv[1], "--strands", "30", "-q"])
"""


def test_a_ctrl_c_that_a_library_dropped_still_stops_the_demo(tmp_path):
    out = tmp_path / "demo"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_DROPPED, str(out)],
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=ctrl_c_as_in_a_terminal,
                          env=dict(os.environ, DNAEMBED_NO_PROGRESS="1",
                                   PYTHONWARNINGS="ignore"))
    assert proc.stderr.splitlines()[0] == "dropped", proc.stderr
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines()[-1] == "dnaembed: aborted"  # click's word for Ctrl-C
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("codec, damage", [("gz", "corrupt"), ("gz", "truncated"),
                                           ("xz", "corrupt")])
def test_a_damaged_compressed_input_is_a_clean_error_naming_it(tmp_path, codec, damage):
    # A corrupt stream raises the codec's own error (isal's, zlib's, lzma's), not an
    # OSError; it and a file cut short are bad input, named, with nothing written.
    import lzma

    records = b"".join(b"@r%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(20_000))
    data = gzip.compress(records, mtime=0) if codec == "gz" else lzma.compress(records)
    damaged = (data[:100] + b"garbage" * 10 + data[170:] if damage == "corrupt"
               else data[: len(data) // 2])
    reads = tmp_path / f"r.fastq.{codec}"
    reads.write_bytes(damaged)
    out = tmp_path / "c.tsv"
    proc = run_cli("cluster", str(reads), "-o", str(out), "-q")
    err = assert_clean_error(proc, reads.name, "cannot read")
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err
    assert not out.exists()
    piped = run_cli("cluster", "-", "-o", str(out), "-q", stdin=damaged)
    assert_clean_error(piped, "<stdin>", "cannot read")
    assert sorted(p.name for p in tmp_path.iterdir()) == [reads.name]


def test_a_named_pipe_is_read_whole(sim, tmp_path):
    # A pipe (what `<(zcat reads.fastq.gz)` gives) is read once, from its first byte:
    # nothing may look at its head before the reader does.
    import threading

    reads = sim / "s.fastq.gz"
    pipe = tmp_path / "reads.pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_bytes(reads.read_bytes()),
                              daemon=True)  # a reader that stops early leaves it blocked
    writer.start()
    piped = run_cli("cluster", str(pipe), "-q", check=True, timeout=120)
    named = run_cli("cluster", str(reads), "-q", check=True)
    body = [line for line in piped.stdout.splitlines() if not line.startswith(b"#")]
    assert len(body) == 75
    assert body == [line for line in named.stdout.splitlines() if not line.startswith(b"#")]


def test_outputs_that_are_not_files_are_written_as_they_are(sim, tmp_path):
    # A named pipe, a file descriptor (a shell's `>(...)`), a link: renaming a finished file
    # onto them replaced them (as root, `-o /dev/null` replaced the machine's /dev/null).
    import stat
    import threading

    reads = str(sim / "s.fastq.gz")
    expected = run_cli("cluster", reads, "-q", check=True).stdout
    got: dict[str, bytes] = {}

    pipe = tmp_path / "out.pipe"
    os.mkfifo(pipe)
    reader = threading.Thread(target=lambda: got.update(pipe=pipe.read_bytes()), daemon=True)
    reader.start()
    run_cli("cluster", reads, "-o", str(pipe), "-q", check=True, timeout=120)
    reader.join(30)
    assert got["pipe"] == expected and stat.S_ISFIFO(pipe.stat().st_mode)

    read_end, write_end = os.pipe()
    reader = threading.Thread(target=lambda: got.update(fd=os.fdopen(read_end, "rb").read()),
                              daemon=True)
    reader.start()
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "dnaembed", "cluster", reads, "-o",
                           f"/dev/fd/{write_end}", "-q"], pass_fds=(write_end,), env=env,
                          capture_output=True, timeout=120)
    os.close(write_end)
    reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert got["fd"] == expected

    (tmp_path / "data").mkdir()
    target, link = tmp_path / "data" / "c.tsv", tmp_path / "c.tsv"
    target.write_text("old\n")
    link.symlink_to(target)
    run_cli("cluster", reads, "-o", str(link), "-q", check=True)
    assert link.is_symlink() and target.read_bytes() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv", "data", "out.pipe"]
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["c.tsv"]


def test_standard_input_twice_and_outputs_that_clash_are_usage_errors(sim, tmp_path):
    reads = str(sim / "s.fastq.gz")
    fastq = gzip.decompress((sim / "s.fastq.gz").read_bytes())
    # The second '-' read nothing, and the run went on with the reads counted as 2 files.
    proc = run_cli("cluster", "-", "-", "-o", str(tmp_path / "c.tsv"), stdin=fastq)
    assert_clean_error(proc, "READS (1) and READS (2) cannot both be standard input", code=2)
    # run's -o is a directory: '-' made one of that name.
    proc = run_cli("run", reads, "-o", "-", cwd=tmp_path)
    assert_clean_error(proc, "-o/--output is a directory", code=2)
    # --log on an output that only the command's own outputs know: run's OUT/clusters.tsv,
    # embed's NAME.ids.txt (the log was written, then the output over it).
    (tmp_path / "out").mkdir()
    proc = run_cli("run", reads, "-o", str(tmp_path / "out"), "--log",
                   str(tmp_path / "out" / "clusters.tsv"))
    assert_clean_error(proc, "clusters.tsv and --log are the same file", code=2)
    proc = run_cli("embed", reads, "-o", str(tmp_path / "e.npy"), "--log",
                   str(tmp_path / "e.ids.txt"))
    assert_clean_error(proc, "and --log are the same file", code=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.ids.txt", "out"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["clusters.tsv"]  # the log
    # A budget below a megabyte was shown as "0 MB".
    proc = run_cli("cluster", reads, "--memory", "1K", "-o", str(tmp_path / "m.tsv"))
    assert_clean_error(proc, "--memory 1,024 bytes is too small")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_standard_output_is_named(sim, tmp_path):
    # A write error to standard output had no file name: "error: No space left on device".
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    reads = str(sim / "s.fastq.gz")
    for args in (["cluster", reads, "-q"], ["cluster", reads, "-q", "--centers", "-", "-o",
                                             str(tmp_path / "c.tsv")],
                 ["evaluate", str(sim / "s.truth.tsv"), "--truth", str(sim / "s.truth.tsv")]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([sys.executable, "-m", "dnaembed", *args], stdout=full,
                                  stderr=subprocess.PIPE, env=env, timeout=300)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and "Traceback" not in err and err.endswith(
            "dnaembed: error: standard output: cannot write: No space left on device\n"), args
    assert list(tmp_path.iterdir()) == []


def test_a_log_file_ends_with_the_error_and_may_go_in_the_output_directory(sim, tmp_path):
    # A failed command's one-line error went to standard error only, after its --log was
    # closed: a pipeline's log said nothing of why. And `run -o OUT --log OUT/run.log`
    # with OUT new failed ("No such file or directory"): the log opens before the outputs.
    reads = str(sim / "s.fastq.gz")
    log = tmp_path / "x.log"
    for args, code in (((str(tmp_path / "missing.fq"), "-o", str(tmp_path / "c.tsv")), 1),
                       ((reads, "--k", "3"), 2)):
        proc = run_cli("cluster", *args, "--log", str(log))
        last = assert_clean_error(proc, code=code).splitlines()[-1]
        if code == 2:  # click's own lines around it on standard error
            last = "dnaembed: error: " + last.removeprefix("Error: ")
        assert re.fullmatch(r"\d\d:\d\d:\d\d " + re.escape(last),
                            log.read_text().splitlines()[-1]), (last, log.read_text())
    out = tmp_path / "out"
    run_cli("run", reads, "-o", str(out), "--log", str(out / "run.log"), check=True)
    assert sorted(p.name for p in out.iterdir()) == ["clusters.tsv", "run.log", "strands.fasta",
                                                     "strands.tsv"]
    assert "strands" in (out / "run.log").read_text()
    # Any other missing directory stays an error, and nothing is made.
    proc = run_cli("run", reads, "-o", str(tmp_path / "o2"), "--log",
                   str(tmp_path / "nowhere" / "run.log"))
    assert_clean_error(proc, "nowhere/run.log: cannot write: No such file or directory")
    assert not (tmp_path / "o2").exists() and not (tmp_path / "nowhere").exists()


def test_a_log_file_that_is_not_a_log_is_left_whole(sim, tmp_path):
    # Opening --log empties it, and a file the command reads or writes only through another
    # option (the checkpoint `train --resume` goes on from, an earlier run's OUT/clusters.tsv)
    # was found to be the log too late: emptied.
    reads = str(sim / "s.fastq.gz")
    table = tmp_path / "earlier.tsv"
    table.write_text("#read_id\tcluster_id\nr1\t0\n")
    proc = run_cli("cluster", reads, "-o", str(tmp_path / "c.tsv"), "--log", str(table))
    assert_clean_error(proc, f"--log {table}: the file exists and is not a dnaembed log: "
                       "refusing to overwrite it", code=2)
    assert table.read_text() == "#read_id\tcluster_id\nr1\t0\n" and no_work_done(proc)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "clusters.tsv").write_text("an earlier run's table\n")
    proc = run_cli("run", reads, "-o", str(tmp_path / "out"), "--log",
                   str(tmp_path / "out" / "clusters.tsv"))
    assert proc.returncode == 2
    assert (tmp_path / "out" / "clusters.tsv").read_text() == "an earlier run's table\n"
    # A log of an earlier run (plain or compressed) is written anew, as is an empty file.
    for name in ("run.log", "run.log.gz", "run.log"):
        run_cli("cluster", reads, "-o", str(tmp_path / "c.tsv"), "--log",
                str(tmp_path / name), check=True)
    empty = tmp_path / "empty.log"
    empty.touch()
    run_cli("cluster", reads, "-o", str(tmp_path / "c.tsv"), "--log", str(empty), check=True)
    assert " dnaembed: " in (tmp_path / "run.log").read_text() and empty.stat().st_size > 0


def test_an_empty_path_is_a_usage_error_naming_its_option(sim, tmp_path):
    # An unset shell variable (`-o "$OUT"`): run and report wrote into the current
    # directory, embed failed with "internal error: ValueError", an empty READS was "is a
    # directory".
    reads = str(sim / "s.fastq.gz")
    (tmp_path / "c.tsv").write_text("")
    cases = [
        (("run", reads, "-o", ""), "-o/--output"),
        (("embed", reads, "-o", ""), "-o/--output"),
        (("report", str(tmp_path / "c.tsv"), "-o", ""), "-o/--output"),
        (("consensus", "", "c.tsv"), "READS"),
        (("consensus", reads, "c.tsv", "--log", ""), "--log"),
        (("cluster", reads, "-o", "c2.tsv", "--centers", ""), "--centers"),
    ]
    for args, name in cases:
        proc = run_cli(*args, cwd=tmp_path)
        err = assert_clean_error(proc, f"dnaembed: error: {name}: an empty path", code=2)
        assert err.count("\n") == 1, (args, err)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv"], args


def test_embed_names_both_records_of_a_repeated_id(tmp_path):
    # formats.md: "a repeated id is an error naming both records"; embed (which streams,
    # keeping ids only) named the second alone, unlike cluster, run and consensus.
    reads = tmp_path / "r.fa"
    reads.write_text(">a\nACGTACGTAC\n>b\nACGTTCGTAC\n>c\nACGAACGTAC\n>b\nACGTACGTAC\n")
    proc = run_cli("embed", str(reads), "-o", str(tmp_path / "e.npy"), "--chunk-size", "2")
    err = assert_clean_error(proc, f"{reads}: record 4 (b): duplicate read id (first seen at "
                             "record 2)")
    assert err.count("\n") == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["r.fa"]
    # Standard input cannot be read again: the record that repeats it, as before.
    proc = run_cli("embed", "-", "-o", str(tmp_path / "e.npy"), stdin=reads.read_bytes())
    assert_clean_error(proc, "<stdin>: record 4 (b): duplicate read id\n")
