"""How good a clustering is, against a truth table (``dnaembed evaluate``).

Accuracy A_gamma (Rashtchian et al., NeurIPS 2017) is the fraction of true
clusters C for which some output cluster C' satisfies C' ⊆ C and |C'| >=
gamma |C|. Reads missing from the output count as singletons; reads that
belong to no true cluster (noise: strand id ``contaminant``, or absent from
a real set's truth) are in no C, so an output cluster that holds one is a
subset of no C. ARI and NMI from scikit-learn, over the reads with a true
cluster.

The clusters are ``dnaembed cluster`` output (a TSV whose first two columns are
``read_id`` and a label) or another tool's, read by :mod:`dnaembed.io.formats`
(vsearch ``.uc``, CD-HIT ``.clstr``, MMseqs2 cluster TSV, Starcode ``--seq-id``
output), so that every tool is scored by the same function. The truth is a TSV:
written by ``dnaembed simulate`` (``read_id strand_id orientation``) or the real
set's ``read_id oligo_id strand``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from dnaembed.errors import InputError
from dnaembed.io.sequences import describe_path
from dnaembed.io.tables import read_labels
from dnaembed.log import logger


def accuracy_gamma(
    predicted: dict[str, str], truth: dict[str, str], gammas: Sequence[float] = (0.8, 0.9, 1.0)
) -> dict[float, float]:
    """A_gamma over the true clusters; ``predicted``/``truth`` map read id -> cluster label.

    Reads in ``truth`` but not in ``predicted`` are singletons; reads in
    ``predicted`` but not in ``truth`` are noise.
    """
    true_members: dict[str, list[str]] = {}
    for rid, c in truth.items():
        true_members.setdefault(c, []).append(rid)
    out_members: dict[str, list[str]] = {}
    for rid, c in predicted.items():
        out_members.setdefault(c, []).append(rid)
    n_true = len(true_members)
    if n_true == 0:
        return {g: float("nan") for g in gammas}
    # For each output cluster that is pure (all members in one true cluster), its size.
    best = dict.fromkeys(true_members, 0)
    for members in out_members.values():
        labels = {truth.get(r) for r in members}
        if len(labels) == 1:
            (label,) = labels
            if label is not None:
                best[label] = max(best[label], len(members))
    # Reads absent from the output are singletons: a pure cluster of size 1 at least.
    for label, members in true_members.items():
        if best[label] == 0 and any(r not in predicted for r in members):
            best[label] = 1
    sizes = {label: len(m) for label, m in true_members.items()}
    return {
        g: sum(1 for label in true_members if best[label] >= g * sizes[label] - 1e-9) / n_true
        for g in gammas
    }


def clustering_scores(predicted: dict[str, str], truth: dict[str, str]) -> dict:
    """A_0.8 / A_0.9 / A_1.0, ARI, NMI and cluster counts."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    acc = accuracy_gamma(predicted, truth)
    ids = list(truth)
    # Missing reads: their own singleton label.
    pred_labels = [predicted.get(r, f"\0missing:{r}") for r in ids]
    true_labels = [truth[r] for r in ids]
    return {
        "A_0.8": acc[0.8],
        "A_0.9": acc[0.9],
        "A_1.0": acc[1.0],
        "ARI": float(adjusted_rand_score(true_labels, pred_labels)) if ids else float("nan"),
        "NMI": float(normalized_mutual_info_score(true_labels, pred_labels))
        if ids
        else float("nan"),
        "true_clusters": len(set(true_labels)),
        "output_clusters": len(set(predicted.values())),
        "reads_scored": len(ids),
        "reads_missing": sum(1 for r in ids if r not in predicted),
        "noise_reads": sum(1 for r in predicted if r not in truth),
    }


#: Truth labels that mean "from no strand".
NOISE_LABELS = frozenset({"contaminant", "", "*", "-", "NA"})


def read_truth(path: str | os.PathLike) -> tuple[dict[str, str], int]:
    """Truth labels without the noise reads, and the number of noise reads dropped."""
    truth, noise = _truth_and_noise(path)
    return truth, len(noise)


def read_truth_labels(path: str | os.PathLike) -> dict[str, str]:
    """Every row's label, noise reads' included. An empty table is an error: every score
    of it was nan."""
    labels = read_labels(path)
    if not labels:
        raise InputError(f"{describe_path(path)}: no reads (an empty truth table)")
    return labels


def _truth_and_noise(path: str | os.PathLike, labels: Mapping[str, str] | None = None
                     ) -> tuple[dict[str, str], set[str]]:
    """Truth labels without the noise reads; the noise reads' ids (of ``labels``, the
    table at ``path`` already read, when given)."""
    labels = read_truth_labels(path) if labels is None else labels
    truth = {rid: label for rid, label in labels.items() if label not in NOISE_LABELS}
    return truth, {rid for rid, label in labels.items() if label in NOISE_LABELS}


