"""How good an embedding is, against exact edit distances.

MAE and mean bias on near pairs (true distance <= 40, the range clustering
decides in), MAE over all pairs, Spearman correlation, and ROC-AUC for telling
reads of one strand from reads of different strands."""

from __future__ import annotations

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
