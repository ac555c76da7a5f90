"""Does the rescue's k-mer search still find a read's cluster among many clusters?

Random designs of 150 nt, three reads per cluster with 5% substitutions (the
targets, grouped by cluster as the rescue groups a cluster's central reads), and
queries read from random clusters with 6%, matched in both orientations as the
rescue matches them (a k-mer and its reverse complement count as one, which
doubles the clusters holding it by chance). Prints, for each cut on the clusters
per k-mer (``max_targets``: k-mers held by more clusters are dropped as shared
primers; ``auto``: the rescue's own, :func:`dnaembed.cluster.kmers.chance_cut`),
how often the true cluster is the first candidate and among the 8.

    python scripts/check_kmer_cut.py --clusters 100000 300000 --cuts 16 64 auto
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import add_write_docs, finish  # noqa: E402

from dnaembed.cluster.kmers import KmerIndex  # noqa: E402

BASES = np.frombuffer(b"ACGT", np.uint8)


def noisy_reads(designs: np.ndarray, rows: np.ndarray, rate: float, rng) -> list[str]:
    """Reads of the given designs with substitutions at ``rate``."""
    x = designs[rows].copy()
    hit = rng.random(x.shape) < rate
    x[hit] = (x[hit] + rng.integers(1, 4, int(hit.sum()), dtype=np.uint8)) % 4
    return [row.tobytes().decode() for row in BASES[x]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", type=int, nargs="+", default=[100_000, 300_000])
    p.add_argument("--cuts", nargs="+", default=["16", "64", "auto"],
                   help="cuts on the clusters per k-mer: numbers, or auto")
    p.add_argument("--queries", type=int, default=3_000)
    p.add_argument("--seed", type=int, default=0)
    add_write_docs(p, "The rescue's k-mer cut and the number of clusters")
    args = p.parse_args()
    lines = ["| clusters | cut | true cluster first | among 8 | s |", "|---:|---:|---:|---:|---:|"]
    print("\n".join(lines))
    for n in args.clusters:
        rng = np.random.default_rng([args.seed, n])
        designs = rng.integers(0, 4, (n, 150), dtype=np.uint8)
        groups = np.repeat(np.arange(n), 3)
        targets = noisy_reads(designs, groups, 0.05, rng)
        picks = rng.choice(n, args.queries, replace=False)
        queries = noisy_reads(designs, picks, 0.06, rng)
        for cut in args.cuts:
            start = time.perf_counter()
            index = KmerIndex(targets, both=True, k=11, groups=groups,
                              max_targets=None if cut == "auto" else int(cut))
            found, _ = index.candidates(queries, 8)
            shown = f"auto ({index.cut})" if cut == "auto" else cut
            lines.append(f"| {n:,} | {shown} | {(found[:, 0] == picks).mean():.3f} | "
                         f"{(found == picks[:, None]).any(axis=1).mean():.3f} | "
                         f"{time.perf_counter() - start:.1f} |")
            print(lines[-1], flush=True)
    finish(args.write_docs, "\n".join(lines))


if __name__ == "__main__":
    main()
