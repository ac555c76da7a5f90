"""The training loop: pairs from the channel, Siamese encoder, regression on edit distance.

The same function trains in one process or as one rank of a torchrun job
(:mod:`dnaembed.train.ddp.context` decides; this module does not care). Each rank
draws its own pairs, batch by batch from seeds of (seed, stage, rank, step)
(:mod:`dnaembed.train.batches`), so a resumed run sees the batches an
uninterrupted one would, and a checkpoint from N ranks resumes on any number of
ranks. Rank 0 alone validates, logs, shows progress and writes checkpoints.

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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from dnaembed.errors import DnaembedError, UsageError
from dnaembed.evaluate.embedding import approximation_metrics
from dnaembed.log import logger, progress_bar
from dnaembed.model.checkpoint import load_checkpoint
from dnaembed.model.encoder import Encoder, count_parameters, squared_distance
from dnaembed.model.inference import autocast, resolve_precision
from dnaembed.train.batches import BatchSource, BatchStream, open_stream
from dnaembed.train.config import OptimConfig, TrainConfig, config_to_toml
from dnaembed.train.ddp.comm import wrap_ddp
from dnaembed.train.ddp.context import DistContext, setup, teardown
from dnaembed.train.losses import get_loss
from dnaembed.train.pairs import PairBatch, PairSampler
from dnaembed.train.state import (
    StartState,
    initialise,
    read_on_main,
    restore,
    save_best,
    save_last,
    training_record,
)


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


@dataclass
class _Run:
    """What a run carries from step to step (the model, its optimizer, its batches, its clock)."""

    config: TrainConfig
    ctx: DistContext
    out_dir: Path
    model: Encoder
    ddp_model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    comm: object
    loss_fn: Callable
    batches: BatchStream
    val: PairBatch | None  # rank 0 only
    start: StartState
    step: int = 0  # optimizer steps done
    best_metric: float = math.inf
    running: float | None = None  # smoothed training loss
    lr: float = 0.0
    best: dict = field(default_factory=dict)
    last: dict = field(default_factory=dict)
    bar: object = None
    t0: float = field(default_factory=time.perf_counter)
    step_seconds: float = 0.0
    wait_seconds: float = 0.0


def _keep_freed_memory() -> None:
    """Ask glibc to keep freed blocks instead of returning them to the OS.

    Every step allocates and frees the same large activations; with glibc's
    defaults each one is a fresh mmap and page faults cost ~15% of a CPU step.
    """
    from dnaembed.allocator import set_allocator_thresholds

    set_allocator_thresholds(1 << 30, 1 << 30)


@contextlib.contextmanager
def training_context(device: str = "auto") -> Iterator[DistContext]:
    """This process's place in the job (one process, or a torchrun rank), for one or more runs."""
    from dnaembed.model.checkpoint import resolve_device

    _keep_freed_memory()
    ctx = setup(resolve_device(device))
    try:
        yield ctx
    except BaseException:
        teardown(ctx, finished=False)
        raise
    teardown(ctx)


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
    out_dir = Path(out_dir)
    with training_context(device) as ctx:
        if not resume:
            read_on_main(ctx, lambda: _refuse_an_earlier_run(out_dir))
        return train_on(ctx, config, out_dir, resume_from=out_dir / "last.pt" if resume else None,
                        max_seconds=max_seconds)


def _refuse_an_earlier_run(out_dir: Path) -> tuple:
    """A run into a directory holding another, without --resume, is refused: it replaced
    the checkpoints and appended to the other's metrics.jsonl, two runs' steps in one file.
    Rank 0's directory is the run's (:func:`read_on_main` gives its answer to every rank)."""
    held = [name for name in ("last.pt", "best.pt", "metrics.jsonl") if (out_dir / name).exists()]
    if held:
        raise UsageError(f"{out_dir} holds a training run ({', '.join(held)}): --resume to go "
                         "on with it, or another -o (or remove it) to start over")
    return ()


def train_on(
    ctx: DistContext,
    config: TrainConfig,
    out_dir: Path,
    *,
    stage: int = 0,
    resume_from: Path | None = None,
    max_seconds: float | None = None,
) -> TrainResult:
    """One run in ``ctx``: stage ``stage`` of a recipe (it seeds the batches), optionally
    continuing ``resume_from`` (a ``last.pt``: weights, optimizer, step)."""
    run = _start(ctx, config, out_dir, stage, resume_from)
    try:
        while run.step < config.train.steps:
            _step(run)
            stop = _out_of_time(run, max_seconds)
            if _validation_due(run, stop):
                metrics = _validate(run)
                _log_metrics(run, metrics)
                _save_checkpoints(run, metrics)
            if stop:
                break
    finally:
        run.batches.close()
        if run.bar is not None:
            run.bar.close()
        # The DDP wrapper (and its comm hook) holds the process group: dropped here, not
        # left to a reference cycle that teardown's collection might miss.
        run.ddp_model = run.model
    return _finish(run)


