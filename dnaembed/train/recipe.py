"""Running a recipe: every stage in its own directory, continued where it stopped.

``OUT/<n>-<stage>/`` holds each stage's run (best.pt, last.pt, metrics.jsonl,
config.toml, validation.png) and, once the stage is complete, ``stage.json``
(its steps, time and metrics). ``OUT/recipe.json`` records the plan (stage
names, starts, steps, models): the same command rerun after an interruption
skips the complete stages and resumes the interrupted one from its ``last.pt``;
a run directory of another plan is refused. When every stage is complete,
``OUT/model.pt`` (the last stage's best checkpoint) and its model card
(:mod:`dnaembed.train.card`) are written beside them.

A ``resume`` stage starts from a copy of the previous stage's ``best.pt`` and
continues its ``last.pt``, so its best is the best of both (as one run resumed
in one directory would be); an ``init`` stage starts from the previous stage's
best weights with a fresh optimizer and schedule.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from dnaembed.errors import UsageError
from dnaembed.io.atomic import atomic_path
from dnaembed.log import logger
from dnaembed.model.checkpoint import load_checkpoint
from dnaembed.train.card import write_card
from dnaembed.train.config import TrainConfig
from dnaembed.train.ddp.context import DistContext
from dnaembed.train.loop import train_on, training_context
from dnaembed.train.stages import Recipe
from dnaembed.train.state import read_on_main


@dataclass
class RecipeResult:
    """What a recipe run ended with: each complete stage's summary, and the final files."""

    stages: list[dict]
    complete: bool
    model: Path | None = None
    card: Path | None = None


def train_recipe(
    recipe: Recipe, out_dir: str | Path, *, device: str = "auto",
    max_seconds: float | None = None,
) -> RecipeResult:
    """Run (or continue) every stage of ``recipe`` under ``out_dir``.

    ``max_seconds`` bounds this call's training time; the run stops at a validation
    boundary and the same call continues it later."""
    out_dir = Path(out_dir)
    with training_context(device) as ctx:
        (status,) = read_on_main(ctx, lambda: (_survey(recipe, out_dir),))
        summaries: list[dict] = []
        deadline = None if max_seconds is None else time.perf_counter() + max_seconds
        for index, summary in enumerate(status):
            if summary is None:
                left = None if deadline is None else max(0.0, deadline - time.perf_counter())
                summary = _run_stage(ctx, recipe, out_dir, index, left)
            if summary is None:
                return RecipeResult(summaries, complete=False)
            summaries.append(summary)
        if not ctx.is_main:
            return RecipeResult(summaries, complete=True)
        return _publish(recipe, out_dir, summaries)


def _publish(recipe: Recipe, out_dir: Path, summaries: list[dict]) -> RecipeResult:
    """``OUT/model.pt`` (the last stage's best checkpoint) and its model card."""
    model = out_dir / "model.pt"
    with atomic_path(model) as tmp:
        shutil.copyfile(recipe.stage_dir(out_dir, len(recipe.stages) - 1) / "best.pt", tmp)
    card = write_card(recipe, out_dir, model, summaries)
    logger.info("recipe %s complete: %s, card %s", recipe.name, model, card)
    return RecipeResult(summaries, complete=True, model=model, card=card)


def _survey(recipe: Recipe, out_dir: Path) -> list[dict | None]:
    """Each stage's summary when it is complete (None when not); records the plan."""
    plan_path = out_dir / "recipe.json"
    plan = {"source": recipe.source, "steps_scale": recipe.steps_scale, "stages": recipe.plan()}
    if plan_path.is_file():
        saved = json.loads(plan_path.read_text())
        if saved.get("stages") != plan["stages"]:
            raise UsageError(
                f"{out_dir} holds a run of another recipe ({_difference(saved, plan)}); "
                "pass another -o, or remove it to start over"
            )
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(plan_path) as tmp:
            tmp.write_text(json.dumps(plan, indent=1) + "\n")
    status: list[dict | None] = []
    for index, stage in enumerate(recipe.stages):
        stage_dir = recipe.stage_dir(out_dir, index)
        done = stage_dir / "stage.json"
        last = stage_dir / "last.pt"
        if not done.is_file() and last.is_file():
            step = load_checkpoint(last).training.get("step", 0)
            if step >= stage.steps:  # stopped after its last checkpoint, before stage.json
                _write_summary(stage_dir, _summary(recipe, out_dir, index))
        status.append(json.loads(done.read_text()) if done.is_file() else None)
    return status


