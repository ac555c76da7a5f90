#!/usr/bin/env python
"""Measure encoders against exact Levenshtein distance, and as candidate generators.

For each model (default: both bundled ones, ``default`` and ``candidates``):
  * 20,000 held-out pairs from the channel, strands of 110, 150 and 200 nt, pairs
    spanning 0 edits to unrelated: MAE and mean bias on pairs with d <= 40,
    Spearman over all pairs;
  * ROC-AUC of "two reads of one strand" vs "reads of different strands" at the
    nanopore preset (150 nt; with and without shared 25-nt primers);
  * embedding throughput (reads/s at ``--threads``, default 2, batch inference in
    float32; bfloat16 too where the CPU has it in hardware), beside exact
    Levenshtein pairs/s (rapidfuzz) and vector distance pairs/s, and the crossover N
    above which embedding + vector distances beat all-pairs Levenshtein;
  * with ``--recall SETS`` (presets of ``scripts/bench_cluster.py``'s sets, and
    ``real`` for ldpc-exp7): how many of each read's true neighbours (reads of its
    strand, same orientation, within the edit-distance threshold that ``cluster``
    chooses) the ``--neighbours`` nearest reads in embedding space contain, searched
    as the graph method searches (:class:`dnaembed.cluster.search.NeighbourIndex`).

    python scripts/bench_model.py [--models a.pt default] [--pairs 20000] [--json out.json]
    python scripts/bench_model.py --recall illumina-array,nanopore,nanopore-hard,real --write-docs
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from benchlib import REAL_READS, REAL_TRUTH, add_write_docs, cpu_description, finish

from dnaembed.evaluate.embedding import approximation_metrics, separation_auc
from dnaembed.model.checkpoint import BUNDLED_MODELS, load_model
from dnaembed.model.encoder import count_parameters
from dnaembed.model.inference import embed_sequences, native_bfloat16
from dnaembed.sim.channel import PRESETS
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import simulate_reads
from dnaembed.sim.strands import add_primers, random_strands
from dnaembed.train.pairs import PairBatch, PairConfig, PairSampler, levenshtein_pairs

HELD_OUT_SEED = 987_654
BANDS = ((0, 10), (10, 20), (20, 30), (30, 40), (40, 60), (60, 200))


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


def measure_model(name: str, pairs: PairBatch, aucs: dict, speed_seqs: list[str] | None) -> dict:
    """Accuracy on the held-out pairs, separation AUCs and throughput of one model."""
    model = load_model(name).model
    pred = predicted(model, pairs.a, pairs.b)
    m = approximation_metrics(pred, pairs.distance)
    auc = {p: separation_auc(predicted(model, sa, sb), predicted(model, da, db))
           for p, (sa, sb, da, db) in aucs.items()}
    fp32 = bf16 = float("nan")
    if speed_seqs is not None:
        fp32 = embed_throughput(model, speed_seqs, "float32")
        if native_bfloat16(torch.device("cpu")):
            bf16 = embed_throughput(model, speed_seqs, "bfloat16")
    bands = []
    for lo, hi in BANDS:
        sel = (pairs.distance >= lo) & (pairs.distance < hi)
        err = pred[sel] - pairs.distance[sel]
        bands.append(f"[{lo},{hi}): n={int(sel.sum())} MAE {np.abs(err).mean():.2f} "
                     f"bias {err.mean():+.2f}")
    return {"model": name, "config": model.config.to_dict(), "params": count_parameters(model),
            "metrics": m, "auc_nanopore": auc[False], "auc_nanopore_primers": auc[True],
            "reads_per_s_fp32": fp32, "reads_per_s_bf16": bf16, "bands": bands}


def accuracy_table(results: list[dict], threads: int) -> str:
    lines = [f"| model | config | params | MAE d<=40 | bias d<=40 | Spearman | AUC nanopore | "
             f"AUC nanopore+primers | reads/s fp32, {threads} threads | reads/s bf16 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c, m = r["config"], r["metrics"]
        desc = (f"ch={c['channels']} W={c['window']} D={c['embedding_dim']} ends={c['ends']} "
                f"views={c['views']}")
        bf16 = "-" if np.isnan(r["reads_per_s_bf16"]) else f"{r['reads_per_s_bf16']:,.0f}"
        lines.append(
            f"| {r['model']} | {desc} | {r['params']:,} | {m['mae_near']:.3f} | "
            f"{m['bias_near']:+.3f} | {m['spearman']:.4f} | {r['auc_nanopore']:.5f} | "
            f"{r['auc_nanopore_primers']:.5f} | {r['reads_per_s_fp32']:,.0f} | {bf16} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(BUNDLED_MODELS),
                        help="model files or bundled models' names (default: both bundled)")
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--auc-strands", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--recall", default="",
                        help="comma-separated sets for the neighbour recall: presets, 'real'")
    parser.add_argument("--recall-strands", type=int, default=10_000,
                        help="strands per simulated set (x coverage 10: reads)")
    parser.add_argument("--neighbours", type=int, default=16)
    parser.add_argument("--workdir", default="bench-out/bench_model",
                        help="simulated sets are kept here")
    parser.add_argument("--json", help="write the figures here too")
    add_write_docs(parser, "Encoders: accuracy, speed and neighbour recall (bench_model)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    cpu = cpu_description()
    pairs = held_out_pairs(args.pairs)
    aucs = {p: nanopore_same_vs_different(args.auc_strands, p) for p in (False, True)}
    speed_seqs = None if args.no_speed else random_strands(20_000, 150, np.random.default_rng(1))
    print(f"{cpu}; torch {torch.__version__}, {threads} threads\nheld-out pairs: "
          f"{len(pairs):,} (110/150/200 nt), near (d<=40): "
          f"{int((pairs.distance <= 40).sum()):,}\n", flush=True)
    results = []
    for name in args.models:
        results.append(measure_model(name, pairs, aucs, speed_seqs))
        print(accuracy_table(results[-1:], threads).splitlines()[-1], flush=True)
        print("  by true distance: " + "; ".join(results[-1]["bands"]), flush=True)
    body = accuracy_table(results, threads)
    print("\n" + body)
    extra = {}
    if speed_seqs is not None:
        extra = exact_vs_vectors(speed_seqs, results[0], threads)
    recall_rows = []
    if args.recall:
        recall_rows = neighbour_recall(args)
        recall = recall_table(recall_rows, args.neighbours)
        print("\n" + recall)
        body += ("\n\nNeighbour recall: of each read's true neighbours (its strand's reads in "
                 "the same orientation within the threshold `cluster` chooses), the fraction "
                 f"among its {args.neighbours} nearest reads in embedding space (the graph "
                 "method's search; a pair counts when either read finds the other).\n\n"
                 + recall)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"models": results, "speed": extra, "recall": recall_rows}, indent=1))
    finish(args.write_docs, body)
    return 0


def exact_vs_vectors(seqs: list[str], first: dict, threads: int) -> dict:
    """Exact Levenshtein vs vector distances: pairs/s and the crossover N."""
    lev1 = levenshtein_throughput(seqs, workers=1)
    levn = levenshtein_throughput(seqs, workers=threads)
    dim = first["config"]["embedding_dim"]
    vec = vector_throughput(dim)
    emb = np.nanmax([first["reads_per_s_fp32"], first["reads_per_s_bf16"]])
    # Cost of all pairs for N reads: embedding N/emb + N^2/2/vec vs N^2/2/lev.
    crossover = 2.0 / emb / (1.0 / levn - 1.0 / vec) if vec > levn else float("inf")
    print(f"\nexact Levenshtein (rapidfuzz, 150 nt): {lev1:,.0f} pairs/s on 1 thread, "
          f"{levn:,.0f} pairs/s on {threads} threads")
    print(f"vector squared distances (D={dim}, GEMM): {vec:,.0f} pairs/s")
    print(f"crossover: all-pairs by embedding ({first['model']}, {emb:,.0f} reads/s) is cheaper "
          f"than all-pairs Levenshtein from N = {crossover:,.0f} reads")
    return {"levenshtein_pairs_per_s_1": lev1, "levenshtein_pairs_per_s": levn,
            "vector_pairs_per_s": vec, "crossover_reads": crossover}


# --- neighbour recall -----------------------------------------------------------------------


def recall_set(name: str, args) -> tuple[Path, Path]:
    """Reads and truth of a set: the real one, or bench_cluster's simulated set."""
    if name == "real":
        return REAL_READS, REAL_TRUTH
    from bench_cluster import simulate_set

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = workdir / f"{name}-{args.recall_strands}"
    if not Path(f"{prefix}.fastq.gz").exists():
        simulate_set(prefix, name, args.recall_strands, 150, 10.0, False, 0)
    return Path(f"{prefix}.fastq.gz"), Path(f"{prefix}.truth.tsv")


