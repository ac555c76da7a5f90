"""The settings of a training run: model, pairs, optimiser, schedule, as plain data.

A run is described by a TOML file (``configs/``) with ``[model]``, ``[pairs]``
and ``[train]`` tables, plus ``--set key=value`` overrides; the resolved config
is written into the run directory."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from dnaembed.errors import DnaembedError
from dnaembed.model.encoder import EncoderConfig
from dnaembed.model.inference import PRECISIONS
from dnaembed.train.ddp.comm import CommSettings
from dnaembed.train.losses import get_loss
from dnaembed.train.pairs import PairConfig


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
    prefetch: int = 4
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
        if self.lr <= 0:
            raise DnaembedError("train.lr must be > 0")
        if self.precision not in PRECISIONS:
            raise DnaembedError(
                f"unknown train.precision {self.precision!r} (known: {', '.join(PRECISIONS)})"
            )


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
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        sections = {
            "model": EncoderConfig,
            "pairs": PairConfig,
            "train": OptimConfig,
            "distributed": CommSettings,
        }
        known = {"name", "seed", *sections}
        unknown = set(data) - known
        if unknown:
            raise DnaembedError(f"unknown config entries: {', '.join(sorted(unknown))}")
        kwargs = {k: data[k] for k in ("name", "seed") if k in data}
        for key, klass in sections.items():
            section = data.get(key, {})
            names = {f.name for f in dataclasses.fields(klass)}
            bad = set(section) - names
            if bad:
                raise DnaembedError(f"unknown [{key}] settings: {', '.join(sorted(bad))}")
            try:
                kwargs[key] = klass(**section)
            except TypeError as e:
                raise DnaembedError(f"[{key}]: {e}") from None
        return cls(**kwargs)


def _parse_value(text: str):
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a TOML config and apply ``section.key=value`` overrides (values in TOML syntax)."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise DnaembedError(f"{path}: no such config file")
        try:
            data = tomllib.loads(p.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise DnaembedError(f"{path}: not valid TOML: {e}") from None
    for item in overrides or []:
        if "=" not in item:
            raise DnaembedError(f"override {item!r} must look like section.key=value")
        key, value = item.split("=", 1)
        parts = key.strip().split(".")
        target = data
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise DnaembedError(f"override {item!r}: {part} is not a table")
        target[parts[-1]] = _parse_value(value.strip())
    return TrainConfig.from_dict(data)


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