def _difference(saved: dict, plan: dict) -> str:
    """The first thing that differs between two plans, in words."""
    old, new = saved.get("stages", []), plan["stages"]
    if len(old) != len(new):
        return f"{len(old)} stages there, {len(new)} here"
    for i, (a, b) in enumerate(zip(old, new)):
        for key in ("name", "start", "steps", "model"):
            if a.get(key) != b[key]:
                shown = (a.get(key), b[key]) if key != "model" else ("one", "another")
                return f"stage {i + 1} {key}: {shown[0]} there, {shown[1]} here"
    return "another plan"


def _run_stage(ctx: DistContext, recipe: Recipe, out_dir: Path, index: int,
               max_seconds: float | None) -> dict | None:
    """Train stage ``index`` (continuing its last.pt if it has one); its summary, or None
    when it stopped before its last step."""
    stage = recipe.stages[index]
    stage_dir = recipe.stage_dir(out_dir, index)
    before = recipe.stage_dir(out_dir, index - 1) if index else None
    resume_from = None
    (partial,) = read_on_main(ctx, lambda: ((stage_dir / "last.pt").is_file(),))
    if partial:
        resume_from = stage_dir / "last.pt"
    elif stage.start == "resume":
        resume_from = before / "last.pt"
        if ctx.is_main:
            stage_dir.mkdir(parents=True, exist_ok=True)
            with atomic_path(stage_dir / "best.pt") as tmp:
                shutil.copyfile(before / "best.pt", tmp)
    if ctx.is_main:
        logger.info("stage %d of %d: %s (%s, %d steps) in %s", index + 1, len(recipe.stages),
                    stage.name, stage.start, stage.steps, stage_dir)
    result = train_on(ctx, stage_config(recipe, out_dir, index), stage_dir, stage=index,
                      resume_from=resume_from, max_seconds=max_seconds)
    if result.steps < stage.steps:
        if ctx.is_main:
            logger.info("stopped in stage %s at step %d of %d; run the same command to "
                        "continue", stage.name, result.steps, stage.steps)
        return None
    summary = _summary(recipe, out_dir, index) if ctx.is_main else {}
    if ctx.is_main:
        _write_summary(recipe.stage_dir(out_dir, index), summary)
    return summary


def stage_config(recipe: Recipe, out_dir: Path, index: int) -> TrainConfig:
    """The config stage ``index`` runs with: an ``init`` stage's ``train.init`` is the
    previous stage's ``best.pt``."""
    stage = recipe.stages[index]
    if stage.start != "init":
        return stage.config
    best = recipe.stage_dir(out_dir, index - 1) / "best.pt"
    return dataclasses.replace(stage.config,
                               train=dataclasses.replace(stage.config.train, init=str(best)))


def _summary(recipe: Recipe, out_dir: Path, index: int) -> dict:
    """A complete stage: how it started, its steps, training seconds, best and last validation."""
    stage = recipe.stages[index]
    stage_dir = recipe.stage_dir(out_dir, index)
    best = load_checkpoint(stage_dir / "best.pt")
    last = load_checkpoint(stage_dir / "last.pt")
    return {
        "stage": index + 1,
        "name": stage.name,
        "start": stage.start,
        "steps": stage.steps,
        "seconds": round(float((last.extra_state or {}).get("seconds", 0.0)), 2),
        "best": best.metrics,
        "last": last.metrics,
        "directory": str(stage_dir),
        "config": stage_config(recipe, out_dir, index).to_dict(),
    }


def _write_summary(stage_dir: Path, summary: dict) -> None:
    with atomic_path(stage_dir / "stage.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
