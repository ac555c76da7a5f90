"""PNG plots of a command's summary and of a training run (matplotlib, an optional extra).

* ``distances.png``: the sampled edit distances (histogram), the cut and both peaks;
* ``cluster-sizes.png``: how many clusters have each size (log scale);
* ``consensus-support.png`` (``run``, ``consensus``): reads that voted per
  strand, and the strands' confidence;
* ``training.png``: training loss and validation error of a training run
  directory (its ``metrics.jsonl``) against the step; of a staged run (``train -c``
  with ``[[stage]]`` tables), one per stage, ``1-NAME/training.png``, ...

Figures are built from plain data (the JSON summary of
:mod:`dnaembed.report.summary`, the rows of ``metrics.jsonl``) on
:class:`matplotlib.figure.Figure` objects, without pyplot's global state; the
``*_figure`` functions return them (for tests and notebooks) and
:func:`save_figures` writes them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dnaembed.errors import DnaembedError, InputError
from dnaembed.log import logger

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from dnaembed.io.atomic import OutputSet

DPI = 110
#: A stage's directory in a staged run: ``<n>-<stage name>`` (``Recipe.stage_dir``).
_STAGE_DIR = re.compile(r"\d+-[A-Za-z0-9][A-Za-z0-9._-]*")
#: Counts from which the cluster-size axis is logarithmic.
LOG_SCALE_FROM = 100


def require_matplotlib() -> None:
    """Fail with one clear line when matplotlib is missing (before any work)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise DnaembedError(
            "plots need matplotlib, which is not installed: pip install 'dnaembed[plot]'"
        ) from None


def _figure(columns: int = 1):
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4 * columns, 4.2), dpi=DPI, layout="constrained")
    axes = [fig.add_subplot(1, columns, k + 1) for k in range(columns)]
    return fig, axes


def distance_histogram_figure(threshold: Mapping[str, object]) -> Figure:
    """The sampled distances, the cut (``max_dist``) and both peaks marked."""
    fig, (ax,) = _figure()
    counts = list(threshold.get("histogram") or [])
    ax.bar(range(len(counts)), counts, width=1.0, color="#7a9cc6", label="sampled pairs")
    ax.axvline(threshold["max_dist"], color="#c0392b", linewidth=2,
               label=f"cut: {threshold['max_dist']} edits ({threshold['source']})")
    for key, name, colour in (("same_peak", "same-strand peak", "#27ae60"),
                              ("unrelated_peak", "unrelated peak", "#8e44ad"),
                              ("related_trough", "related designs beyond", "#e67e22")):
        if threshold.get(key) is not None:
            ax.axvline(threshold[key], color=colour, linestyle="--",
                       label=f"{name}: {threshold[key]}")
    ax.set_xlabel("edit distance of a sampled candidate pair")
    ax.set_ylabel("pairs")
    ax.set_title(f"Sampled distances ({threshold.get('pairs', 0):,} pairs)")
    ax.legend(loc="best", fontsize="small")
    return fig


def cluster_sizes_figure(sizes: Mapping[str, list[int]]) -> Figure:
    """How many clusters have each size."""
    fig, (ax,) = _figure()
    ax.bar(sizes["size"], sizes["clusters"], width=0.9, color="#7a9cc6")
    if sizes["clusters"] and max(sizes["clusters"]) >= LOG_SCALE_FROM:
        # Singletons and one-off sizes next to thousands of typical clusters.
        from matplotlib.ticker import ScalarFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("reads per cluster")
    ax.set_ylabel("clusters")
    ax.set_title(f"Cluster sizes ({sum(sizes['clusters']):,} clusters)")
    return fig


def consensus_support_figure(consensus: Mapping[str, object]) -> Figure:
    """Reads that voted per strand (left) and the strands' confidence (right)."""
    fig, (left, right) = _figure(columns=2)
    support, confidence = consensus["support"], consensus["confidence"]
    left.bar(support["size"], support["strands"], width=0.9, color="#7a9cc6")
    left.set_xlabel("reads that voted (support)")
    left.set_ylabel("strands")
    left.set_title(f"Consensus support ({consensus['strands']:,} strands)")
    edges = confidence["edges"]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:])]
    right.bar(edges[:-1], confidence["strands"], width=widths, align="edge", color="#e59866")
    right.set_xlabel("confidence (positions no single read could overturn)")
    right.set_ylabel("strands")
    right.set_title("Consensus confidence")
    return fig


