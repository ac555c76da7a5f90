"""Scoring (``dnaembed evaluate --format`` or the same library function) and the Markdown tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCORE_KEYS = ("A_0.8", "A_0.9", "A_1.0", "ARI", "NMI", "output_clusters", "true_clusters")


def evaluate_cli_available() -> bool:
    """True once ``dnaembed evaluate --format`` exists in this checkout."""
    proc = subprocess.run(
        [sys.executable, "-m", "dnaembed", "evaluate", "--help"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    return proc.returncode == 0 and "--format" in proc.stdout


def _normalise(raw: dict) -> dict | None:
    """Pick the figures out of ``dnaembed evaluate --json`` (flat or nested), or None."""
    flat: dict[str, object] = {}

    def walk(d: dict, prefix: str = "") -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v
                flat.setdefault(str(k), v)

    walk(raw)
    out: dict[str, object] = {}
    for key in SCORE_KEYS:
        candidates = [key, key.replace("_", ""), key.lower(), f"accuracy.{key[2:]}"]
        if key.startswith("A_"):
            candidates += [f"A_{float(key[2:]):g}", f"accuracy.{float(key[2:]):g}"]
        for c in candidates:
            if c in flat:
                out[key] = flat[c]
                break
    return out if all(k in out for k in SCORE_KEYS[:5]) else None


def score(clusters: Path, truth_path: Path, use_cli: bool, *, fmt: str = "tsv",
          reads: Path | None = None) -> dict:
    """Scores of a tool's clusters file (in ``fmt``, as ``evaluate --format`` reads it).

    With ``use_cli``: ``dnaembed evaluate CLUSTERS --format FMT --truth TRUTH --json``
    (``--reads READS`` for Starcode, whose output numbers its input lines); otherwise (or
    if its JSON lacks a figure) ``dnaembed.evaluate.clustering.evaluate_files``, the
    function behind it.
    """
    if use_cli:
        extra = ["--reads", str(reads)] if reads is not None else []
        proc = subprocess.run(
            [sys.executable, "-m", "dnaembed", "evaluate", str(clusters), "--format", fmt,
             "--truth", str(truth_path), "--json", *extra],
            capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"),
        )  # fmt: skip
        if proc.returncode == 0:
            try:
                picked = _normalise(json.loads(proc.stdout))
            except json.JSONDecodeError:
                picked = None
            if picked is not None:
                picked["scored_by"] = f"dnaembed evaluate --format {fmt}"
                return picked
    from dnaembed.evaluate.clustering import evaluate_files

    out = evaluate_files(clusters, truth_path, fmt=fmt, reads_path=reads)
    out["scored_by"] = f"dnaembed.evaluate.clustering.evaluate_files (format {fmt})"
    return out


def _f(x: object, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if isinstance(x, int | float) else "—"


def _size(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def markdown_table(set_record: dict) -> str:
    """One Markdown table for one data set's runs (``set_record`` as in peers.json)."""
    info = set_record["data"]
    lines = [
        f"#### {set_record['name']}: {set_record['description']}",
        "",
        f"{info.get('reads', 0):,} reads, {info.get('true_clusters', 0):,} true clusters "
        f"({info.get('labelled_reads', 0):,} labelled reads).",
        "",
        "| tool | settings | A_0.8 | A_0.9 | A_1.0 | ARI | NMI | clusters (true) | wall s "
        "| CPU s | peak MiB | wall ÷ dnaembed | CPU ÷ dnaembed | notes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    own = next(
        (r for r in set_record["runs"] if r["tool"] == "dnaembed" and r["status"] == "ok"), None
    )
    base = own["wall_s"] if own else None
    base_cpu = own.get("cpu_s") if own else None
    for r in set_record["runs"]:
        s = r.get("scores") or {}
        status = r["status"]
        notes = list(r.get("notes", []))
        if status == "ok":
            ratio = f"{r['wall_s'] / base:.2f}x" if base else "—"
            cpu = r.get("cpu_s")
            cpu_ratio = f"{cpu / base_cpu:.2f}x" if (base_cpu and cpu is not None) else "—"
            cells = [
                _f(s.get("A_0.8")), _f(s.get("A_0.9")), _f(s.get("A_1.0")),
                _f(s.get("ARI")), _f(s.get("NMI")),
                f"{s.get('output_clusters', 0):,} ({s.get('true_clusters', 0):,})",
                f"{r['wall_s']:.1f}", _f(r.get("cpu_s"), 1), _size(r.get("peak_rss_mib")),
                ratio, cpu_ratio,
            ]  # fmt: skip
        else:
            label = {
                "timeout": f"timed out at {r.get('timeout_s', 0):.0f} s",
                "not installed": "not installed",
                "failed": f"failed (exit {r.get('returncode')})",
                "not run": "not run",
            }.get(status, status)
            ratio = f">{r['wall_s'] / base:.1f}x" if (base and status == "timeout") else "—"
            wall = f">{r['wall_s']:.0f}" if status == "timeout" else "—"
            cells = [label, "—", "—", "—", "—", "—", wall, "—", "—", ratio, "—"]
        settings = r.get("settings", "")
        lines.append(
            f"| {r['tool']} | `{settings}` | " + " | ".join(cells) + f" | {'; '.join(notes)} |"
            if settings
            else f"| {r['tool']} | — | " + " | ".join(cells) + f" | {'; '.join(notes)} |"
        )
    return "\n".join(lines) + "\n"
