"""The model card of a recipe's final checkpoint: what it is, how it was made, how it scores.

Written beside ``OUT/model.pt`` as ``model-card.json`` (every figure, for
scripts) and ``model-card.md`` (the same, to read): the model's config, the
training data (pairs drawn from the channel: their settings, the seed, the
validation set), each stage's start, steps, sequences, time and validation, the
final metrics, and the file's digests (SHA-256 of the file, as ``sha256sum``
prints it, and of its weights, as the checkpoint carries it).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import torch

from dnaembed import __version__
from dnaembed.io.atomic import atomic_path
from dnaembed.model.checkpoint import load_checkpoint, weights_digest
from dnaembed.train.stages import Recipe


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def card_data(recipe: Recipe, model_path: Path, stages: list[dict]) -> dict:
    """Everything the card says, as JSON-able data."""
    ckpt = load_checkpoint(model_path)
    final = stages[-1]["config"]
    return {
        "model": final["model"]["name"],
        "file": model_path.name,
        "sha256": file_sha256(model_path),
        "weights_sha256": weights_digest(ckpt.model.state_dict()),
        "recipe": recipe.source,
        "steps_scale": recipe.steps_scale,
        "config": final,
        "data": {
            "source": "pairs drawn on the fly from the storage channel (dnaembed.train.pairs), "
                      "labelled with exact Levenshtein distances",
            "pairs": final["pairs"],
            "seed": final["seed"],
            "validation_pairs": final["train"]["val_pairs"],
        },
        "stages": [
            {key: s[key] for key in ("stage", "name", "start", "steps", "seconds", "best", "last")}
            for s in stages
        ],
        "metrics": ckpt.metrics,
        "dnaembed_version": __version__,
        "torch_version": torch.__version__,
    }


def _fmt(value, digits: int = 3) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    return "-" if value is None else str(value)


def card_markdown(data: dict) -> str:
    """The card as Markdown."""
    model, metrics = data["config"]["model"], data["metrics"]
    scaled = "" if data["steps_scale"] == 1 else (
        f" (steps scaled by {data['steps_scale']}: a short trial, not the full recipe)")
    lines = [
        f"# Model card: {data['model']}",
        "",
        f"`{data['file']}`, from the recipe `{data['recipe']}`{scaled}.",
        "",
        "| | |",
        "|---|---|",
        f"| encoder | window {model['window']}, channels {model['channels']}, kernel "
        f"{model['kernel_size']}, D = {model['embedding_dim']}, ends {model['ends']}, "
        f"views {model['views']} |",
        f"| loss | {data['config']['train']['loss']} |",
        f"| data | {data['data']['source']}; seed {data['data']['seed']}; "
        f"{data['data']['validation_pairs']} held-out validation pairs |",
        f"| validation (best) | MAE(d<=40) {_fmt(metrics.get('mae_near'))}, bias "
        f"{_fmt(metrics.get('bias_near'))}, Spearman {_fmt(metrics.get('spearman'), 4)} at "
        f"step {metrics.get('step')} |",
        f"| sha256 | `{data['sha256']}` (file); `{data['weights_sha256']}` (weights) |",
        f"| software | dnaembed {data['dnaembed_version']}, torch {data['torch_version']} |",
        "",
        "## Stages",
        "",
        "| stage | start | steps | sequences | seconds | best step | MAE(d<=40) | Spearman |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in data["stages"]:
        best, last = s["best"], s["last"]
        lines.append(
            f"| {s['stage']}. {s['name']} | {s['start']} | {s['steps']:,} | "
            f"{last.get('seqs_seen', 0):,} | {_fmt(s['seconds'], 0)} | {best.get('step')} | "
            f"{_fmt(best.get('mae_near'))} | {_fmt(best.get('spearman'), 4)} |"
        )
    lines += ["", "## Pairs", "", "```json", json.dumps(data["data"]["pairs"], indent=1), "```",
              "", "## Config of the last stage", "", "```json",
              json.dumps(data["config"], indent=1), "```"]
    return "\n".join(lines) + "\n"


def write_card(recipe: Recipe, out_dir: Path, model_path: Path, stages: list[dict]) -> Path:
    """``model-card.json`` and ``model-card.md`` in ``out_dir``; the Markdown file's path."""
    data = card_data(recipe, model_path, stages)
    with atomic_path(out_dir / "model-card.json") as tmp:
        tmp.write_text(json.dumps(data, indent=1) + "\n")
    md = out_dir / "model-card.md"
    with atomic_path(md) as tmp:
        tmp.write_text(card_markdown(data))
    return md
