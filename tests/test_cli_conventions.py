"""Conventions every command keeps: help with examples, closed pipes, batch logs, completion."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import assert_clean_error, run_cli

from dnaembed.cli import cli


@pytest.fixture(scope="module")
def reads(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    run_cli("simulate", "-o", str(d / "s"), "--strands", "40", "--length", "110", "--seed", "1",
            "-q", check=True)
    return d / "s.fastq.gz"


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_help_ends_with_examples(command):
    text = run_cli(command, "--help", check=True).stdout.decode().rstrip().splitlines()
    examples = []
    for line in reversed(text):
        if not line.strip().startswith(("dnaembed ", "zcat ")):
            break
        examples.append(line)
    assert 2 <= len(examples) <= 3, text[-5:]
    assert text[-len(examples) - 2].strip() == "Examples:"
    assert all(f"dnaembed {command}" in line for line in examples)


def test_choices_are_listed_in_help():
    text = run_cli("cluster", "--help", check=True).stdout.decode()
    # Both bundled models are listed (help text is wrapped: compare without line breaks).
    assert "model (candidates, default) or a model file" in " ".join(text.split())
    assert "-k, --k" in text
    simulate = run_cli("simulate", "--help", check=True).stdout.decode()
    assert "[illumina|illumina-array|nanopore|nanopore-hard]" in simulate
    # One meaning of --orientation (consensus: how a read's orientation is known); cluster's
    # switch for its output column has a name of its own.
    assert not re.search(r"--orientation[ /]", text)
    assert "--orientation [auto|infer|forward]" in run_cli(
        "consensus", "--help", check=True).stdout.decode()


def _pipeline(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], capture_output=True,
                          env=dict(os.environ, DNAEMBED_NO_PROGRESS="1"))


def test_a_closed_pipe_exits_141_without_a_message(reads):
    dnaembed = f"{sys.executable} -m dnaembed"
    proc = _pipeline(f"{dnaembed} cluster {reads} -q | head -n 0")
    assert proc.returncode == 141 and proc.stderr == b"", proc.stderr
    proc = _pipeline(f"{dnaembed} consensus {reads} {reads.with_name('s.truth.tsv')} -q "
                     "| head -n 0")
    assert proc.returncode == 141 and proc.stderr == b"", proc.stderr


@pytest.mark.parametrize("where", [[], ["--workers", "1"]], ids=["here", "local-cluster"])
def test_sigterm_stops_a_run_with_one_line_and_cleans_up(reads, tmp_path, where):
    # A job scheduler's cancel, `timeout` or `kill`: by default SIGTERM ended the process on
    # the spot and left its --tmpdir files (a cancelled job's spilled reads and vectors).
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "dnaembed", "cluster", "-", "-o",
                             str(tmp_path / "c.tsv"), "--tmpdir", str(tmp), *where,
                             "--log", str(tmp_path / "run.log")],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, DNAEMBED_NO_PROGRESS="1"))
    try:
        proc.stdin.write(gzip.decompress(reads.read_bytes())[:2000])  # then it waits for more
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (list(tmp.iterdir()) and (
                not where or psutil.Process(proc.pid).children(recursive=True))):
            time.sleep(0.2)
        helpers = psutil.Process(proc.pid).children(recursive=True)
        assert list(tmp.iterdir()) and (helpers or not where)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1].decode()
    finally:
        proc.kill()
    assert proc.returncode == 143 and err.splitlines()[-1] == "dnaembed: terminated", err
    assert (tmp_path / "run.log").read_text().splitlines()[-1].endswith(" dnaembed: terminated")
    assert "Traceback" not in err
    assert list(tmp.iterdir()) == [] and not (tmp_path / "c.tsv").exists()
    _, alive = psutil.wait_procs(helpers, timeout=15)  # the worker, Dask's resource tracker
    assert not alive, [p.cmdline() for p in alive]


def test_batch_logs_have_a_line_every_interval_and_go_to_log_file(reads, tmp_path):
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", DNAEMBED_LOG_INTERVAL="0.3")
    log = tmp_path / "run.log"
    proc = subprocess.run([sys.executable, "-m", "dnaembed", "cluster", str(reads), "-o",
                           str(tmp_path / "c.tsv"), "--log", str(log)], capture_output=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.decode()
    stamps = [line for line in err.splitlines() if re.match(r"\d\d:\d\d:\d\d dnaembed: ", line)]
    beats = [line for line in stamps if "elapsed" in line]
    assert beats, err
    assert any(re.search(r"embedding: [\d,]+( of [\d,]+)? reads|working \(", b) for b in beats)
    text = log.read_text()
    assert "max distance" in text and "reads in" in text and "elapsed" in text


def test_shell_completion_script():
    env = dict(os.environ, _DNAEMBED_COMPLETE="bash_source")
    proc = subprocess.run([sys.executable, "-m", "dnaembed"], capture_output=True, env=env)
    assert proc.returncode == 0 and b"_dnaembed_completion" in proc.stdout
    env = dict(os.environ, _DNAEMBED_COMPLETE="bash_complete", COMP_WORDS="dnaembed clu",
               COMP_CWORD="1")
    proc = subprocess.run([sys.executable, "-m", "dnaembed"], capture_output=True, env=env)
    assert b"cluster" in proc.stdout


def test_the_periodic_line_says_1_task_not_1_tasks():
    from dnaembed.log import progress_bar, status_line

    with progress_bar(desc="linking", unit=" tasks") as bar:
        bar.update(1)
        assert status_line().startswith("linking: 1 task, ")  # then its rate: "N tasks/s"
        bar.update(1)
        assert "linking: 2 tasks" in status_line()
    with progress_bar(desc="embedding", total=3, unit=" chunks") as bar:
        bar.update(1)
        assert "embedding: 1 of 3 chunks (33%)" in status_line()


def test_log_to_standard_output_is_refused(tmp_path):
    """`--log -` wrote a file named '-' (while `--json - --log -` was refused as both being
    standard output)."""
    (tmp_path / "t.tsv").write_text("r1\ts1\n")
    (tmp_path / "c.tsv").write_text("r1\t0\n")
    for args in (["evaluate", "c.tsv", "--truth", "t.tsv"], ["simulate", "-o", "s",
                                                             "--strands", "2"]):
        proc = run_cli(*args, "--log", "-", cwd=tmp_path)
        err = assert_clean_error(proc, "--log -: the log goes to standard error already",
                                 code=2)
        assert len(err.strip().splitlines()) == 1 and not proc.stdout
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv", "t.tsv"]


def test_bad_input_with_verbose_is_one_line_an_internal_error_a_traceback(tmp_path, capsys):
    """With -v every error printed its traceback first: a bad input's one line came after
    thirty lines of dnaembed's and click's frames."""
    from dnaembed.cli import base

    (tmp_path / "t.tsv").write_text("r1\ts1\nr1\ts2\n")
    (tmp_path / "c.tsv").write_text("r1\t0\n")
    for args in (["evaluate", "c.tsv", "--truth", "t.tsv", "-v"],
                 ["evaluate", "c.tsv", "--truth", "t.tsv", "--json", "t.tsv", "-v"]):
        err = assert_clean_error(run_cli(*args, cwd=tmp_path), "t.tsv",
                                 code=2 if "--json" in args else 1)
        assert len(err.strip().splitlines()) == 1, err
    # What dnaembed did not foresee keeps its traceback under -v ("rerun with -v").
    base._state["verbose"] = 1
    try:
        try:
            raise ValueError("unforeseen")
        except ValueError as e:
            assert base._report(e) == 1
    finally:
        base._state["verbose"] = 0
    err = capsys.readouterr().err
    assert "Traceback" in err and "internal error: ValueError: unforeseen" in err
