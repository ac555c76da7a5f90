"""The training loop: pairs from the channel, Siamese encoder, regression on edit distance.

The same function trains in one process or as one rank of a torchrun job
(:mod:`dnaembed.train.ddp.context` decides; this module does not care). Each rank
draws its own pairs (seeded by seed, rank and the step it starts at), so a
checkpoint from N ranks resumes on any number of ranks. Rank 0 alone
validates, logs, shows progress and writes checkpoints.

Outputs in the run directory: ``best.pt`` (lowest validation MAE on near
pairs), ``last.pt`` (with optimizer state, for ``--resume``),
``metrics.jsonl`` (one JSON object per validation), ``config.toml`` (the
resolved config) and ``validation.png`` (predicted vs true distance; needs
matplotlib).
"""

from __future__ import annotations

import contextlib
import json
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from dnaembed.errors import DnaembedError
from dnaembed.evaluate.embedding import approximation_metrics
from dnaembed.log import logger, progress_bar
from dnaembed.model.checkpoint import load_checkpoint, save_checkpoint
from dnaembed.model.encoder import Encoder, count_parameters, squared_distance
from dnaembed.model.inference import autocast, resolve_precision
from dnaembed.train.config import OptimConfig, TrainConfig, config_to_toml
from dnaembed.train.ddp.comm import wrap_ddp
from dnaembed.train.ddp.context import DistContext, broadcast_object, setup, teardown
from dnaembed.train.losses import get_loss
from dnaembed.train.pairs import PairBatch, PairSampler, make_sampler


class _Prefetcher:
    """Draws batches in a background thread so that label generation overlaps the step."""

    def __init__(self, sampler, batch_size: int, window: int, depth: int) -> None:
        self.sampler, self.batch_size, self.window = sampler, batch_size, window
        self.depth = depth
        self.sample_seconds = 0.0
        self.samples = 0
        if depth > 0:
            self.queue: queue.Queue = queue.Queue(maxsize=depth)
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()

    def _draw(self):
        t = time.perf_counter()
        batch = self.sampler.sample_train(self.batch_size)
        codes = batch.padded(self.window)
        self.sample_seconds += time.perf_counter() - t
        self.samples += batch.pairs
        return codes, batch.left, batch.right, batch.distance

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                item = self._draw()
                while not self.stop.is_set():
                    try:
                        self.queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except Exception as e:  # noqa: BLE001 - handed to the consumer, raised there
            self.queue.put(e)

    def next(self):
        if self.depth == 0:
            return self._draw()
        item = self.queue.get()
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        if self.depth > 0:
            self.stop.set()
            self.thread.join(timeout=5)