def read_metrics(run_dir: str | os.PathLike) -> list[dict]:
    """The rows of a training run directory's ``metrics.jsonl`` (or of that file itself)."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise InputError(f"{path}: no such file (is {run_dir} a training run directory?)")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: line {number}: not JSON ({e.msg})") from None
        if not isinstance(row, dict) or "step" not in row:
            raise InputError(f"{path}: line {number}: a metrics row needs a 'step'")
        # A step or metric that is not a number was drawn as a category axis, exit 0.
        bad = next((k for k in ("step", "loss", "mae", "mae_near", "rmse_near")
                    if row.get(k) is not None and not _is_number(row[k])), None)
        if bad:
            raise InputError(f"{path}: line {number}: {bad} is {json.dumps(row[bad])[:40]}, "
                             "not a number")
        rows.append(row)
    if not rows:
        raise InputError(f"{path}: no metrics rows (has the run reached its first validation?)")
    return rows


def training_figure(rows: list[dict]) -> Figure:
    """Training loss (left) and validation error (right) against the step."""
    fig, (left, right) = _figure(columns=2)
    steps = [r["step"] for r in rows]
    left.plot(steps, [r.get("loss") for r in rows], marker=".", color="#2c3e50")
    left.set_xlabel("step")
    left.set_ylabel("training loss (running mean)")
    left.set_title("Training")
    for key, label in (("mae", "MAE, all pairs"), ("mae_near", "MAE, near pairs"),
                       ("rmse_near", "RMSE, near pairs")):
        if any(key in r for r in rows):
            right.plot(steps, [r.get(key) for r in rows], marker=".", label=label)
    right.set_xlabel("step")
    right.set_ylabel("validation error (edits)")
    right.set_title("Validation")
    if right.lines:  # rows without validation errors: matplotlib warned of an empty legend
        right.legend(fontsize="small")
    return fig


def summary_figures(summary: Mapping[str, object]) -> dict[str, object]:
    """The figures a command summary supports, by file name."""
    figures: dict[str, object] = {}
    threshold = summary.get("threshold")
    if threshold and threshold.get("histogram"):
        figures["distances.png"] = distance_histogram_figure(threshold)
    if summary.get("cluster_sizes"):
        figures["cluster-sizes.png"] = cluster_sizes_figure(summary["cluster_sizes"])
    if summary.get("consensus"):
        figures["consensus-support.png"] = consensus_support_figure(summary["consensus"])
    return figures


def read_summary(path: str | os.PathLike) -> dict:
    """A summary written by ``--json FILE``."""
    from dnaembed.io.tables import read_lines

    try:
        data = json.loads("\n".join(read_lines(path)))
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict) or "command" not in data:
        # evaluate's --json is one of dnaembed's too, but scores: nothing to draw.
        raise InputError(f"{path}: not a summary of cluster, consensus or run (their "
                         "--json), which report draws")
    check_plotted_sections(data, str(path))
    return data


#: What each plotted section of a summary needs, as ``--json`` writes it: "number",
#: "numbers" (a list of them), "text", or a nested section. Peaks and pairs may be null.
_PLOTTED = {
    "threshold": {"histogram": "numbers", "max_dist": "number", "source": "text"},
    "cluster_sizes": {"size": "numbers", "clusters": "numbers"},
    "consensus": {"strands": "number", "support": {"size": "numbers", "strands": "numbers"},
                  "confidence": {"edges": "numbers", "strands": "numbers"}},
}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_section(value: object, spec: object, where: str) -> str | None:
    """What is wrong with ``value`` against ``spec`` (see ``_PLOTTED``), or None."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return f"{where} is {type(value).__name__}, not an object"
        for key, inner in spec.items():
            if key not in value:
                return f"{where} has no {key!r}"
            problem = _check_section(value[key], inner, f"{where}.{key}")
            if problem:
                return problem
        return None
    fine = {"number": _is_number(value), "text": isinstance(value, str),
            "numbers": isinstance(value, list) and all(map(_is_number, value))}[spec]
    return None if fine else f"{where} is {json.dumps(value)[:40]}, not {spec}"


