"""A recipe: runs that follow one another, each from the one before (``[[stage]]`` tables).

A config file may end with stages::

    [[stage]]
    name = "two-ends"          # its run directory is OUT/1-two-ends
    steps = 24000

    [[stage]]
    name = "two-ends-48k"
    resume = true              # continue stage 1 (weights, optimizer, step) ...
    steps = 48000              # ... to step 48,000 of a new schedule over 48,000 steps

    [[stage]]
    name = "complement"
    init = true                # start from the best weights of the stage before
    steps = 12000
    [stage.model]              # tables laid over the file's [model], [train], ...
    views = 2

Each stage's config is the file's tables, then the stage's own tables, then the
command line's ``--set`` and options (they apply to every stage). ``steps`` of a
``resume`` stage counts from the start of the run it continues. A file without
stages is a recipe of one stage, run straight into the run directory.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

from dnaembed.errors import UsageError
from dnaembed.train.config import (
    SECTIONS,
    Layers,
    Override,
    TrainConfig,
    parse_overrides,
    read_layers,
)
from dnaembed.train.schema import checked

STARTS = ("scratch", "init", "resume")
_STAGE_KEYS = ("name", "steps", "init", "resume", *SECTIONS)
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: Settings a stage decides for itself: the command line may not set them for every stage.
_PER_STAGE = {"train.steps": "steps", "train.init": "init"}
#: At most about this many validations in a stage whose steps --steps-scale cut down.
_SCALED_VALIDATIONS = 10


@dataclass(frozen=True)
class Stage:
    """One run of a recipe: its resolved config and how it starts.

    ``start``: ``scratch`` (fresh weights, or ``train.init``), ``init`` (the previous
    stage's best weights, a fresh optimizer and schedule) or ``resume`` (the previous
    stage's ``last.pt``: weights, optimizer state and step)."""

    name: str
    config: TrainConfig
    start: str = "scratch"

    @property
    def steps(self) -> int:
        """Training steps of the stage (its config's)."""
        return self.config.train.steps


@dataclass(frozen=True)
class Recipe:
    """A config file's stages, resolved; ``staged`` is False for a file without stages."""

    source: str
    stages: tuple[Stage, ...]
    staged: bool = False
    steps_scale: float = 1.0

    @property
    def name(self) -> str:
        """The run's name: its last stage's config's."""
        return self.stages[-1].config.name

    def stage_dir(self, out_dir: Path, index: int) -> Path:
        """Where stage ``index`` runs: ``OUT/<n>-<name>`` (``OUT`` itself without stages)."""
        if not self.staged:
            return out_dir
        return out_dir / f"{index + 1}-{self.stages[index].name}"

    def plan(self) -> list[dict]:
        """What a run directory must agree with to be continued: names, starts, steps, models."""
        return [
            {"name": s.name, "start": s.start, "steps": s.steps, "model": s.config.model.to_dict()}
            for s in self.stages
        ]


def load_recipe(
    path: str | Path | None,
    overrides: list[str] | None = None,
    flags: dict | None = None,
    steps_scale: float = 1.0,
) -> Recipe:
    """Every stage of a config file, with ``--set`` items and option values applied to each.

    ``steps_scale`` multiplies every stage's steps, warm-up and validation interval
    (at least one step each), so a whole recipe can run in seconds.
    """
    if not steps_scale > 0:
        raise UsageError(f"--steps-scale must be > 0, got {steps_scale}")
    base = read_layers(path)
    tables = base.data.pop("stage", None)
    changes = parse_overrides(overrides, flags)
    for change in changes:
        if change.key.split(".")[0] == "stage":
            raise UsageError(f"{change.label}: stages are set in the config file, not with --set")
    if tables is None:
        layers = base.copy()
        for change in changes:
            layers.set(change.key, change.value, change.label)
        config = _scaled(layers.build(), steps_scale, 0)
        return Recipe(base.source, (Stage("run", config),), False, steps_scale)
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise UsageError(f"{base.source}: stage: expected [[stage]] tables")
    for change in changes:
        if change.key in _PER_STAGE:
            # The hint is for the steps only: --init has no scaled counterpart.
            hint = " (scale the steps with --steps-scale)" if change.key == "train.steps" else ""
            raise UsageError(
                f"{change.label}: {base.source} has stages, each with its own "
                f"{_PER_STAGE[change.key]}{hint}"
            )
    stages: list[Stage] = []
    planned: list[int] = []  # each stage's steps before scaling
    for index, table in enumerate(tables):
        stage, steps = _stage(base, table, index, changes, stages, planned, steps_scale)
        stages.append(stage)
        planned.append(steps)
    return Recipe(base.source, tuple(stages), True, steps_scale)


def _stage(base: Layers, table: dict, index: int, changes: list[Override],
           before: list[Stage], planned: list[int], scale: float) -> tuple[Stage, int]:
    """Stage ``index`` (the file's tables, the stage's, then the command line's) and its
    steps before scaling."""
    name = checked(table.get("name", f"stage{index + 1}"), str, "name",
                   f"{base.source}: stage {index + 1}")
    where = f"{base.source}: stage {name!r}"
    unknown = sorted(set(table) - set(_STAGE_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown stage settings: {', '.join(unknown)} "
                         f"(known: {', '.join(_STAGE_KEYS)})")
    if not _SAFE_NAME.match(name) or any(s.name == name for s in before):
        raise UsageError(f"{where}: a stage name must be unique and made of letters, digits, "
                         "'.', '_' and '-' (it names the stage's directory)")
    init, resume = (checked(table.get(key, False), bool, key, where) for key in ("init", "resume"))
    if init and resume:
        raise UsageError(f"{where}: init and resume exclude each other")
    if (init or resume) and not before:
        raise UsageError(f"{where}: the first stage has no stage before it to "
                         f"{'resume' if resume else 'start from'}")
    layers = base.copy()
    layers.merge({k: checked(table[k], dict, k, where) for k in SECTIONS if k in table}, where)
    if "steps" in table:
        layers.set("train.steps", table["steps"], where)
    for change in changes:
        layers.set(change.key, change.value, change.label)
    config = layers.build()
    if init and config.train.init:
        raise UsageError(f"{where}: init = true starts from the previous stage's best; "
                         f"train.init = {config.train.init!r} says otherwise")
    start = "resume" if resume else "init" if init else "scratch"
    steps = config.train.steps
    if resume:
        previous = before[-1]
        if config.model != previous.config.model:
            raise UsageError(f"{where}: resume = true continues stage {previous.name!r}, whose "
                             "[model] differs (a new model needs init = true)")
        if steps <= planned[-1]:
            raise UsageError(f"{where}: steps {steps} must exceed stage {previous.name!r}'s "
                             f"{planned[-1]} (it continues that run)")
    config = _scaled(config, scale, before[-1].steps if resume else 0)
    return Stage(name, config, start), steps


def _scaled(config: TrainConfig, factor: float, after: int) -> TrainConfig:
    """``config`` with steps, warm-up and validation interval times ``factor``.

    Each stays at least 1 (a warm-up of 0 stays 0); a stage resuming at step ``after``
    keeps at least one step of its own. A scaled-down stage validates at most about
    ``_SCALED_VALIDATIONS`` times: at a few steps, validating every step would cost more
    than the training."""
    if factor == 1.0:
        return config
    cfg = config.train

    def scaled(n: int) -> int:
        return max(1, round(n * factor))

    steps = max(scaled(cfg.steps), after + 1)
    own = steps - after
    train = dataclasses.replace(
        cfg,
        steps=steps,
        warmup_steps=scaled(cfg.warmup_steps) if cfg.warmup_steps else 0,
        val_every=max(scaled(cfg.val_every), math.ceil(own / _SCALED_VALIDATIONS)),
    )
    return dataclasses.replace(config, train=train)
