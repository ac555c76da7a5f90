"""The JSON summary of a command (``--json FILE``): plain data from the library's results.

Keys (each present when the command has it):

* ``dnaembed`` (version), ``command``, ``parameters``, ``seed``, ``versions``
  (python, numpy, torch, faiss, dnaio), ``model`` (file and the SHA-256 of its
  weights, as recorded in the checkpoint);
* ``counts``: ``reads``, ``distinct`` (after collapsing identical reads),
  ``empty``, ``clusters``, ``singletons`` (clusters of one read), ``strands``;
* ``threshold``: the edit-distance cut (``max_dist``, per base ``rate``, the
  read length it applies to), where it came from (``source``: data, user or
  fallback), the two peaks of the sampled distances and their ``histogram``
  (number of sampled pairs at each distance 0, 1, 2, ...);
* ``cluster_sizes``: ``size`` and ``clusters`` (how many clusters have that size);
* ``consensus``: ``support`` (reads that voted: ``size``/``strands``), a
  ``confidence`` histogram (``edges``, ``strands``) and the mean agreement;
* ``timings``: seconds per stage; ``stats``: the estimator's counters;
* ``scores``: against a truth or references, when given.

:mod:`dnaembed.report.plots` draws its figures from this same dictionary, so
``dnaembed report summary.json`` draws what ``--plot`` would have.
"""

from __future__ import annotations

import math
import platform
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dnaembed import __version__

if TYPE_CHECKING:
    from dnaembed.cluster.result import ClusterResult
    from dnaembed.cluster.threshold import Threshold
    from dnaembed.model.checkpoint import Checkpoint

#: Bins of the confidence histogram (fraction of positions no single read could overturn).
CONFIDENCE_BINS = 20


def plain(value: object) -> Any:
    """JSON-able copy: numpy scalars and arrays to Python, NaN and infinities to None."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def versions() -> dict[str, str]:
    """Versions of dnaembed and of the libraries whose numbers a result depends on."""
    out = {"dnaembed": __version__, "python": platform.python_version(),
           "numpy": np.__version__}
    for name in ("torch", "faiss", "dnaio"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "__version__"):
            out[name] = str(module.__version__)
    return out


def model_summary(checkpoint: Checkpoint) -> dict[str, object]:
    """Which model ran: its file and the digest of its weights."""
    from dnaembed.model.checkpoint import weights_digest

    return {"path": str(checkpoint.path),
            "sha256": weights_digest(checkpoint.model.state_dict())}


def threshold_summary(threshold: Threshold | None, histogram: Sequence[int] | None
                      ) -> dict[str, object] | None:
    """The cut, its source, the peaks and the sampled distances' histogram."""
    if threshold is None:
        return None
    return {
        "max_dist": threshold.max_dist, "source": threshold.source,
        "rate": threshold.rate, "reference_length": threshold.reference_length,
        "same_peak": threshold.same_peak, "unrelated_peak": threshold.unrelated_peak,
        "rule": threshold.rule, "related_trough": threshold.related_trough,
        "pairs": threshold.pairs,
        "histogram": [int(x) for x in histogram] if histogram is not None else None,
    }


def size_histogram(sizes: Sequence[int] | np.ndarray) -> dict[str, list[int]]:
    """``size`` -> how many clusters (or strands) have it, as two parallel lists."""
    values, counts = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
    return {"size": values.tolist(), "clusters": counts.tolist()}


def clustering_summary(result: ClusterResult) -> dict[str, object]:
    """Counts, threshold, sizes, timings and counters of a :class:`ClusterResult`."""
    sizes = result.sizes()
    stats = dict(result.stats)
    histogram = stats.pop("distance_histogram", None)
    return {
        "counts": {
            "reads": int(len(result.labels)), "distinct": stats.get("distinct"),
            "empty": stats.get("empty"), "clusters": int(result.n_clusters),
            "singletons": int((sizes == 1).sum()),
        },
        "method": result.method, "strand": result.strand,
        "threshold": threshold_summary(result.threshold, histogram),
        "cluster_sizes": size_histogram(sizes),
        "stats": plain(stats),
    }


def consensus_summary(strands: Sequence) -> dict[str, object]:
    """Support (reads that voted) and confidence of the strands (ConsensusStrand objects)."""
    support = size_histogram([s.size for s in strands])
    confidence = np.array([s.confidence for s in strands], dtype=np.float64)
    counts, edges = np.histogram(confidence, bins=CONFIDENCE_BINS, range=(0.0, 1.0))
    return {
        "strands": len(strands),
        "support": {"size": support["size"], "strands": support["clusters"]},
        "confidence": {"edges": edges.round(4).tolist(), "strands": counts.tolist()},
        "full_confidence": int((confidence >= 1.0).sum()),
        "mean_agreement": float(np.mean([s.agreement for s in strands])) if strands else None,
    }


def command_summary(
    command: str,
    parameters: Mapping[str, object],
    *,
    seed: int,
    reads: int,
    result: ClusterResult | None = None,
    strands: Sequence | None = None,
    checkpoint: Checkpoint | None = None,
    timings: Mapping[str, float] | None = None,
    scores: Mapping[str, object] | None = None,
    outputs: Sequence[str] = (),
) -> dict[str, object]:
    """The whole summary of one command (see the module notes; :func:`plain` makes it JSON)."""
    out: dict[str, object] = {
        "dnaembed": __version__, "command": command, "parameters": plain(dict(parameters)),
        "seed": seed, "versions": versions(),
    }
    if checkpoint is not None:
        out["model"] = model_summary(checkpoint)
    counts: dict[str, object] = {"reads": reads}
    if result is not None:
        clustering = clustering_summary(result)
        counts.update(clustering.pop("counts"))
        out.update(clustering)
    if strands is not None:
        counts["strands"] = len(strands)
        out["consensus"] = consensus_summary(strands)
    out["counts"] = counts
    out["timings"] = {k: round(float(v), 4) for k, v in (timings or {}).items()}
    if scores:
        out["scores"] = dict(scores)
    if outputs:
        out["outputs"] = list(outputs)
    return out
