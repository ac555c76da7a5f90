"""Benchmark `dnaembed consensus`: strands recovered from clusters, against the medoid alone.

Sets (``--sets``, comma-separated): simulated ``illumina-array``, ``nanopore``,
``nanopore-hard`` (``--strands`` random strands of ``--length`` nt, negative
binomial coverage of mean ``--coverage`` and dispersion ``--dispersion``,
optionally ``--reverse-fraction`` / ``--truncate-fraction``), and ``real``:
../shared/data/ldpc-exp7 (13,248 designs of 150 nt, reads in both orientations,
truncated reads, shared primers).

Clusters (``--clusters``):
  * ``truth`` (default): the true clusters (the consensus step measured alone);
  * ``dnaembed``: the real chain, ``dnaembed.pipeline.cluster_reads`` with the
    bundled model (both orientations), then consensus with the clusterer's
    orientations;
  * a path to a clusters TSV (one set only).

Reported per set: fraction of reference strands recovered exactly / within edit
distance 1 / within 3 (over every reference, and over the references that have
reads), the same for the medoid alone, exact recovery by cluster size, how well
``confidence`` flags the wrong strands, and the throughput (strands/s, reads/s).

    .venv/bin/python scripts/bench_consensus.py                      # everything, truth clusters
    .venv/bin/python scripts/bench_consensus.py --sets nanopore --strands 1000
    # long strands: polished in windows (the default past 2,000 nt), then on whole alignments
    .venv/bin/python scripts/bench_consensus.py --sets nanopore --strands 4 --length 5000 \
        --coverage 3 --dispersion 1000 [--polish-whole-up-to 100000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from benchlib import REAL_READS, REAL_REFS, REAL_TRUTH, add_write_docs, finish

from dnaembed.consensus import consensus_strands, polish
from dnaembed.evaluate.recovery import match_references, recovery_scores
from dnaembed.io.sequences import ReadSet, read_sequences
from dnaembed.io.tables import read_cluster_table, read_table
from dnaembed.log import configure
from dnaembed.sim.channel import PRESETS
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import ReadLayout, simulate_reads
from dnaembed.sim.strands import random_strands

SIZE_BINS = [(1, 1), (2, 2), (3, 3), (4, 5), (6, 9), (10, 10**9)]


def load_set(name: str, args) -> dict:
    """Reads (ReadSet), reference strands, and the truth: reference index per read (-1: none)."""
    if name == "real":
        reads = read_sequences(REAL_READS)
        refs = read_sequences(REAL_REFS)
        index = {r: i for i, r in enumerate(refs.ids)}
        truth = {row[0]: index[row[1]] for row in read_table(REAL_TRUTH)}
        ref_of = np.array([truth.get(r, -1) for r in reads.ids], dtype=np.int64)
        return dict(reads=reads, refs=refs.seqs, ref_ids=refs.ids, ref_of=ref_of, length=150)
    if name not in PRESETS:
        raise SystemExit(f"unknown set {name!r}: use real or one of {', '.join(PRESETS)}")
    rng = np.random.default_rng(args.seed)
    strands = random_strands(args.strands, args.length, rng)
    sim = simulate_reads(
        strands,
        PRESETS[name],
        Coverage("negbin", mean=args.coverage, dispersion=args.dispersion),
        ReadLayout(
            reverse_fraction=args.reverse_fraction, truncate_fraction=args.truncate_fraction
        ),
        seed=args.seed + 1,
    )
    reads = ReadSet(sim.ids, sim.seqs, sim.quals)
    return dict(reads=reads, refs=strands, ref_ids=sim.strand_ids, ref_of=sim.strand,
                length=args.length)


def clusters_for(data: dict, how: str, threads: int) -> tuple[list, object]:
    """Per read: cluster label (None: none) and the orientation to pass to consensus."""
    reads: ReadSet = data["reads"]
    if how == "truth":
        labels = [int(x) if x >= 0 else None for x in data["ref_of"].tolist()]
        return labels, None  # orientation inferred: the consensus step is measured whole
    if how == "dnaembed":
        try:
            from dnaembed.log import set_threads
            from dnaembed.model.checkpoint import load_model
            from dnaembed.pipeline import cluster_reads
        except ImportError as e:  # the clustering chain is being written alongside
            raise SystemExit(f"--clusters dnaembed: clustering not available ({e})") from None
        set_threads(threads)
        start = time.perf_counter()
        result = cluster_reads(reads.seqs, load_model().model, strand="both")
        print(f"  clustering: {result.n_clusters} clusters in {time.perf_counter() - start:.1f} s")
        return result.labels.tolist(), result.orientation.astype(bool)
    table = read_cluster_table(how, reads.ids)
    return [table.labels.get(r) for r in reads.ids], (
        [table.orientation.get(r, "+") for r in reads.ids] if table.orientation else None
    )


def single_read_ceiling(reads: ReadSet, refs: list[str], ref_of: np.ndarray,
                        reads_per_ref: np.ndarray) -> dict:
    """The most that can be recovered, over the references with reads, given the strands
    read once: such a strand comes back (exactly, or within 3) only if its one read does,
    in either orientation; a decoder can only guess among the read's many equally likely
    one-edit alternatives otherwise."""
    from rapidfuzz.distance import Levenshtein

    from dnaembed.encoding import reverse_complement

    once = np.flatnonzero(reads_per_ref == 1)
    read_of = {int(r): i for i, r in enumerate(ref_of.tolist()) if r >= 0}
    dist = np.array([
        min(Levenshtein.distance(reads.seqs[read_of[r]], refs[r]),
            Levenshtein.distance(reverse_complement(reads.seqs[read_of[r]]), refs[r]))
        for r in once.tolist()
    ], dtype=np.int64)
    with_reads = max(int(np.sum(reads_per_ref > 0)), 1)
    return {"exact": 1 - float(np.sum(dist > 0)) / with_reads,
            "within_3": 1 - float(np.sum(dist > 3)) / with_reads}


def run_set(name: str, args) -> dict:
    data = load_set(name, args)
    reads: ReadSet = data["reads"]
    refs: list[str] = data["refs"]
    labels, orientation = clusters_for(data, args.clusters, args.threads)
    length = data["length"] if args.length_hint else None
    start, cpu = time.perf_counter(), time.process_time()
    strands = consensus_strands(
        reads, labels, expected_length=length, orientation=orientation, seed=args.seed,
        threads=args.threads,
    )
    seconds = time.perf_counter() - start
    # CPU time of this process: the honest cost on a shared machine (single process only).
    cpu = time.process_time() - cpu
    n_reads = sum(s.size for s in strands)

    with_reads = np.unique(data["ref_of"][data["ref_of"] >= 0])
    reads_per_ref = np.bincount(data["ref_of"][data["ref_of"] >= 0], minlength=len(refs))
    results = {"set": name, "clusters": args.clusters, "reads": len(reads),
               "strands": len(strands), "references": len(refs),
               "references_with_reads": int(len(with_reads)), "seconds": seconds,
               "cpu_seconds": cpu if args.threads == 1 else float("nan"),
               "strands_per_cpu_s": len(strands) / cpu if args.threads == 1 and cpu else
               float("nan"),
               "strands_per_s": len(strands) / seconds if seconds else float("inf"),
               "reads_per_s": n_reads / seconds if seconds else float("inf"),
               # What coverage alone allows: a strand with 0 reads is lost, one with 1
               # read is exact only when that read is, with 2 only qualities can decide.
               "references_by_reads": {
                   **{str(k): float(np.mean(reads_per_ref == k)) for k in (0, 1, 2)},
                   "3+": float(np.mean(reads_per_ref >= 3)),
               }}
    results["ceiling"] = single_read_ceiling(reads, refs, data["ref_of"], reads_per_ref)
    for kind in ("consensus", "medoid"):
        seqs = [s.sequence if kind == "consensus" else s.medoid for s in strands]
        match = match_references(refs, seqs, workers=max(args.threads, 1))
        results[kind] = {
            "all": recovery_scores(refs, seqs, match=match),
            "with_reads": recovery_scores(refs, seqs, match=match, subset=with_reads),
        }
        # Exact recovery by the size of the cluster its strand came from (truth clusters).
        if args.clusters == "truth":
            size_of = {int(s.cluster_id): s.size for s in strands}
            by_size = {}
            for lo, hi in SIZE_BINS:
                refs_in = [r for r, n in size_of.items() if lo <= n <= hi]
                if refs_in:
                    exact = float(np.mean(match.distance[refs_in] == 0))
                    by_size[f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"] = (len(refs_in), exact)
            results[kind]["exact_by_size"] = by_size
            if kind == "consensus":
                sure = [int(s.cluster_id) for s in strands if s.confidence >= 1.0]
                unsure = [int(s.cluster_id) for s in strands if s.confidence < 1.0]
                results["confidence"] = {
                    "confident": len(sure),
                    "exact_if_confident": float(np.mean(match.distance[sure] == 0))
                    if sure else float("nan"),
                    "exact_if_not": float(np.mean(match.distance[unsure] == 0))
                    if unsure else float("nan"),
                }
    return results


def report(r: dict) -> str:
    lines = [
        f"== {r['set']} (clusters: {r['clusters']}): {r['reads']:,} reads, "
        f"{r['references']:,} references ({r['references_with_reads']:,} with reads), "
        f"{r['strands']:,} strands",
        f"   consensus: {r['seconds']:.1f} s wall, {r['strands_per_s']:.0f} strands/s, "
        f"{r['reads_per_s']:.0f} reads/s; {r['cpu_seconds']:.1f} CPU s, "
        f"{r['strands_per_cpu_s']:.0f} strands per CPU second",
        "                          exact   within 1  within 3  per-position error",
    ]
    for kind in ("consensus", "medoid"):
        for scope in ("all", "with_reads"):
            s = r[kind][scope]
            lines.append(
                f"   {kind:9s} {scope:11s}  {s['exact']:.4f}   {s['within_1']:.4f}    "
                f"{s['within_3']:.4f}    {s['error_per_position']:.5f}"
            )
    cov = r["references_by_reads"]
    lines.append(
        f"   references with 0 / 1 / 2 / 3+ reads: {cov['0']:.4f} / {cov['1']:.4f} / "
        f"{cov['2']:.4f} / {cov['3+']:.4f}"
    )
    lines.append(
        f"   ceiling from the strands read once (over references with reads): exact <= "
        f"{r['ceiling']['exact']:.4f}, within 3 <= {r['ceiling']['within_3']:.4f}"
    )
    if "exact_by_size" in r["consensus"]:
        cells = [
            f"{k}: {r['consensus']['exact_by_size'][k][1]:.3f}"
            f" (medoid {r['medoid']['exact_by_size'][k][1]:.3f}, n={n})"
            for k, (n, _) in r["consensus"]["exact_by_size"].items()
        ]
        lines.append("   exact by cluster size: " + "; ".join(cells))
    if "confidence" in r:
        c = r["confidence"]
        lines.append(
            f"   confidence = 1: {c['confident']:,} strands, {c['exact_if_confident']:.4f} exact;"
            f" below 1: {c['exact_if_not']:.4f} exact"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sets", default="illumina-array,nanopore,nanopore-hard,real")
    p.add_argument("--clusters", default="truth", help="truth, dnaembed, or a clusters TSV")
    p.add_argument("--strands", type=int, default=10_000)
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--coverage", type=float, default=10.0)
    p.add_argument("--dispersion", type=float, default=5.0,
                   help="Negative binomial k: variance mean + mean^2/k (large k: Poisson).")
    p.add_argument("--reverse-fraction", type=float, default=0.0)
    p.add_argument("--truncate-fraction", type=float, default=0.0)
    p.add_argument("--no-length-hint", dest="length_hint", action="store_false",
                   help="Do not tell consensus the strand length.")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--polish-whole-up-to", type=int, metavar="NT",
                   help="Polish strands of up to NT bases on whole alignments, longer ones "
                        "in windows (default: the library's, "
                        f"{polish.POLISH_WHOLE_MAX_LENGTH:,}; one thread only).")
    p.add_argument("--json", help="Also write the figures here.")
    add_write_docs(p, "Consensus")
    args = p.parse_args(argv)
    configure(quiet=True)
    if args.polish_whole_up_to is not None:
        if args.threads != 1:  # worker processes import the library's own setting
            p.error("--polish-whole-up-to needs --threads 1")
        polish.POLISH_WHOLE_MAX_LENGTH = args.polish_whole_up_to
    sets = [s for s in args.sets.split(",") if s]
    if args.clusters not in ("truth", "dnaembed") and len(sets) != 1:
        raise SystemExit("a clusters TSV belongs to one set: pass a single --sets")
    out = []
    for name in sets:
        r = run_set(name, args)
        print(report(r), flush=True)
        out.append(r)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    finish(args.write_docs, "```text\n" + "\n\n".join(report(r) for r in out) + "\n```")


if __name__ == "__main__":
    sys.exit(main())