def _start(ctx: DistContext, config: TrainConfig, out_dir: Path, stage: int,
           resume_from: Path | None) -> _Run:
    """Model, optimizer (restored or initialised), DDP wrapper, batches, validation set."""
    cfg, accum = config.train, config.distributed.grad_accum
    torch.manual_seed(config.seed)
    model = Encoder(config.model).to(ctx.device)
    optimizer = _make_optimizer(model, cfg)
    start = StartState()
    if resume_from is not None:
        start = restore(resume_from, model, optimizer, ctx, out_dir)
        if start.step >= cfg.steps:
            # Nothing to train: the run printed "best val MAE nan ... at step None" and
            # rewrote config.toml with the smaller --steps (every rank has the step).
            raise UsageError(f"--resume: {resume_from} is at step {start.step}, not below "
                             f"--steps {cfg.steps}: nothing to train (a larger --steps goes on)")
    elif cfg.init:
        initialise(Path(cfg.init), model, ctx)
    ddp_model, comm = wrap_ddp(model, ctx, config.distributed)
    source = BatchSource(config.pairs, config.seed, stage, ctx.rank, cfg.batch_size,
                         config.model.window)
    batches = open_stream(source, start.step * accum, cfg.steps * accum,
                          workers=cfg.label_workers, prefetch=cfg.prefetch)
    run = _Run(config, ctx, out_dir, model, ddp_model, optimizer, comm, get_loss(cfg.loss),
               batches, validation_set(config) if ctx.is_main else None, start,
               step=start.step, best_metric=start.best_metric, running=start.running_loss)
    if ctx.is_main:
        _announce(run)
        run.bar = progress_bar(total=cfg.steps, initial=start.step, desc="train", unit="step")
    return run


def _announce(run: _Run) -> None:
    """Create the run directory, write the resolved config, log what will run."""
    config, ctx = run.config, run.ctx
    # Created only now: a refused --resume or train.init leaves no empty run directory.
    run.out_dir.mkdir(parents=True, exist_ok=True)
    (run.out_dir / "config.toml").write_text(config_to_toml(config))
    logger.info(
        "training %s: %d parameters, %d steps of %d sequences x %d rank(s) x %d accumulation, "
        "loss %s, device %s, %s forward, batches drawn %s",
        config.name,
        count_parameters(run.model),
        config.train.steps,
        config.train.batch_size,
        ctx.world_size,
        config.distributed.grad_accum,
        config.train.loss,
        ctx.device,
        resolve_precision(config.train.precision, ctx.device),
        f"by {config.train.label_workers} worker process(es)" if config.train.label_workers
        else "in this process",
    )


def _step(run: _Run) -> None:
    """One optimizer step: the learning rate, ``grad_accum`` micro-steps, clip, update."""
    cfg, accum = run.config.train, run.config.distributed.grad_accum
    run.ddp_model.train()
    run.lr = cfg.lr * lr_factor(run.step, cfg)
    for group in run.optimizer.param_groups:
        group["lr"] = run.lr
    t_step = time.perf_counter()
    for micro in range(accum):
        loss = _micro_step(run, sync=micro == accum - 1 or not run.ctx.distributed)
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.step_seconds += time.perf_counter() - t_step
    value = float(loss.detach()) * accum
    if not math.isfinite(value):
        raise DnaembedError(
            f"training diverged at step {run.step + 1} (loss {value}); "
            "lower train.lr or raise train.warmup_steps"
        )
    run.running = value if run.running is None else 0.98 * run.running + 0.02 * value
    run.step += 1
    if run.bar is not None:
        run.bar.update(1)


def _micro_step(run: _Run, sync: bool) -> torch.Tensor:
    """Forward and backward on one batch; DDP all-reduces the gradients only when ``sync``."""
    device, accum = run.ctx.device, run.config.distributed.grad_accum
    t_wait = time.perf_counter()
    batch = run.batches.next()
    run.wait_seconds += time.perf_counter() - t_wait
    seqs = torch.from_numpy(batch.codes).to(device, non_blocking=True)
    left = torch.from_numpy(batch.left).to(device)
    right = torch.from_numpy(batch.right).to(device)
    target = torch.from_numpy(batch.distance).to(device)
    with contextlib.nullcontext() if sync else run.ddp_model.no_sync():
        with autocast(device, run.config.train.precision):
            emb = run.ddp_model(seqs)
        # Distances and loss in float32: a bfloat16 difference of two vectors
        # ~80 edits apart would lose the near pairs' precision.
        emb = emb.float()
        # index_select, not emb[left]: on CPU the backward of advanced indexing accumulates
        # a row used by several pairs in thread order (different sums run to run), that of
        # index_select in index order, so a resumed run repeats an uninterrupted one exactly.
        pred = squared_distance(emb.index_select(0, left), emb.index_select(0, right))
        loss = run.loss_fn(pred, target).mean() / accum
        loss.backward()
    return loss