def lr_factor(step: int, cfg: OptimConfig) -> float:
    """Linear warm-up, then cosine decay to ``min_lr_factor`` (or constant)."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    return cfg.min_lr_factor + (1 - cfg.min_lr_factor) * 0.5 * (1 + math.cos(math.pi * progress))


def validation_set(config: TrainConfig) -> PairBatch:
    """The fixed held-out pairs: same mixture, a seed no training rank uses."""
    return PairSampler(config.pairs, seed=[config.seed, 1_000_003]).sample(config.train.val_pairs)


@torch.no_grad()
def predict_pairs(model: Encoder, batch: PairBatch, batch_size: int = 2048) -> np.ndarray:
    """Predicted squared distances for the pairs of ``batch``."""
    from dnaembed.model.inference import embed_codes

    a, b = batch.padded(model.config.window)
    ea = embed_codes(model, a, batch_size=batch_size, precision="float32")
    eb = embed_codes(model, b, batch_size=batch_size, precision="float32")
    return ((ea - eb) ** 2).sum(axis=1)


def _make_optimizer(model: torch.nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(
        model.parameters(), lr=cfg.lr, momentum=0.9, weight_decay=cfg.weight_decay
    )


@dataclass
class TrainResult:
    """What a run ended with (rank 0's view)."""

    steps: int
    best: dict
    last: dict
    seconds: float
    out_dir: Path
    timing: dict = field(default_factory=dict)


def _keep_freed_memory() -> None:
    """Ask glibc to keep freed blocks instead of returning them to the OS.

    Every step allocates and frees the same large activations; with glibc's
    defaults each one is a fresh mmap and page faults cost ~15% of a CPU step.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 1 << 30)
        libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to tune


def train(
    config: TrainConfig,
    out_dir: str | Path,
    *,
    device: str = "auto",
    resume: bool = False,
    max_seconds: float | None = None,
) -> TrainResult:
    """Train an encoder per ``config``; checkpoints and metrics go to ``out_dir``.

    Under torchrun every rank calls this; ``max_seconds`` stops early at a
    validation boundary (the budget used by benchmark scripts).
    """
    from dnaembed.model.checkpoint import resolve_device

    _keep_freed_memory()
    ctx = setup(resolve_device(device))
    try:
        return _train(config, Path(out_dir), ctx, resume, max_seconds)
    finally:
        teardown(ctx)


def _train(
    config: TrainConfig, out_dir: Path, ctx: DistContext, resume: bool, max_seconds: float | None
) -> TrainResult:
    cfg = config.train
    torch.manual_seed(config.seed)
    model = Encoder(config.model).to(ctx.device)
    optimizer = _make_optimizer(model, cfg)
    start_step, best_metric, history = 0, math.inf, []
    if resume:
        start_step, best_metric = _restore(out_dir / "last.pt", model, optimizer, ctx)
    elif cfg.init:
        _initialise(Path(cfg.init), model, ctx)
    ddp_model, comm = wrap_ddp(model, ctx, config.distributed)
    loss_fn = get_loss(cfg.loss)
    sampler = make_sampler(config.pairs, seed=[config.seed, ctx.rank, start_step])
    prefetch = _Prefetcher(sampler, cfg.batch_size, config.model.window, cfg.prefetch)
    val = validation_set(config) if ctx.is_main else None
    if ctx.is_main:
        # Created only now: a refused --resume or train.init leaves no empty run directory.
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.toml").write_text(config_to_toml(config))
        logger.info(
            "training %s: %d parameters, %d steps of %d sequences x %d rank(s) x %d accumulation, "
            "loss %s, device %s, %s forward",
            config.name,
            count_parameters(model),
            cfg.steps,
            cfg.batch_size,
            ctx.world_size,
            config.distributed.grad_accum,
            cfg.loss,
            ctx.device,
            resolve_precision(cfg.precision, ctx.device),
        )
    accum = config.distributed.grad_accum
    bar = (
        progress_bar(total=cfg.steps, initial=start_step, desc="train", unit="step")
        if ctx.is_main
        else None
    )
    t0 = time.perf_counter()
    step_seconds = wait_seconds = 0.0
    last_metrics: dict = {}
    best: dict = {}
    step = start_step
    running = None
    try:
        for step in range(start_step, cfg.steps):
            ddp_model.train()
            lr = cfg.lr * lr_factor(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            t_step = time.perf_counter()
            for micro in range(accum):
                t_wait = time.perf_counter()
                codes, left, right, dist_true = prefetch.next()
                wait_seconds += time.perf_counter() - t_wait
                seqs = torch.from_numpy(codes).to(ctx.device, non_blocking=True)
                left = torch.from_numpy(left).to(ctx.device)
                right = torch.from_numpy(right).to(ctx.device)
                target = torch.from_numpy(dist_true).to(ctx.device)
                sync = (
                    contextlib.nullcontext()
                    if (micro == accum - 1 or not ctx.distributed)
                    else ddp_model.no_sync()
                )
                with sync:
                    with autocast(ctx.device, cfg.precision):
                        emb = ddp_model(seqs)
                    # Distances and loss in float32: a bfloat16 difference of two vectors
                    # ~80 edits apart would lose the near pairs' precision.
                    emb = emb.float()
                    pred = squared_distance(emb[left], emb[right])
                    loss = loss_fn(pred, target).mean() / accum
                    loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step_seconds += time.perf_counter() - t_step
            value = float(loss.detach()) * accum
            if not math.isfinite(value):
                raise DnaembedError(
                    f"training diverged at step {step + 1} (loss {value}); "
                    "lower train.lr or raise train.warmup_steps"
                )
            running = value if running is None else 0.98 * running + 0.02 * value
            done = step + 1
            if bar is not None:
                bar.update(1)
            at_end = done == cfg.steps
            stop = max_seconds is not None and _stop_agreed(
                ctx, time.perf_counter() - t0 > max_seconds
            )
            if ctx.is_main and (done % cfg.val_every == 0 or at_end or stop):
                metrics = approximation_metrics(predict_pairs(model, val), val.distance)
                metrics.update(
                    step=done,
                    loss=running,
                    lr=lr,
                    seconds=round(time.perf_counter() - t0, 2),
                    seqs_seen=done * cfg.batch_size * ctx.world_size * accum,
                    **_timing(
                        prefetch,
                        step_seconds,
                        wait_seconds,
                        done - start_step,
                        comm,
                        cfg.batch_size * accum,
                    ),
                )
                history.append(metrics)
                last_metrics = metrics
                with open(out_dir / "metrics.jsonl", "a") as fh:
                    fh.write(json.dumps(metrics) + "\n")
                improved = metrics["mae_near"] < best_metric
                if improved:
                    best_metric, best = metrics["mae_near"], metrics
                    save_checkpoint(
                        out_dir / "best.pt",
                        model,
                        metrics=metrics,
                        training=_training_record(config, ctx, done),
                    )
                save_checkpoint(
                    out_dir / "last.pt",
                    model,
                    metrics=metrics,
                    training=_training_record(config, ctx, done),
                    extra_state={
                        "optimizer": optimizer.state_dict(),
                        "step": done,
                        "best_metric": best_metric,
                    },
                )
                if bar is not None:
                    bar.set_postfix(loss=f"{running:.3f}", mae40=f"{metrics['mae_near']:.2f}")
                logger.info(
                    "step %d: loss %.3f, val MAE(d<=40) %.3f, bias %.3f, Spearman %.4f",
                    done,
                    running,
                    metrics["mae_near"],
                    metrics["bias_near"],
                    metrics["spearman"],
                )
            if stop:
                break
    finally:
        prefetch.close()
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - t0
    if ctx.is_main:
        if not best:
            best = last_metrics
        _plot(model, val, out_dir / "validation.png", out_dir / "best.pt")
        logger.info(
            "done: %d steps in %.0f s; best val MAE(d<=40) %.3f",
            step + 1 - start_step,
            seconds,
            best.get("mae_near", float("nan")),
        )
    timing = {k: v for k, v in last_metrics.items() if k.startswith(("time_", "comm_", "sampler_"))}
    return TrainResult(step + 1, best, last_metrics, seconds, out_dir, timing)


def _stop_agreed(ctx: DistContext, mine: bool) -> bool:
    """Every rank stops together (the max of the ranks' wishes)."""
    if not ctx.distributed:
        return mine
    flag = torch.tensor([1.0 if mine else 0.0], device=ctx.device)
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    return bool(flag.item() > 0)


def _timing(
    prefetch: _Prefetcher,
    step_seconds: float,
    wait_seconds: float,
    steps: int,
    comm,
    seqs_per_step: int,
) -> dict:
    steps = max(steps, 1)
    sampler_rate = prefetch.samples / prefetch.sample_seconds if prefetch.sample_seconds else 0.0
    comm_per_step = comm.per_step(steps)
    step_ms = 1000 * step_seconds / steps
    wait_ms = 1000 * wait_seconds / steps
    # A step = waiting for pairs + communication the backward pass did not hide
    # (incl. waiting for the slowest rank) + compute (forward, backward, optimizer).
    comm_ms = comm_per_step["comm_exposed_ms"]
    return {
        "time_step_ms": step_ms,
        "time_wait_ms": wait_ms,
        "time_comm_ms": comm_ms,
        "time_compute_ms": max(0.0, step_ms - wait_ms - comm_ms),
        "train_seqs_per_s": seqs_per_step * steps / step_seconds if step_seconds else 0.0,
        "sampler_pairs_per_s": sampler_rate,
        **comm_per_step,
    }


def _training_record(config: TrainConfig, ctx: DistContext, step: int) -> dict:
    return {
        "config": config.to_dict(),
        "step": step,
        "world_size": ctx.world_size,
        "torch": torch.__version__,
    }


def _read_on_main(ctx: DistContext, read: Callable[[], tuple]) -> tuple:
    """``read()`` on rank 0, its result (or its error, raised) on every rank.

    On several machines only rank 0's run directory may hold the file, and a bad file
    must fail every rank alike (no hang)."""
    state: tuple = ("error", "")
    if ctx.is_main:
        try:
            state = ("ok", *read())
        except DnaembedError as e:
            state = ("error", str(e))
    state = broadcast_object(ctx, state)
    if state[0] == "error":
        raise DnaembedError(state[1])
    return state[1:]


def _restore(path: Path, model: Encoder, optimizer, ctx: DistContext) -> tuple[int, float]:
    def read() -> tuple:
        if not path.is_file():
            raise DnaembedError(f"--resume: {path} does not exist (nothing to resume)")
        ckpt = load_checkpoint(path, device="cpu")
        if ckpt.model.config != model.config:
            raise DnaembedError(f"--resume: {path} was trained with a different model config")
        saved_world = (ckpt.training or {}).get("world_size", 1)
        return ckpt.model.state_dict(), ckpt.extra_state or {}, saved_world

    weights, extra, saved_world = _read_on_main(ctx, read)
    model.load_state_dict(weights)
    if "optimizer" in extra:
        optimizer.load_state_dict(extra["optimizer"])
    step = int(extra.get("step", 0))
    if ctx.is_main:
        logger.info(
            "resuming from %s at step %d (saved by %s rank(s), resumed on %d)",
            path, step, saved_world, ctx.world_size,
        )
    return step, float(extra.get("best_metric", math.inf))


def _initialise(path: Path, model: Encoder, ctx: DistContext) -> None:
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

    (weights,) = _read_on_main(ctx, read)
    model.load_state_dict(weights)
    if ctx.is_main:
        logger.info("starting from the weights of %s", path)


def _plot(model: Encoder, val: PairBatch, path: Path, best_path: Path) -> None:
    """Predicted vs true distance on the validation set, for the best checkpoint."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.info("matplotlib not installed: no %s (pip install 'dnaembed[plot]')", path.name)
        return
    from dnaembed.io.atomic import atomic_path

    best = load_checkpoint(best_path).model if best_path.is_file() else model
    pred = predict_pairs(best, val)
    fig, ax = plt.subplots(figsize=(5, 5), dpi=110)
    ax.scatter(val.distance, pred, s=2, alpha=0.3)
    top = float(max(val.distance.max(), pred.max()))
    ax.plot([0, top], [0, top], color="k", lw=0.8)
    ax.set_xlabel("Levenshtein distance")
    ax.set_ylabel("squared embedding distance")
    m = approximation_metrics(pred, val.distance)
    ax.set_title(f"MAE(d<=40) {m['mae_near']:.2f}  Spearman {m['spearman']:.3f}")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
