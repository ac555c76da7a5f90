"""Gradient communication for DDP: the hooks, bucketing, and what they cost.

Hooks (PyTorch's own, from ``torch.distributed.algorithms.ddp_comm_hooks``):

* ``allreduce``: plain fp32 all-reduce (DDP's default);
* ``fp16`` / ``bf16``: gradients cast to 16 bits for the all-reduce (2x fewer bytes);
* ``powersgd``: rank-r low-rank compression of each gradient matrix (Vogels et
  al. 2019), with error feedback; vanilla all-reduce for the first
  ``start_iter`` steps, as PyTorch recommends.

Every hook is wrapped by :class:`CountingHook`, which counts the bytes each rank
hands to the collective per step (payload, before the ring algorithm's
``2(N-1)/N`` factor) and how long the bucket's communication was in flight.

Known limits on torch 2.13 with gloo: PowerSGD aborts when the gradients span
more than one bucket, so with gloo the bucket is sized to hold every gradient
(an explicit smaller ``--bucket-cap-mb`` is refused); ``batched_powerSGD_hook``
is broken and not offered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel

from dnaembed.distributed import DistContext
from dnaembed.errors import DnaembedError

HOOKS = ("allreduce", "fp16", "bf16", "powersgd")


@dataclass
class CommSettings:
    """Communication options of a DDP run (the ``[distributed]`` table of a config)."""

    comm_hook: str = "allreduce"
    powersgd_rank: int = 2
    powersgd_start_iter: int = 10
    bucket_cap_mb: float | None = None
    grad_accum: int = 1

    def __post_init__(self) -> None:
        if self.comm_hook not in HOOKS:
            raise DnaembedError(
                f"unknown communication hook {self.comm_hook!r} (known: {', '.join(HOOKS)})"
            )
        if self.powersgd_rank < 1:
            raise DnaembedError(f"PowerSGD rank must be >= 1, got {self.powersgd_rank}")
        if self.bucket_cap_mb is not None and self.bucket_cap_mb <= 0:
            raise DnaembedError(f"bucket cap must be > 0 MB, got {self.bucket_cap_mb}")
        if self.grad_accum < 1:
            raise DnaembedError(f"grad accumulation must be >= 1, got {self.grad_accum}")


@dataclass
class CommStats:
    """Counters kept by :class:`CountingHook` (this rank only)."""

    payload_bytes: int = 0
    raw_bytes: int = 0
    buckets: int = 0
    busy_seconds: float = 0.0
    _pending: list = field(default_factory=list, repr=False)

    def snapshot(self) -> tuple[int, int, float]:
        return self.payload_bytes, self.raw_bytes, self.busy_seconds

    @property
    def compression(self) -> float:
        """Raw fp32 gradient bytes per byte sent (1.0 for plain all-reduce)."""
        return self.raw_bytes / self.payload_bytes if self.payload_bytes else 1.0


class CountingHook:
    """Wraps a DDP communication hook and counts what it sends."""

    def __init__(self, name: str, inner, state, stats: CommStats) -> None:
        self.name = name
        self.inner = inner
        self.state = state
        self.stats = stats

    def __call__(self, state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buffer = bucket.buffer()
        raw = buffer.numel() * 4
        if self.name == "powersgd":
            before = self.state.total_numel_after_compression
            in_warmup = self.state.iter < self.state.start_powerSGD_iter
            fut = self.inner(self.state, bucket)
            sent = raw if in_warmup else (self.state.total_numel_after_compression - before) * 4
        else:
            fut = self.inner(self.state, bucket)
            sent = buffer.numel() * (2 if self.name in ("fp16", "bf16") else buffer.element_size())
        self.stats.payload_bytes += sent
        self.stats.raw_bytes += raw
        self.stats.buckets += 1
        start = time.perf_counter()

        def done(f):
            self.stats.busy_seconds += time.perf_counter() - start
            return f.value()

        return fut.then(done)


def gradient_megabytes(model: torch.nn.Module) -> float:
    """Size of all trainable gradients in MB (fp32)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad) * 4 / 2**20


def wrap_ddp(
    model: torch.nn.Module, ctx: DistContext, settings: CommSettings
) -> tuple[torch.nn.Module, CommStats]:
    """Wrap ``model`` in DDP with the chosen hook; single-process runs get the model back."""
    stats = CommStats()
    if not ctx.distributed:
        return model, stats
    bucket_cap = settings.bucket_cap_mb
    grad_mb = gradient_megabytes(model)
    if settings.comm_hook == "powersgd" and ctx.backend == "gloo":
        # PowerSGD on gloo aborts with more than one bucket (torch 2.13): one bucket for all.
        one_bucket = grad_mb + 1.0
        if bucket_cap is not None and bucket_cap < grad_mb:
            raise DnaembedError(
                f"PowerSGD on gloo needs all gradients in one bucket: --bucket-cap-mb "
                f"{bucket_cap:g} is smaller than the model's {grad_mb:.2f} MB of gradients"
            )
        bucket_cap = max(bucket_cap or 0.0, one_bucket)
    kwargs = {"bucket_cap_mb": bucket_cap} if bucket_cap is not None else {}
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=device_ids, **kwargs)
    if settings.comm_hook == "allreduce":
        inner, state = default_hooks.allreduce_hook, None
    elif settings.comm_hook == "fp16":
        inner, state = default_hooks.fp16_compress_hook, None
    elif settings.comm_hook == "bf16":
        inner, state = default_hooks.bf16_compress_hook, None
    else:
        state = powersgd.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=settings.powersgd_rank,
            start_powerSGD_iter=settings.powersgd_start_iter,
            min_compression_rate=2,
            use_error_feedback=True,
            warm_start=True,
            random_seed=0,
        )
        inner = powersgd.powerSGD_hook
    ddp.register_comm_hook(state, CountingHook(settings.comm_hook, inner, state, stats))
    return ddp, stats
