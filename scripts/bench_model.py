#!/usr/bin/env python
"""Measure encoders against exact Levenshtein distance (issue 3's figures).

For each model (default: the bundled one):
  * 20,000 held-out pairs from the channel, strands of 110, 150 and 200 nt, pairs
    spanning 0 edits to unrelated: MAE and mean bias on pairs with d <= 40,
    Spearman over all pairs;
  * ROC-AUC of "two reads of one strand" vs "reads of different strands" at the
    nanopore preset (150 nt; with and without shared 25-nt primers);
  * embedding throughput (reads/s, CPU, batch inference, float32 and bfloat16),
    beside exact Levenshtein pairs/s (rapidfuzz) and vector distance pairs/s,
    and the crossover N above which embedding + vector distances beat all-pairs
    Levenshtein.

    python scripts/bench_model.py [--models a.pt b.pt] [--pairs 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import torch
from benchlib import Transcript, add_write_docs, finish

from dnaembed.evaluate.embedding import approximation_metrics, separation_auc
from dnaembed.model.checkpoint import load_model
from dnaembed.model.encoder import count_parameters
from dnaembed.model.inference import embed_sequences
from dnaembed.sim.channel import PRESETS
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import simulate_reads
from dnaembed.sim.strands import add_primers, random_strands
from dnaembed.train.pairs import PairBatch, PairConfig, PairSampler, levenshtein_pairs

HELD_OUT_SEED = 987_654


def held_out_pairs(n: int) -> PairBatch:
    """n pairs, a third each at 110, 150 and 200 nt, from a seed no training run uses."""
    parts = []
    for i, length in enumerate((110, 150, 200)):
        cfg = PairConfig(length_min=length, length_max=length)
        parts.append(PairSampler(cfg, seed=[HELD_OUT_SEED, i]).sample(n // 3 + (i < n % 3)))
    return PairBatch(
        a=sum((p.a for p in parts), []),
        b=sum((p.b for p in parts), []),
        distance=np.concatenate([p.distance for p in parts]),
        kind=np.concatenate([p.kind for p in parts]),
    )


def nanopore_same_vs_different(n_strands: int, primers: bool) -> tuple[list, list, list, list]:
    """Read pairs of one strand and of different strands, nanopore preset, 150 nt."""
    rng = np.random.default_rng(HELD_OUT_SEED + 1)
    core = 100 if primers else 150
    strands = random_strands(n_strands, core, rng)
    if primers:
        left, right = random_strands(2, 25, rng)
        strands = add_primers(strands, left, right)
    sim = simulate_reads(strands, PRESETS["nanopore"], Coverage("fixed", 2), seed=HELD_OUT_SEED)
    by_strand: dict[int, list[int]] = {}
    for i, s in enumerate(sim.strand.tolist()):
        by_strand.setdefault(s, []).append(i)
    same_a, same_b = [], []
    for members in by_strand.values():
        same_a.append(sim.seqs[members[0]])
        same_b.append(sim.seqs[members[1]])
    perm = rng.permutation(len(same_b))
    perm = np.where(perm == np.arange(len(perm)), (perm + 1) % len(perm), perm)
    diff_a, diff_b = same_a, [same_b[j] for j in perm]
    return same_a, same_b, diff_a, diff_b


def predicted(model, a: list[str], b: list[str], precision: str = "float32") -> np.ndarray:
    ea = embed_sequences(model, a, precision=precision)
    eb = embed_sequences(model, b, precision=precision)
    return ((ea - eb) ** 2).sum(axis=1)


def embed_throughput(model, seqs: list[str], precision: str, repeats: int = 5) -> float:
    # Warm-up: one untimed pass over all of them (a pass over 2,048 left the first model
    # of a run a third slower than the same encoder measured later).
    embed_sequences(model, seqs, precision=precision)
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        embed_sequences(model, seqs, precision=precision)
        rates.append(len(seqs) / (time.perf_counter() - t))
    return statistics.median(rates)


def levenshtein_throughput(seqs: list[str], workers: int, repeats: int = 5) -> float:
    a, b = seqs[: len(seqs) // 2], seqs[len(seqs) // 2 :]
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        levenshtein_pairs(a, b, workers=workers)
        rates.append(len(a) / (time.perf_counter() - t))
    return statistics.median(rates)


def vector_throughput(dim: int, repeats: int = 5) -> float:
    """All-pairs squared distances per second (GEMM form, as faiss computes them)."""
    x = np.random.default_rng(0).standard_normal((4000, dim)).astype(np.float32)
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        sq = (x * x).sum(1)
        d = sq[:, None] + sq[None, :] - 2 * x @ x.T
        rates.append(d.size / (time.perf_counter() - t))
    return statistics.median(rates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=[None],
                        help="checkpoints (default: bundled)")
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--auc-strands", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--json", help="write the figures here too")
    add_write_docs(parser, "Encoder accuracy and speed")
    args = parser.parse_args()
    printed = Transcript()
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    pairs = held_out_pairs(args.pairs)
    aucs = {p: nanopore_same_vs_different(args.auc_strands, p) for p in (False, True)}
    speed_seqs = random_strands(20_000, 150, np.random.default_rng(1))
    results = []
    print(f"held-out pairs: {len(pairs):,} (110/150/200 nt), near (d<=40): "
          f"{int((pairs.distance <= 40).sum()):,}; torch threads {threads}\n")
    print("| model | config | params | MAE d<=40 | bias d<=40 | Spearman | AUC nanopore | "
          "AUC nanopore+primers | reads/s fp32 | reads/s bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in args.models:
        ckpt = load_model(path)
        model = ckpt.model
        m = approximation_metrics(predicted(model, pairs.a, pairs.b), pairs.distance)
        m_bf16 = approximation_metrics(predicted(model, pairs.a, pairs.b, "bfloat16"),
                                       pairs.distance)
        auc = {}
        for primers, (sa, sb, da, db) in aucs.items():
            auc[primers] = separation_auc(predicted(model, sa, sb), predicted(model, da, db))
        fp32 = bf16 = float("nan")
        if not args.no_speed:
            fp32 = embed_throughput(model, speed_seqs, "float32")
            bf16 = embed_throughput(model, speed_seqs, "bfloat16")
        cfg = model.config
        desc = (f"{cfg.name} ch={cfg.channels} k={cfg.kernel_size} D={cfg.embedding_dim} "
                f"W={cfg.window}")
        print(f"| {path or 'bundled'} | {desc} | {count_parameters(model):,} | {m['mae_near']:.3f} "
              f"| {m['bias_near']:+.3f} | {m['spearman']:.4f} | {auc[False]:.5f} | "
              f"{auc[True]:.5f} | {fp32:,.0f} | {bf16:,.0f} |")
        results.append({"model": path or "bundled", "config": cfg.to_dict(),
                        "params": count_parameters(model), "metrics": m, "metrics_bf16": m_bf16,
                        "auc_nanopore": auc[False], "auc_nanopore_primers": auc[True],
                        "reads_per_s_fp32": fp32, "reads_per_s_bf16": bf16})
        print(f"  (bf16 inference: MAE d<=40 {m_bf16['mae_near']:.3f}, "
              f"Spearman {m_bf16['spearman']:.4f})")
        by_band = []
        for lo, hi in ((0, 10), (10, 20), (20, 30), (30, 40), (40, 60), (60, 200)):
            sel = (pairs.distance >= lo) & (pairs.distance < hi)
            pred = predicted(model, [pairs.a[i] for i in np.flatnonzero(sel)],
                             [pairs.b[i] for i in np.flatnonzero(sel)])
            err = pred - pairs.distance[sel]
            by_band.append(f"[{lo},{hi}): n={int(sel.sum())} MAE {np.abs(err).mean():.2f} "
                           f"bias {err.mean():+.2f}")
        print("  by true distance: " + "; ".join(by_band))
    if not args.no_speed:
        lev1 = levenshtein_throughput(speed_seqs, workers=1)
        levn = levenshtein_throughput(speed_seqs, workers=-1)
        vec = vector_throughput(results[0]["config"]["embedding_dim"])
        emb = max(results[0]["reads_per_s_fp32"], results[0]["reads_per_s_bf16"])
        # Cost of all pairs for N reads: embedding N/emb + N^2/2/vec vs N^2/2/lev.
        crossover = 2.0 / emb / (1.0 / levn - 1.0 / vec) if vec > levn else float("inf")
        print(f"\nexact Levenshtein (rapidfuzz, 150 nt): {lev1:,.0f} pairs/s on 1 thread, "
              f"{levn:,.0f} pairs/s on all {threads} threads")
        print(f"vector squared distances (D={results[0]['config']['embedding_dim']}, GEMM): "
              f"{vec:,.0f} pairs/s")
        print(f"crossover: all-pairs by embedding is cheaper than all-pairs Levenshtein from "
              f"N = {crossover:,.0f} reads (embedding at {emb:,.0f} reads/s); at N = 10^5 "
              f"Levenshtein all-pairs takes {1e10 / 2 / levn / 3600:,.1f} h, embedding + "
              f"vectors {1e5 / emb + 1e10 / 2 / vec:,.0f} s")
        results.append({"levenshtein_pairs_per_s_1": lev1, "levenshtein_pairs_per_s_all": levn,
                        "vector_pairs_per_s": vec, "crossover_reads": crossover})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    finish(args.write_docs, printed.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
