"""How good an embedding is (against exact edit distances) and how good a clustering is.

Approximation: MAE and mean bias on near pairs (true distance <= 40, the range
clustering decides in), MAE over all pairs, Spearman correlation, and ROC-AUC
for telling reads of one strand from reads of different strands.

Clustering (Rashtchian et al., NeurIPS 2017): accuracy A_gamma is the fraction
of true clusters C for which some output cluster C' satisfies C' ⊆ C and
|C'| >= gamma |C|. Reads missing from the output count as singletons; reads
that belong to no true cluster (noise) are in no C, so an output cluster that
holds one is a subset of no C. ARI and NMI from scikit-learn, over the reads
with a true cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NEAR = 40.0


def approximation_metrics(predicted: np.ndarray, true: np.ndarray, near: float = NEAR) -> dict:
    """Figures of merit of predicted squared distances against exact edit distances."""
    from scipy.stats import spearmanr

    predicted = np.asarray(predicted, dtype=np.float64)
    true = np.asarray(true, dtype=np.float64)
    err = predicted - true
    close = true <= near
    out = {
        "pairs": int(len(true)),
        "mae": float(np.abs(err).mean()) if len(true) else float("nan"),
        "bias": float(err.mean()) if len(true) else float("nan"),
        "near_pairs": int(close.sum()),
        "mae_near": float(np.abs(err[close]).mean()) if close.any() else float("nan"),
        "bias_near": float(err[close].mean()) if close.any() else float("nan"),
        "rmse_near": float(np.sqrt((err[close] ** 2).mean())) if close.any() else float("nan"),
    }
    if len(true) > 2 and np.ptp(true) > 0 and np.ptp(predicted) > 0:
        out["spearman"] = float(spearmanr(predicted, true).statistic)
    else:
        out["spearman"] = float("nan")
    return out


def separation_auc(same: np.ndarray, different: np.ndarray) -> float:
    """ROC-AUC of 'same strand' (small predicted distance) vs 'different strands'."""
    from sklearn.metrics import roc_auc_score

    scores = -np.concatenate([same, different])
    labels = np.concatenate([np.ones(len(same)), np.zeros(len(different))])
    return float(roc_auc_score(labels, scores))


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