def _out_of_time(run: _Run, max_seconds: float | None) -> bool:
    """Past the time budget: every rank stops together (the max of the ranks' wishes)."""
    if max_seconds is None:
        return False
    mine = time.perf_counter() - run.t0 > max_seconds
    if not run.ctx.distributed:
        return mine
    flag = torch.tensor([1.0 if mine else 0.0], device=run.ctx.device)
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    return bool(flag.item() > 0)


def _validation_due(run: _Run, stop: bool) -> bool:
    cfg = run.config.train
    return run.ctx.is_main and (run.step % cfg.val_every == 0 or run.step == cfg.steps or stop)


def _validate(run: _Run) -> dict:
    """Metrics on the held-out pairs, with the loss, the schedule and the step's timing."""
    cfg, accum = run.config.train, run.config.distributed.grad_accum
    metrics = approximation_metrics(predict_pairs(run.model, run.val), run.val.distance)
    metrics.update(
        step=run.step,
        loss=run.running,
        lr=run.lr,
        seconds=round(time.perf_counter() - run.t0, 2),
        seqs_seen=run.step * cfg.batch_size * run.ctx.world_size * accum,
        **_timing(run, cfg.batch_size * accum),
    )
    return metrics


def _log_metrics(run: _Run, metrics: dict) -> None:
    """A line in metrics.jsonl, the progress bar's figures and a log line."""
    run.last = metrics
    with open(run.out_dir / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps(metrics) + "\n")
    if run.bar is not None:
        run.bar.set_postfix(loss=f"{run.running:.3f}", mae40=f"{metrics['mae_near']:.2f}")
    logger.info(
        "step %d: loss %.3f, val MAE(d<=40) %.3f, bias %.3f, Spearman %.4f",
        run.step,
        run.running,
        metrics["mae_near"],
        metrics["bias_near"],
        metrics["spearman"],
    )


def _save_checkpoints(run: _Run, metrics: dict) -> None:
    """best.pt when the validation improved; last.pt always."""
    record = training_record(run.config, run.ctx, run.step)
    if metrics["mae_near"] < run.best_metric:
        run.best_metric, run.best = metrics["mae_near"], metrics
        save_best(run.out_dir / "best.pt", run.model, metrics, record)
    save_last(run.out_dir / "last.pt", run.model, run.optimizer, metrics, record,
              StartState(run.step, run.best_metric, run.running,
                         run.start.seconds + time.perf_counter() - run.t0))


def _finish(run: _Run) -> TrainResult:
    """The validation plot, the closing log line and the result (rank 0's figures)."""
    seconds = time.perf_counter() - run.t0
    if run.ctx.is_main:
        if not run.best:
            run.best = run.last
        _plot(run.model, run.val, run.out_dir / "validation.png", run.out_dir / "best.pt")
        logger.info(
            "done: %d steps in %.0f s; best val MAE(d<=40) %.3f",
            run.step - run.start.step,
            seconds,
            run.best.get("mae_near", float("nan")),
        )
    timing = {k: v for k, v in run.last.items() if k.startswith(("time_", "comm_", "sampler_"))}
    return TrainResult(run.step, run.best, run.last, seconds, run.out_dir, timing)


def _timing(run: _Run, seqs_per_step: int) -> dict:
    steps = max(run.step - run.start.step, 1)
    comm_per_step = run.comm.per_step(steps)
    step_ms = 1000 * run.step_seconds / steps
    wait_ms = 1000 * run.wait_seconds / steps
    # A step = waiting for pairs + communication the backward pass did not hide
    # (incl. waiting for the slowest rank) + compute (forward, backward, optimizer).
    comm_ms = comm_per_step["comm_exposed_ms"]
    return {
        "time_step_ms": step_ms,
        "time_wait_ms": wait_ms,
        "time_comm_ms": comm_ms,
        "time_compute_ms": max(0.0, step_ms - wait_ms - comm_ms),
        "train_seqs_per_s": seqs_per_step * steps / run.step_seconds if run.step_seconds else 0.0,
        "sampler_pairs_per_s": run.batches.pairs_per_second,
        **comm_per_step,
    }


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
