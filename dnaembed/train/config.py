"""The settings of a training run: model, pairs, optimiser, schedule, stages, as plain data.

A run is described by a TOML file (``configs/``) with ``[model]``, ``[pairs]``,
``[train]`` and ``[distributed]`` tables, plus ``--set key=value`` overrides; the
resolved config is written into the run directory. A file may also hold
``[[stage]]`` tables (:mod:`dnaembed.train.stages`): a recipe of runs that follow
one another. Every value is type-checked when the file is loaded
(:mod:`dnaembed.train.schema`), so a bad value is refused before anything is written.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from dnaembed.errors import DnaembedError, InputError, UsageError
from dnaembed.model.encoder import EncoderConfig
from dnaembed.model.inference import PRECISIONS
from dnaembed.train.ddp.comm import CommSettings
from dnaembed.train.losses import get_loss
from dnaembed.train.pairs import PairConfig
from dnaembed.train.schema import build, checked


@dataclass
class OptimConfig:
    """Optimisation settings (the ``[train]`` table)."""

    loss: str = "chi2"
    optimizer: str = "adamw"
    lr: float = 2e-3
    weight_decay: float = 0.0
    schedule: str = "cosine"
    warmup_steps: int = 200
    min_lr_factor: float = 0.05
    batch_size: int = 512  # sequences embedded per step (and per rank)
    steps: int = 10000
    grad_clip: float = 10.0
    val_pairs: int = 4000
    val_every: int = 500
    # Batches drawn ahead of the step: by a background thread (label_workers = 0), or
    # per worker process.
    prefetch: int = 4
    # Worker processes that draw batches (channel and exact Levenshtein labels); 0 draws
    # them in this process. The batches are the same whatever the number (each is a
    # function of the seed, the stage and the step).
    label_workers: int = 0
    # Forward pass precision: "bfloat16" (autocast; weights, gradients and the loss stay
    # float32) made steps 1.4x faster on an AVX512-BF16 CPU (docs/benchmarks.md); "auto"
    # picks it where the hardware has bfloat16, float32 elsewhere.
    precision: str = "float32"
    # Start from the weights of this checkpoint (fine-tuning; a path relative to the working
    # directory). Settings without weights of their own, such as model.views, may differ.
    init: str = ""

    def __post_init__(self) -> None:
        get_loss(self.loss)
        if self.optimizer not in ("adam", "adamw", "sgd"):
            raise DnaembedError(f"unknown optimizer {self.optimizer!r} (adam, adamw, sgd)")
        if self.schedule not in ("cosine", "constant"):
            raise DnaembedError(f"unknown schedule {self.schedule!r} (cosine, constant)")
        for name in ("batch_size", "steps", "val_pairs", "val_every"):
            if getattr(self, name) < 1:
                raise DnaembedError(f"train.{name} must be >= 1")
        for name in ("warmup_steps", "prefetch", "label_workers"):
            if getattr(self, name) < 0:
                raise DnaembedError(f"train.{name} must be >= 0")
        if self.lr <= 0:
            raise DnaembedError("train.lr must be > 0")
        if self.precision not in PRECISIONS:
            raise DnaembedError(
                f"unknown train.precision {self.precision!r} (known: {', '.join(PRECISIONS)})"
            )


#: The tables of a config and the dataclass each one builds.
SECTIONS = {
    "model": EncoderConfig,
    "pairs": PairConfig,
    "train": OptimConfig,
    "distributed": CommSettings,
}


@dataclass
class TrainConfig:
    """A whole training run as plain data; one TOML file per config in ``configs/``."""

    name: str = "run"
    seed: int = 0
    model: EncoderConfig = field(default_factory=EncoderConfig)
    pairs: PairConfig = field(default_factory=PairConfig)
    train: OptimConfig = field(default_factory=OptimConfig)
    distributed: CommSettings = field(default_factory=CommSettings)

    def to_dict(self) -> dict:
        """The config as nested plain dicts (as a checkpoint stores it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(
        cls, data: dict, origins: dict[str, str] | None = None, default: str = "config"
    ) -> TrainConfig:
        """Build from plain tables; ``origins`` (``section.key`` -> source) names the culprit."""
        origins = origins or {}
        unknown = sorted(set(data) - {"name", "seed", *SECTIONS})
        if unknown:
            where = [o for k, o in origins.items() if k.split(".")[0] in unknown] or [default]
            raise UsageError(
                f"{' with '.join(dict.fromkeys(where))}: unknown config entries: "
                f"{', '.join(unknown)}"
            )
        kwargs = {
            key: checked(data[key], hint, key, origins.get(key, default))
            for key, hint in (("name", str), ("seed", int))
            if key in data
        }
        for key, klass in SECTIONS.items():
            table = checked(data.get(key, {}), dict, key, origins.get(key, default))
            kwargs[key] = build(klass, table, key, origins, default)
        return cls(**kwargs)


@dataclass
class Layers:
    """A config's tables before they are built, and where each value came from."""

    data: dict
    origins: dict[str, str]
    source: str

    def set(self, key: str, value: object, origin: str) -> None:
        """Set ``section.key`` (dotted) to ``value``, recording ``origin``."""
        parts = key.split(".")
        target = self.data
        for depth, part in enumerate(parts[:-1], start=1):
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                # Named by where the value came from, not by the option that met it (a
                # config's `train = 5` was reported as "--label-workers 0: ...").
                table = ".".join(parts[:depth])
                raise UsageError(f"{self.origins.get(table, self.source)}: {table} is "
                                 f"{target!r}, not a table (so {origin} cannot set it)")
        target[parts[-1]] = value
        # Every table on the way is this origin's now: `--set train.lr.x=1` made train.lr a
        # table, and its error named "config".
        for depth in range(min(2, len(parts)), len(parts) + 1):
            self.origins[".".join(parts[:depth])] = origin

    def merge(self, tables: dict, origin: str, prefix: str = "") -> None:
        """Lay ``tables`` over these (a stage's ``[stage.train]`` etc.), leaf by leaf."""
        for key, value in tables.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and key in SECTIONS and not prefix:
                self.merge(value, origin, prefix=f"{path}.")
            else:
                self.set(path, copy.deepcopy(value), origin)

    def copy(self) -> Layers:
        """A copy whose tables can be changed without changing these."""
        return Layers(copy.deepcopy(self.data), dict(self.origins), self.source)

    def build(self) -> TrainConfig:
        """The config of these tables, each value checked (errors name its origin)."""
        return TrainConfig.from_dict(self.data, self.origins, self.source)


@dataclass(frozen=True)
class Override:
    """One ``section.key=value`` from the command line, and how the user wrote it."""

    key: str
    value: object
    label: str


def read_layers(path: str | Path | None) -> Layers:
    """A config file's tables (empty without a file), every leaf marked as the file's."""
    if path is None:
        return Layers({}, {}, "config")
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such config file")
    try:
        data = tomllib.loads(p.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    layers = Layers({}, {}, str(path))
    layers.merge({k: v for k, v in data.items() if k != "stage"}, str(path))
    if "stage" in data:
        layers.data["stage"] = data["stage"]
    return layers


def parse_overrides(items: list[str] | None = None, flags: dict | None = None) -> list[Override]:
    """``--set section.key=value`` items (TOML values) and typed option values, in order.

    ``flags`` maps ``section.key`` to the value of the option named after the key
    (``train.steps`` <- ``--steps``); None values are left out.
    """
    out = []
    for item in items or []:
        key, _, value = item.partition("=")
        if not key.strip() or "=" not in item:
            raise UsageError(f"--set {item!r} must look like section.key=value")
        out.append(Override(key.strip(), _parse_value(value.strip()), f"--set {item}"))
    options = []
    for key, value in (flags or {}).items():
        if value is not None:
            option = "--" + key.split(".")[-1].replace("_", "-")
            options.append(Override(key, value, f"{option} {value}"))
    _refuse_option_and_set(out, options)
    return out + options


def _refuse_option_and_set(items: list[Override], options: list[Override]) -> None:
    """A usage error for an option and a ``--set`` of one value: the option replaced the
    ``--set`` unchecked, wherever each stood (``--set train.batch_size=abc --batch-size 8``
    trained with 8 and never looked at 'abc'). ``--set`` items among themselves keep
    their order: the last one of a key wins, as written."""
    for option in options:
        for item in items:
            if _replaces(option.key, item) or _replaces(item.key, option):
                key = max(item.key, option.key, key=len)
                raise UsageError(f"{item.label} and {option.label} both set {key} "
                                 "(give one)")


def _replaces(key: str, earlier: Override) -> bool:
    """Whether setting ``key`` replaces all or part of what ``earlier`` set: the same key,
    the table that holds it, or a key inside the table it set."""
    if key == earlier.key or earlier.key.startswith(key + "."):
        return True
    if not key.startswith(earlier.key + "."):
        return False
    value = earlier.value
    for part in key[len(earlier.key) + 1 :].split("."):
        if not isinstance(value, dict) or part not in value:
            return False  # a new key beside the table's (or not a table: Layers.set says so)
        value = value[part]
    return True


def _parse_value(text: str):
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_config(
    path: str | Path | None, overrides: list[str] | None = None, flags: dict | None = None
) -> TrainConfig:
    """Read a TOML config and apply ``section.key=value`` overrides (values in TOML syntax).

    For a file of ``[[stage]]`` tables this is the last stage's config: the model the
    recipe ends with (:func:`dnaembed.train.stages.load_recipe` gives every stage).
    """
    from dnaembed.train.stages import load_recipe

    return load_recipe(path, overrides, flags).stages[-1].config


def config_to_toml(config: TrainConfig) -> str:
    """The resolved config as TOML (written beside the checkpoints)."""

    def fmt(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {fmt(x)}" for k, x in v.items()) + " }"
        return repr(v)

    d = config.to_dict()
    lines = [f"name = {fmt(d.pop('name'))}", f"seed = {d.pop('seed')}"]
    for section, values in d.items():
        lines.append(f"\n[{section}]")
        lines += [f"{k} = {fmt(v)}" for k, v in values.items() if v is not None]
    return "\n".join(lines) + "\n"
