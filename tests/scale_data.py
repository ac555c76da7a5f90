"""Shared by the partitioned-clustering tests: a simulated run and a small real encoder."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import run_cli

from dnaembed.io.sequences import read_sequences, write_sequences
from dnaembed.model.checkpoint import save_checkpoint
from dnaembed.model.encoder import Encoder, EncoderConfig


def simulate_run(directory: Path, strands: int = 200, seed: int = 5) -> Path:
    """Nanopore-like reads of ``strands`` strands, both orientations, truncated reads and
    contaminants; also split into two files (lane1/lane2). Returns the prefix."""
    prefix = directory / "s"
    run_cli("simulate", "-o", str(prefix), "--strands", str(strands), "--length", "120",
            "--preset", "nanopore", "--reverse-fraction", "0.5", "--truncate-fraction", "0.1",
            "--contaminants", "0.01", "--seed", str(seed), "-q", check=True)
    reads = read_sequences(f"{prefix}.fastq.gz")
    half = len(reads) // 2
    for name, part in (("lane1", range(half)), ("lane2", range(half, len(reads)))):
        subset = reads.subset(list(part))
        write_sequences(directory / f"{name}.fastq.gz", subset.ids, subset.seqs, subset.quals)
    return prefix


def small_encoder(path: Path, seed: int = 0) -> Path:
    """A small encoder (real torch model, weights from a seed): fast enough for every test."""
    torch.manual_seed(seed)
    config = EncoderConfig(window=160, channels=[8, 16], embedding_dim=16, name="test-small")
    save_checkpoint(path, Encoder(config))
    return path
