"""What a training run saves and where it starts from: checkpoints, resume, init.

``best.pt`` holds the weights of the lowest validation MAE on near pairs;
``last.pt`` the latest weights plus what ``--resume`` needs (optimizer state, the
step, the best MAE so far, the running loss). Files are read on rank 0 and
handed to every rank, so a bad file fails every rank alike (no hang).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from dnaembed.errors import DnaembedError
from dnaembed.log import logger
from dnaembed.model.checkpoint import load_checkpoint, save_checkpoint
from dnaembed.model.encoder import Encoder
from dnaembed.train.config import TrainConfig
from dnaembed.train.ddp.context import DistContext, broadcast_object


@dataclass(frozen=True)
class StartState:
    """Where a resumed run picks up: optimizer steps done, best MAE so far, running loss,
    and the seconds of training its directory has seen."""

    step: int = 0
    best_metric: float = math.inf
    running_loss: float | None = None
    seconds: float = 0.0


def training_record(config: TrainConfig, ctx: DistContext, step: int) -> dict:
    """The ``training`` entry of a checkpoint: config, step, ranks, torch version."""
    return {
        "config": config.to_dict(),
        "step": step,
        "world_size": ctx.world_size,
        "torch": torch.__version__,
    }


def save_best(path: Path, model: Encoder, metrics: dict, record: dict) -> None:
    """The weights of the best validation so far, with its metrics."""
    save_checkpoint(path, model, metrics=metrics, training=record)


def save_last(path: Path, model: Encoder, optimizer: torch.optim.Optimizer, metrics: dict,
              record: dict, state: StartState) -> None:
    """The latest weights and everything a resume needs."""
    save_checkpoint(
        path,
        model,
        metrics=metrics,
        training=record,
        extra_state={
            "optimizer": optimizer.state_dict(),
            "step": state.step,
            "best_metric": state.best_metric,
            "running_loss": state.running_loss,
            "seconds": state.seconds,
        },
    )


def read_on_main(ctx: DistContext, read: Callable[[], tuple]) -> tuple:
    """``read()`` on rank 0, its result (or its error, raised) on every rank.

    On several machines only rank 0's run directory may hold the file, and a bad file
    must fail every rank alike (no hang)."""
    state: tuple = ("error", DnaembedError(""))
    if ctx.is_main:
        try:
            state = ("ok", *read())
        except DnaembedError as e:
            state = ("error", e)
    state = broadcast_object(ctx, state)
    if state[0] == "error":
        raise state[1]
    return state[1:]


def restore(path: Path, model: Encoder, optimizer: torch.optim.Optimizer,
            ctx: DistContext, out_dir: Path) -> StartState:
    """Load ``path`` (a ``last.pt``) into ``model`` and ``optimizer``; where it left off.

    The seconds carry on only within one directory: a stage that continues another
    stage's run counts its own."""

    def read() -> tuple:
        if not path.is_file():
            raise DnaembedError(f"--resume: {path} does not exist (nothing to resume)")
        ckpt = load_checkpoint(path, device="cpu")
        if ckpt.model.config != model.config:
            raise DnaembedError(f"--resume: {path} was trained with a different model config")
        saved_world = (ckpt.training or {}).get("world_size", 1)
        return ckpt.model.state_dict(), ckpt.extra_state or {}, saved_world

    weights, extra, saved_world = read_on_main(ctx, read)
    model.load_state_dict(weights)
    if "optimizer" in extra:
        optimizer.load_state_dict(extra["optimizer"])
    state = StartState(
        int(extra.get("step", 0)),
        float(extra.get("best_metric", math.inf)),
        extra.get("running_loss"),
        float(extra.get("seconds", 0.0)) if path.resolve().parent == out_dir.resolve() else 0.0,
    )
    if ctx.is_main:
        logger.info(
            "resuming from %s at step %d (saved by %s rank(s), resumed on %d)",
            path, state.step, saved_world, ctx.world_size,
        )
    return state


def initialise(path: Path, model: Encoder, ctx: DistContext) -> None:
    """Start from another run's weights (``train.init``); the optimizer starts afresh."""

    def read() -> tuple:
        try:
            weights = load_checkpoint(path, device="cpu").model.state_dict()
        except DnaembedError as e:
            raise DnaembedError(f"train.init: {e}") from None
        ours = model.state_dict()
        if set(weights) != set(ours) or any(weights[k].shape != ours[k].shape for k in ours):
            raise DnaembedError(
                f"train.init: {path} has other weights than this model config (only settings "
                "without weights of their own, such as model.views, may differ)"
            )
        return (weights,)

    (weights,) = read_on_main(ctx, read)
    model.load_state_dict(weights)
    if ctx.is_main:
        logger.info("starting from the weights of %s", path)
