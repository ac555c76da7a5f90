"""The run's directory under --tmpdir, and the leftovers of killed runs (real processes, real
SIGKILL)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli

from dnaembed.io.spill_dir import LOCK_NAME, SpillDir, remove_leftovers

HOLDER = """
import sys, time
from dnaembed.io.spill_dir import SpillDir
d = SpillDir(sys.argv[1])
d.new_file("vectors").write_bytes(b"x" * 3_000_000)
print(d.path, flush=True)
time.sleep(600)
"""


def hold_a_directory(base: Path) -> tuple[subprocess.Popen, Path]:
    """A process holding a SpillDir under ``base`` (with a 3 MB file), and its directory."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(base)], stdout=subprocess.PIPE,
                            text=True)
    return proc, Path(proc.stdout.readline().strip())


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()


def test_a_killed_runs_directory_is_removed_by_the_next_and_a_live_ones_is_not(tmp_path,
                                                                                caplog):
    alive, live_dir = hold_a_directory(tmp_path)
    killed, left_dir = hold_a_directory(tmp_path)
    try:
        kill(killed)
        assert (left_dir / LOCK_NAME).exists()  # SIGKILL: nothing could remove it
        with caplog.at_level(logging.INFO, logger="dnaembed"), SpillDir(tmp_path) as mine:
            assert not left_dir.exists()
            assert live_dir.is_dir() and (live_dir / "001-vectors").stat().st_size == 3_000_000
            assert sorted(tmp_path.iterdir()) == sorted([live_dir, mine.path])
        removed = [r.getMessage() for r in caplog.records if "removed" in r.getMessage()]
        assert removed == [f"removed {left_dir}, the temporary files of a run that was killed "
                           "before it could remove them (3 MB)"]
    finally:
        kill(alive)
    assert remove_leftovers(tmp_path) == [live_dir]  # its run is gone now


def test_directories_of_this_process_other_versions_and_other_kinds_are_left(tmp_path):
    first = SpillDir(tmp_path)
    try:
        # The same process's directory stays (here flock alone keeps it; _OWN keeps it
        # where flock is emulated by POSIX locks, NFS, which this test cannot make).
        with SpillDir(tmp_path) as second:
            assert first.path.is_dir() and second.path.is_dir()
        unlocked = tmp_path / "dnaembed-earlier"  # no lock file: an earlier version's
        unlocked.mkdir()
        elsewhere = tmp_path / "dnaembed-elsewhere"  # another machine's (NFS without locks)
        elsewhere.mkdir()
        (elsewhere / LOCK_NAME).write_text(f"not-{socket.gethostname()} 12\n")
        (tmp_path / "dnaembed-file").write_text("not a directory")
        (tmp_path / "dnaembed-link").symlink_to(unlocked)
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / LOCK_NAME).touch()
        assert remove_leftovers(tmp_path) == []
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [first.path.name, "dnaembed-earlier", "dnaembed-elsewhere", "dnaembed-file",
             "dnaembed-link", "other"])
        (elsewhere / LOCK_NAME).write_text(f"{socket.gethostname()} 12\n")  # this machine's
        assert remove_leftovers(tmp_path) == [elsewhere]
    finally:
        first.close()
    assert not first.path.exists()


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    d = tmp_path_factory.mktemp("sim")
    run_cli("simulate", "-o", str(d / "s"), "--strands", "20", "--length", "110",
            "--preset", "nanopore", "--seed", "3", "-q", check=True)
    return d / "s.fastq.gz"


def test_a_cluster_run_killed_mid_run_leaves_its_directory_and_the_next_run_removes_it(
        sim, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # A run reading standard input, which stays open: it waits in its read, its directory made.
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    waiting = subprocess.Popen([sys.executable, "-m", "dnaembed", "cluster", "-", "--tmpdir",
                                str(tmp), "-o", str(tmp_path / "never.tsv")],
                               stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp.glob(f"dnaembed-*/{LOCK_NAME}")):
            assert waiting.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        waiting.send_signal(signal.SIGKILL)
        waiting.wait(timeout=30)
        waiting.stdin.close()
    [left] = list(tmp.iterdir())

    out = tmp_path / "c.tsv"
    proc = run_cli("cluster", str(sim), "--tmpdir", str(tmp), "-o", str(out), check=True)
    assert f"removed {left}, the temporary files of a run that was killed" in \
        proc.stderr.decode()
    assert list(tmp.iterdir()) == [] and out.read_text().count("\n") > 100
    assert not (tmp_path / "never.tsv").exists()