def check_plotted_sections(summary: Mapping[str, object], name: str) -> None:
    """Refuse a summary whose plotted sections are not as ``--json`` writes them.

    A hand-edited summary, or another program's JSON with a ``command`` key, otherwise
    failed inside the plotting as an internal error (``'int' object has no attribute
    'get'``, ``KeyError: 'max_dist'``). Empty sections (an empty input's null
    threshold) are not plotted, so not checked.
    """
    for section, spec in _PLOTTED.items():
        value = summary.get(section)
        if not value:
            continue
        problem = _check_section(value, spec, section)
        if problem is None and section == "cluster_sizes" and len(value["size"]) != len(
                value["clusters"]):
            problem = "cluster_sizes: size and clusters differ in length"
        if problem:
            raise InputError(f"{name}: {problem} (not a summary as --json writes it)")


def stage_directories(run_dir: str | os.PathLike) -> list[Path]:
    """The stage directories of a staged training run, in stage order; empty for any other
    path.

    A staged run (``train -c`` with ``[[stage]]`` tables) has no ``metrics.jsonl`` of its
    own: each stage's is in ``RUN/1-NAME``, ``RUN/2-NAME``, ... A directory that holds a
    ``metrics.jsonl`` is a single run, whatever else it holds. Ordered by the number, not
    the name (``10-x`` runs after ``9-y``). Stages that have not validated yet are
    included (they have no ``metrics.jsonl``; :func:`staged_run_figures` skips them)."""
    path = Path(run_dir)
    if not path.is_dir() or (path / "metrics.jsonl").exists():
        return []
    stages = [d for d in path.iterdir() if _STAGE_DIR.fullmatch(d.name) and d.is_dir()]
    return sorted(stages, key=lambda d: (int(d.name.split("-", 1)[0]), d.name))


def staged_run_figures(run_dir: str | os.PathLike,
                       stages: list[Path] | None = None) -> dict[str, object]:
    """``training.png`` of every stage of a staged run, by ``STAGE/training.png`` (the
    stage's directory name), in stage order.

    Every stage's metrics are read before anything is drawn, so a broken one fails the
    whole run (its plots are all-or-nothing, as the command's outputs are). A stage with
    no ``metrics.jsonl`` yet (interrupted before its first validation, or not started) is
    skipped with a log line; a run none of whose stages has one is an error."""
    path = Path(run_dir)
    stages = stage_directories(path) if stages is None else stages
    drawn = [s for s in stages if (s / "metrics.jsonl").is_file()]
    if not drawn:
        raise InputError(f"{path}: no metrics.jsonl, nor in its stage directories "
                         f"({', '.join(s.name for s in stages)}): is it a training run "
                         "directory? (a stage writes one at its first validation)")
    rows = {stage.name: read_metrics(stage) for stage in drawn}
    logger.info("%s: a staged training run, %d of %d stages drawn: %s", path, len(drawn),
                len(stages), ", ".join(rows))
    for stage in stages:
        if stage not in drawn:
            logger.info("%s: no metrics.jsonl yet (no validation), not drawn", stage)
    return {f"{name}/training.png": training_figure(r) for name, r in rows.items()}


def figures_of(source: str | os.PathLike) -> dict[str, object]:
    """The figures of a summary JSON file or of a training run directory (by file name; a
    staged run's by ``STAGE/training.png``, see :func:`staged_run_figures`)."""
    path = Path(source)
    stages = stage_directories(path)
    if stages:
        return staged_run_figures(path, stages)
    if path.is_dir() or path.name.endswith(".jsonl"):
        return {"training.png": training_figure(read_metrics(path))}
    figures = summary_figures(read_summary(path))
    if not figures:
        raise InputError(f"{path}: this summary has nothing to plot")
    return figures


def save_figures(figures: Mapping[str, object], directory: str | os.PathLike,
                 outputs: OutputSet | None = None) -> list[Path]:
    """Write each figure as a PNG into ``directory`` (through ``outputs``, an OutputSet).

    A name with a directory (a stage's ``1-NAME/training.png``) creates it, through
    ``outputs`` (removed again if the command fails)."""
    written = []
    for name, fig in figures.items():
        dest = Path(directory) / name
        if dest.parent != Path(directory):
            if outputs is not None:
                outputs.directory(dest.parent)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
        # Keyed by the whole path: two sources each draw distances.png, in their own places.
        target = outputs.add(f"plot {dest}", dest) if outputs is not None else dest
        fig.savefig(target, format="png")
        written.append(dest)
    return written
