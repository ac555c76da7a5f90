"""Scoring a clusters table against a truth table (``dnaembed evaluate``).

Both are TSVs whose first two columns are ``read_id`` and a label (``#`` lines
are comments, gzip is fine): ``dnaembed cluster`` output on one side; on the
other the truth written by ``dnaembed simulate`` (``read_id strand_id
orientation``; reads with strand id ``contaminant`` belong to no strand) or
the real set's ``read_id oligo_id strand`` (reads it does not list belong to
no strand). Reads that belong to no strand are noise: an output cluster that
holds one is a subset of no true cluster. Reads of the truth missing from the
clusters count as singletons. Scores: :func:`dnaembed.metrics.clustering_scores`.
"""

from __future__ import annotations

import os

from dnaembed.errors import InputError
from dnaembed.io import describe_path, read_table
from dnaembed.metrics import clustering_scores

#: Truth labels that mean "from no strand".
NOISE_LABELS = frozenset({"contaminant", "", "*", "-", "NA"})


def read_labels(path: str | os.PathLike) -> dict[str, str]:
    """``read_id -> label`` from the first two columns; a read listed twice is an error."""
    name = describe_path(path)
    labels: dict[str, str] = {}
    for number, row in enumerate(read_table(path, min_columns=2), start=1):
        rid, label = row[0].strip(), row[1].strip()
        if not rid:
            raise InputError(f"{name}: data row {number}: empty read id")
        if rid in labels:
            raise InputError(f"{name}: data row {number}: read {rid} listed twice")
        labels[rid] = label
    return labels


def read_truth(path: str | os.PathLike) -> tuple[dict[str, str], int]:
    """Truth labels without the noise reads, and the number of noise reads dropped."""
    labels = read_labels(path)
    truth = {rid: label for rid, label in labels.items() if label not in NOISE_LABELS}
    return truth, len(labels) - len(truth)


def evaluate_files(clusters_path: str | os.PathLike, truth_path: str | os.PathLike) -> dict:
    """Scores of a clusters table against a truth table (see the module notes)."""
    predicted = read_labels(clusters_path)
    truth, noise_in_truth = read_truth(truth_path)
    if truth and predicted and not any(rid in predicted for rid in truth):
        raise InputError(
            f"{describe_path(clusters_path)}: none of its read ids is in "
            f"{describe_path(truth_path)} (are they tables of the same reads?)"
        )
    scores = clustering_scores(predicted, truth)
    scores["truth_noise_reads"] = noise_in_truth
    return scores


def format_scores(scores: dict) -> str:
    """A short human-readable report."""
    lines = [
        f"A_0.8   {scores['A_0.8']:.4f}",
        f"A_0.9   {scores['A_0.9']:.4f}",
        f"A_1.0   {scores['A_1.0']:.4f}",
        f"ARI     {scores['ARI']:.4f}",
        f"NMI     {scores['NMI']:.4f}",
        f"clusters: {scores['output_clusters']:,} output, {scores['true_clusters']:,} true",
        f"reads: {scores['reads_scored']:,} with a strand scored, "
        f"{scores['reads_missing']:,} missing from the clusters (counted as singletons), "
        f"{scores['noise_reads']:,} clustered reads of no strand",
    ]
    return "\n".join(lines)