def evaluate_files(
    clusters_path: str | os.PathLike,
    truth_path: str | os.PathLike,
    *,
    fmt: str = "tsv",
    reads_path: str | os.PathLike | None = None,
    truth_labels: Mapping[str, str] | None = None,
) -> dict:
    """Scores of a clusters file (format ``fmt``) against a truth table (see the module notes).

    ``truth_labels``: the truth table already read (:func:`read_truth_labels`), which
    a truth on standard input or a pipe needs: it can be read only once.

    ``reads_path``: the reads the tool clustered, in its input order (Starcode
    numbers its input lines); with it, a read id of the clusters that is not a
    read is an error, and only the truth's reads among them are scored. An empty
    clusters file is an error; reads the clusters lack, or the truth lacks, are
    warned of (with their count).
    """
    from dnaembed.io.formats import read_assignments

    read_ids = None
    if reads_path is not None:
        from dnaembed.io.sequences import read_sequences

        read_ids = read_sequences(reads_path).ids
    predicted = read_assignments(clusters_path, fmt, read_ids)
    if not predicted:
        # Not a clustering of no reads: a tool lists every read it was given, so an empty
        # file is a failed or truncated run, which scored every read a singleton.
        raise InputError(f"{describe_path(clusters_path)}: no clustered reads (an empty "
                         "clusters file)")
    labels = read_truth_labels(truth_path) if truth_labels is None else truth_labels
    if read_ids is not None:
        _check_reads(predicted, read_ids, clusters_path, reads_path)
        labels = labels_of_reads(labels, read_ids, truth_path,
                                 f"the reads of {describe_path(reads_path)}")
    truth, noise = _truth_and_noise(truth_path, labels)
    if not truth:
        # Every score of no true cluster is nan (a truth of contaminants only).
        raise InputError(f"{describe_path(truth_path)}: no read of a strand")
    # Noise reads are the truth's reads too: a clustering of contaminants alone is scored.
    if not any(rid in truth or rid in noise for rid in predicted):
        raise InputError(
            f"{describe_path(clusters_path)}: none of its read ids is in "
            f"{describe_path(truth_path)} (are they tables of the same reads?)"
        )
    _warn_unmatched(predicted, truth, noise, clusters_path, truth_path,
                    reads_given=read_ids is not None)
    scores = clustering_scores(predicted, truth)
    scores["truth_noise_reads"] = len(noise)
    return scores


def _check_reads(predicted: dict[str, str], read_ids: Sequence[str],
                 clusters_path: str | os.PathLike, reads_path: str | os.PathLike) -> None:
    """A clustered read id that is not a read of ``reads_path`` is an error."""
    known = set(read_ids)
    stray = next((rid for rid in predicted if rid not in known), None)
    if stray is not None:
        raise InputError(f"{describe_path(clusters_path)}: read {stray}: not in "
                         f"{describe_path(reads_path)}")


def labels_of_reads(labels: Mapping[str, str], read_ids: Sequence[str],
                    truth_path: str | os.PathLike, reads_name: str) -> dict[str, str]:
    """The truth's rows (``labels``) of the reads the tool was given (``reads_name`` in
    messages): a truth read that is not among them was never the tool's to cluster, so it
    is not scored (it was a singleton that sank A_gamma: a 2,000-read subset against its
    data set's truth scored A_0.9 0.06). ``evaluate --reads`` and ``run --truth``."""
    known = set(read_ids)
    kept = {rid: label for rid, label in labels.items() if rid in known}
    if all(label in NOISE_LABELS for label in kept.values()):
        raise InputError(f"{describe_path(truth_path)}: no read of a strand among "
                         f"{reads_name}")
    if len(kept) < len(labels):
        logger.info("%s: %s of its reads are not among %s: not scored",
                    describe_path(truth_path), f"{len(labels) - len(kept):,}", reads_name)
    return kept


def _warn_unmatched(predicted: dict[str, str], truth: dict[str, str], noise: set[str],
                    clusters_path: str | os.PathLike, truth_path: str | os.PathLike,
                    *, reads_given: bool = False) -> None:
    """Say how many reads one file has and the other lacks: both change the scores.
    ``reads_given``: the truth is already that of the reads the tool was given."""
    absent = sum(1 for rid in predicted if rid not in truth and rid not in noise)
    if absent:
        logger.warning("%s: %s of the clustered reads are not in %s: scored as reads of no "
                       "strand, which no true cluster may hold (A_gamma)", describe_path(
                           clusters_path), f"{absent:,}", describe_path(truth_path))
    missing = sum(1 for rid in truth if rid not in predicted)
    if missing:
        # Every tool lists each read it clustered; a read it lacks is scored a singleton.
        # With --reads these are reads the tool was given and left out: no --reads hint.
        hint = "" if reads_given else (" (give --reads to score only the reads the tool "
                                       "clustered)")
        logger.warning("%s lacks %s of the %s reads of %s with a strand: each scored as a "
                       "cluster of its own%s", describe_path(clusters_path), f"{missing:,}",
                       f"{len(truth):,}", describe_path(truth_path), hint)


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