def true_neighbour_pairs(seqs: list[str], groups: np.ndarray, threads: int
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of reads of one group (strand and orientation), with its exact distance."""
    order = np.argsort(groups, kind="stable")
    bounds = np.flatnonzero(np.diff(groups[order])) + 1
    lo, hi = [], []
    for members in np.split(order, bounds):
        if len(members) > 1:
            i, j = np.triu_indices(len(members), 1)
            lo.append(members[i])
            hi.append(members[j])
    lo = np.concatenate(lo) if lo else np.zeros(0, np.int64)
    hi = np.concatenate(hi) if hi else np.zeros(0, np.int64)
    dist = levenshtein_pairs([seqs[k] for k in lo.tolist()], [seqs[k] for k in hi.tolist()],
                             workers=threads)
    return lo, hi, dist


def read_groups(reads_path: Path, truth_path: Path) -> tuple[list[str], np.ndarray]:
    """Distinct reads of a labelled set and their group (strand x orientation; -1: none)."""
    from dnaembed.cluster.dedupe import unique_reads
    from dnaembed.io.sequences import read_sequences
    from dnaembed.io.tables import read_table
    from dnaembed.sim.simulate import CONTAMINANT

    reads = read_sequences(reads_path)
    rows = {r[0]: (r[1], r[2] if len(r) > 2 else "+") for r in read_table(truth_path)}
    unique = unique_reads(reads.seqs, False)
    keys: dict[tuple[str, str], int] = {}
    groups = np.full(len(unique), -1, dtype=np.int64)
    for u, first in enumerate(unique.first.tolist()):
        label = rows.get(reads.ids[first])
        if label is not None and label[0] != CONTAMINANT and len(reads.seqs[first]) > 0:
            groups[u] = keys.setdefault(label, len(keys))
    seqs = [reads.seqs[i] for i in unique.first.tolist()]
    keep = np.flatnonzero([len(s) > 0 for s in seqs])
    return [seqs[i] for i in keep.tolist()], groups[keep]


def neighbour_recall(args) -> list[dict]:
    """Per set and model: the true neighbours the embedding search brings."""
    from dnaembed.cluster.search import NeighbourIndex, self_neighbours
    from dnaembed.cluster.threshold import estimate_threshold

    rows = []
    for set_name in [s for s in args.recall.split(",") if s]:
        seqs, groups = read_groups(*recall_set(set_name, args))
        lengths = np.array([len(s) for s in seqs])
        labelled = groups >= 0
        idx = np.flatnonzero(labelled)
        lo, hi, dist = true_neighbour_pairs([seqs[i] for i in idx.tolist()], groups[idx],
                                            args.threads)
        lo, hi = idx[lo], idx[hi]
        threshold = None
        for model_name in args.models:
            model = load_model(model_name).model
            t = time.perf_counter()
            vectors = embed_sequences(model, seqs)
            seconds_embed = time.perf_counter() - t
            t = time.perf_counter()
            found = self_neighbours(NeighbourIndex(vectors), vectors, args.neighbours).indices
            seconds_search = time.perf_counter() - t
            if threshold is None:
                threshold = sampled_threshold(seqs, found, lengths, args.threads,
                                              estimate_threshold)
            cuts = threshold.cuts(np.maximum(lengths[lo], lengths[hi]))
            near = dist <= cuts
            hit = pair_found(found, lo[near], hi[near])
            rows.append(recall_row(set_name, model_name, len(seqs), threshold.max_dist,
                                   lo[near], hi[near], hit, args.neighbours,
                                   seconds_embed, seconds_search))
            print(recall_table(rows[-1:], args.neighbours).splitlines()[-1], flush=True)
    return rows


def sampled_threshold(seqs, found: np.ndarray, lengths: np.ndarray, threads: int, estimate):
    """The threshold ``cluster`` would choose: exact distances of sampled candidate pairs."""
    rng = np.random.default_rng(0)
    rows = rng.choice(len(seqs), size=min(len(seqs), 2000), replace=False)
    q = np.repeat(rows, found.shape[1])
    j = found[rows].reshape(-1)
    ok = j >= 0
    d = levenshtein_pairs([seqs[k] for k in q[ok].tolist()], [seqs[k] for k in j[ok].tolist()],
                          workers=threads)
    return estimate(d, float(np.median(lengths)))


def pair_found(found: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether ``hi`` is among ``lo``'s neighbours or ``lo`` among ``hi``'s."""
    return (found[lo] == hi[:, None]).any(axis=1) | (found[hi] == lo[:, None]).any(axis=1)


def recall_row(set_name, model_name, n, max_dist, lo, hi, hit, k, sec_embed, sec_search) -> dict:
    """Pair recall, per-read recall capped at k, and reads that miss a true neighbour."""
    n_true = np.bincount(np.concatenate([lo, hi]), minlength=n)
    n_hit = np.bincount(np.concatenate([lo[hit], hi[hit]]), minlength=n)
    has = n_true > 0
    capped = np.minimum(n_hit[has], k) / np.minimum(n_true[has], k)
    return {"set": set_name, "model": model_name, "reads": n, "max_dist": max_dist,
            "true_pairs": int(len(lo)), "pair_recall": float(hit.mean()) if len(hit) else 1.0,
            "read_recall": float(capped.mean()) if has.any() else 1.0,
            "reads_missing": int((n_hit[has] < np.minimum(n_true[has], k)).sum()),
            "seconds_embed": sec_embed, "seconds_search": sec_search}


def recall_table(rows: list[dict], k: int) -> str:
    lines = [f"| set | model | distinct reads | max_dist | true pairs | pair recall | "
             f"per-read recall (of min(true, {k})) | reads missing some | embed s | search s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['set']} | {r['model']} | {r['reads']:,} | {r['max_dist']} | "
            f"{r['true_pairs']:,} | {r['pair_recall']:.5f} | {r['read_recall']:.5f} | "
            f"{r['reads_missing']:,} | {r['seconds_embed']:.1f} | {r['seconds_search']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
