"""Does the rescue's k-mer search still find a read's cluster among many clusters?

Random designs of 150 nt, three reads per cluster with 5% substitutions (the
targets, grouped by cluster as the rescue groups a cluster's central reads), and
queries read from random clusters with 6%, matched in both orientations as the
rescue matches them (a k-mer and its reverse complement count as one, which
doubles the clusters holding it by chance). ``--truncated`` of the queries are
the real set's worst reads instead: 60-90 nt of their design with ~18% edits
(substitutions, insertions and deletions). Prints, for each cut on the clusters
per k-mer (``max_targets``: k-mers held by more clusters are dropped as shared
primers; ``auto``: the rescue's own, :func:`dnaembed.cluster.kmers.chance_cut`)
and each k-mer length (``auto``: the rescue's own for that many queries,
:func:`dnaembed.cluster.kmers.kmer_length`), how often the true cluster is the
first candidate and among the 8, for each kind of query. ``--threads``: the search
also on that many threads of one process (as ``dnaembed cluster`` runs it), its time
and whether its lists are the one-thread search's.

    python scripts/check_kmer_cut.py --clusters 100000 300000 --cuts 16 64 auto --ks 11
    python scripts/check_kmer_cut.py --clusters 100000 300000 --queries 22000 --ks 11 12 auto
    python scripts/check_kmer_cut.py --clusters 100000 300000 --ks auto --threads 1 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import add_write_docs, finish  # noqa: E402

from dnaembed.cluster.kmers import MAX_K, KmerIndex, kmer_length  # noqa: E402
from dnaembed.encoding import decode_flat, encode_flat  # noqa: E402
from dnaembed.execute.inline import InlineExecutor  # noqa: E402
from dnaembed.log import configure  # noqa: E402
from dnaembed.sim.channel import Channel, transmit  # noqa: E402

BASES = np.frombuffer(b"ACGT", np.uint8)


def noisy_reads(designs: np.ndarray, rows: np.ndarray, rate: float, rng) -> list[str]:
    """Reads of the given designs with substitutions at ``rate``."""
    x = designs[rows].copy()
    hit = rng.random(x.shape) < rate
    x[hit] = (x[hit] + rng.integers(1, 4, int(hit.sum()), dtype=np.uint8)) % 4
    return [row.tobytes().decode() for row in BASES[x]]


#: The real set's worst reads: what is left of them carries ~18% edits.
TRUNCATED_CHANNEL = Channel(substitution=0.07, insertion=0.05, deletion=0.06)


def truncated_reads(designs: np.ndarray, rows: np.ndarray, rng) -> list[str]:
    """60-90 nt of each design, through :data:`TRUNCATED_CHANNEL`."""
    cuts = rng.integers(60, 91, len(rows))
    kept = [BASES[designs[r, :c]].tobytes().decode() for r, c in zip(rows.tolist(), cuts)]
    out = transmit(*encode_flat(kept), TRUNCATED_CHANNEL, rng)
    return decode_flat(out.codes, out.lengths)


def share(hits: np.ndarray) -> str:
    """The share of True, or - for no queries of that kind."""
    return f"{hits.mean():.3f}" if len(hits) else "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", type=int, nargs="+", default=[100_000, 300_000])
    p.add_argument("--cuts", nargs="+", default=["auto"],
                   help="cuts on the clusters per k-mer: numbers, or auto")
    p.add_argument("--ks", nargs="+", default=["11", "12", "auto"],
                   help="k-mer lengths: numbers, or auto (the rescue's rule)")
    p.add_argument("--queries", type=int, default=22_000,
                   help="queries in all (the rescue asks about ~7,000 at 10^6 reads)")
    p.add_argument("--truncated", type=int, default=2_000, help="of them, truncated reads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, nargs="+", default=[1],
                   help="threads of the search (1: one pass on this thread)")
    add_write_docs(p, "The rescue's k-mer search and the number of clusters")
    args = p.parse_args()
    for k in args.ks:
        if k != "auto" and not (k.isdigit() and 1 <= int(k) <= MAX_K):
            p.error(f"--ks: {k!r} is not a k-mer length 1..{MAX_K} or auto")
    for cut in args.cuts:
        if cut != "auto" and not cut.isdigit():
            p.error(f"--cuts: {cut!r} is not a number of clusters or auto")
    if not 0 <= args.truncated <= args.queries or args.queries > min(args.clusters):
        p.error("--truncated must be 0..--queries, and --queries at most the fewest --clusters")
    if min(args.threads) < 1:
        p.error("--threads must be at least 1")
    configure(quiet=True)  # the threads' tasks draw no progress bars into the table
    lines = ["| clusters | queries | cut | k | threads | first | among 8 | truncated: among 8 | s "
             "| lists as on 1 thread |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    print("\n".join(lines))
    for n in args.clusters:
        rng = np.random.default_rng([args.seed, n])
        designs = rng.integers(0, 4, (n, 150), dtype=np.uint8)
        groups = np.repeat(np.arange(n), 3)
        targets = noisy_reads(designs, groups, 0.05, rng)
        picks = rng.choice(n, args.queries, replace=False)
        short = args.truncated
        queries = (truncated_reads(designs, picks[:short], rng)
                   + noisy_reads(designs, picks[short:], 0.06, rng))
        mean_kmers = float(np.mean([len(q) for q in queries])) - 10
        for cut in args.cuts:
            for k_arg in args.ks:
                k = kmer_length(len(queries), mean_kmers, 11, both=True) if k_arg == "auto" \
                    else int(k_arg)
                one_thread = None
                for threads in args.threads:
                    start = time.perf_counter()
                    index = KmerIndex(targets, both=True, k=k, groups=groups,
                                      max_targets=None if cut == "auto" else int(cut))
                    with InlineExecutor(threads) as runner:
                        found, flips = index.candidates(queries, 8, runner=runner)
                    seconds = time.perf_counter() - start
                    if threads == 1:
                        one_thread = (found, flips)
                    same = "-" if one_thread is None or threads == 1 else (
                        "same" if np.array_equal(one_thread[0], found)
                        and np.array_equal(one_thread[1], flips) else "DIFFERENT")
                    among = (found == picks[:, None]).any(axis=1)
                    shown_cut = f"auto ({index.cut})" if cut == "auto" else cut
                    lines.append(
                        f"| {n:,} | {len(queries):,} | {shown_cut}"
                        f" | {f'auto ({k})' if k_arg == 'auto' else k} | {threads}"
                        f" | {share(found[short:, 0] == picks[short:])}"
                        f" | {share(among[short:])} | {share(among[:short])}"
                        f" | {seconds:.1f} | {same} |")
                    print(lines[-1], flush=True)
    finish(args.write_docs, "\n".join(lines))


if __name__ == "__main__":
    main()
