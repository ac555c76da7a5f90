#!/usr/bin/env python
"""How much of an encoder's error is noise that averaging removes (issue 3's open target).

Levenshtein distance does not change when both sequences go through the same
relabelling of the bases (A<->T, C<->G, ...), but the encoder sees a different
input and gives a different estimate. Averaging the estimates of k relabellings
(k forward passes per read; the same as concatenating k embeddings scaled by
1/sqrt(k)) shows which part of the error is variance and which part is shared,
i.e. what the encoder cannot represent. Averaging across models (an ensemble)
shows the same across trainings. Reversing both reads also keeps their distance;
the script prints how the errors of the complement and of the reversed pair
correlate with the errors of the pair as read (the reason for ``model.ends = 2``).
Same 20,000 held-out pairs as bench_model.py.

    python scripts/bench_views.py [--models a.pt b.pt] [--views 1 2 4 8]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
from bench_model import held_out_pairs, predicted
from benchlib import Transcript, add_write_docs, finish

from dnaembed.evaluate.embedding import approximation_metrics
from dnaembed.model.checkpoint import load_model

# The identity first, then the complement (the relabelling most unlike the identity),
# then other permutations of ACGT.
RELABELLINGS = ("ACGT", "TGCA", "CATG", "GTAC", "AGCT", "CTAG", "GACT", "TCGA")


def relabel(seqs: list[str], order: str) -> list[str]:
    table = str.maketrans("ACGT", order)
    return [s.translate(table) for s in seqs]


def relabel_estimate(model, pairs, order: str) -> np.ndarray:
    return predicted(model, relabel(pairs.a, order), relabel(pairs.b, order))


def correlation(error: np.ndarray, estimate: np.ndarray, pairs, near: np.ndarray) -> float:
    return float(np.corrcoef(error, estimate[near] - pairs.distance[near])[0, 1])


def row(label: str, estimate: np.ndarray, truth: np.ndarray) -> str:
    m = approximation_metrics(estimate, truth)
    return f"| {label} | {m['mae_near']:.3f} | {m['bias_near']:+.3f} | {m['spearman']:.4f} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["bundled"],
                        help="checkpoints; 'bundled' is the model shipped with dnaembed")
    parser.add_argument("--views", nargs="*", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=0)
    add_write_docs(parser, "Encoder error: relabellings and ensembles")
    args = parser.parse_args()
    printed = Transcript()
    if args.threads:
        torch.set_num_threads(args.threads)
    if max(args.views) > len(RELABELLINGS) or min(args.views) < 1:
        parser.error(f"--views must be between 1 and {len(RELABELLINGS)}")
    pairs = held_out_pairs(args.pairs)
    estimates: dict[str, list[np.ndarray]] = {}
    models = {path: load_model(None if path == "bundled" else path).model for path in args.models}
    for path, model in models.items():
        estimates[path] = [
            relabel_estimate(model, pairs, order) for order in RELABELLINGS[: max(args.views)]
        ]
    print(f"held-out pairs: {len(pairs):,}, near (d<=40): {int((pairs.distance <= 40).sum()):,}\n")
    print("| estimate | MAE d<=40 | bias d<=40 | Spearman |")
    print("|---|---:|---:|---:|")
    for name, views in estimates.items():
        for k in args.views:
            print(row(f"{name}, mean of {k} relabelling(s)", np.mean(views[:k], axis=0),
                      pairs.distance))
    near = pairs.distance <= 40
    print("\n| model | error correlation, d<=40: complement | reversed reads |")
    print("|---|---:|---:|")
    for path, model in models.items():
        first, complement = estimates[path][0], relabel_estimate(model, pairs, "TGCA")
        reversed_pair = predicted(model, [s[::-1] for s in pairs.a], [s[::-1] for s in pairs.b])
        error = first[near] - pairs.distance[near]
        print(f"| {path} | {correlation(error, complement, pairs, near):.2f} "
              f"| {correlation(error, reversed_pair, pairs, near):.2f} |")
    if len(estimates) > 1:
        print("\n| ensemble | MAE d<=40 | bias d<=40 | Spearman |\n|---|---:|---:|---:|")
        for k in sorted({1, min(2, max(args.views))}):
            pooled = [v for views in estimates.values() for v in views[:k]]
            print(row(f"ensemble of {len(estimates)} models, {k} relabelling(s) each",
                      np.mean(pooled, axis=0), pairs.distance))
    finish(args.write_docs, printed.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
