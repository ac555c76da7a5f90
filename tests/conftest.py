"""Shared helpers: run the real CLI in a subprocess, small data files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(*args: str, cwd: Path | None = None, stdin: bytes | None = None,
            check: bool = False, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``python -m dnaembed ARGS`` and capture bytes stdout/stderr."""
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, "-m", "dnaembed", *args], cwd=cwd, input=stdin, capture_output=True,
        env=env, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"dnaembed {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()}"
        )
    return proc


def ctrl_c_as_in_a_terminal() -> None:
    """A child's Ctrl-C as a terminal gives it (``preexec_fn``): a suite started in the
    background of a shell (``.ci/run &``, nohup) ignores SIGINT, its children inherit
    that, and a test's Ctrl-C then did nothing (the stopped demo ran to its end)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def assert_clean_error(proc: subprocess.CompletedProcess, *fragments: str, code: int = 1) -> str:
    """A failed command: the expected exit code, one line on stderr, no traceback."""
    err = proc.stderr.decode()
    assert proc.returncode == code, (proc.returncode, err)
    assert "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


@pytest.fixture
def write(tmp_path):
    """Write a text file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return _write


def train_tiny_model(out_dir: Path, steps: int = 30, val_every: int = 30) -> Path:
    """Really train a tiny model (window 64) for a few steps on CPU; its run directory."""
    from dnaembed.train.loop import train

    train(tiny_config(steps, val_every), out_dir, device="cpu")
    return out_dir


def tiny_config(steps: int = 30, val_every: int = 30):
    """The config of :func:`train_tiny_model`."""
    from dnaembed.train.config import load_config

    return load_config(None, [
        "model.window=64", "model.channels=[8,8,8]", "model.embedding_dim=16",
        "pairs.length_min=40", "pairs.length_max=64", "pairs.primer_length_min=8",
        "pairs.primer_length_max=12", "pairs.truncate_max=10", "train.batch_size=32",
        f"train.steps={steps}", f"train.val_every={val_every}", "train.val_pairs=64",
        "train.warmup_steps=5", "train.prefetch=0",
    ])
