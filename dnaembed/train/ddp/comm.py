"""Gradient communication for DDP: the hooks, bucketing, and what they cost.

Hooks (PyTorch's own, from ``torch.distributed.algorithms.ddp_comm_hooks``):

* ``allreduce``: plain fp32 all-reduce (DDP's default);
* ``fp16`` / ``bf16``: gradients cast to 16 bits for the all-reduce (2x fewer bytes);
* ``powersgd``: rank-r low-rank compression of each gradient matrix (Vogels et
  al. 2019), with error feedback and warm start; plain all-reduce for the first
  ``start_iter`` steps, as PyTorch recommends.

Every hook is wrapped by :class:`CountingHook`, which counts, per step and per
rank, the gradient bytes handed to the collectives (the *payload*; a ring
all-reduce moves ``2(N-1)/N`` times that over each rank's link) and times the
communication: how long each bucket was in flight (which may overlap the rest
of the backward pass) and how much of it was *exposed*, i.e. still running
after the last gradient was computed. The buffers DDP broadcasts from rank 0
before a forward pass (BatchNorm statistics) are counted separately.

Known limits on torch 2.13 with gloo: PowerSGD aborts when the gradients span
more than one bucket, so with gloo the bucket is sized to hold every gradient
(an explicit smaller ``--bucket-cap-mb`` is refused); ``batched_powerSGD_hook``
is broken and not offered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel

from dnaembed.errors import DnaembedError
from dnaembed.train.ddp.context import DistContext

HOOKS = ("allreduce", "fp16", "bf16", "powersgd")

#: Bytes per element that each hook puts on the wire (None: PowerSGD, counted from its state).
_WIRE_BYTES = {"allreduce": None, "fp16": 2, "bf16": 2, "powersgd": None}


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
        # PowerSGD's error feedback and warm start need two plain steps first (DDP
        # rebuilds its buckets after the first one); PowerSGDState refuses less.
        if self.powersgd_start_iter < 2:
            raise DnaembedError(
                f"distributed.powersgd_start_iter must be >= 2, got {self.powersgd_start_iter}"
            )
        if self.bucket_cap_mb is not None and self.bucket_cap_mb <= 0:
            raise DnaembedError(f"bucket cap must be > 0 MB, got {self.bucket_cap_mb}")
        if self.grad_accum < 1:
            raise DnaembedError(f"grad accumulation must be >= 1, got {self.grad_accum}")


def ring_allreduce_bytes(payload: float, world_size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``payload`` bytes: ``2(N-1)/N`` x payload."""
    if world_size <= 1:
        return 0.0
    return payload * 2 * (world_size - 1) / world_size


@dataclass
class CommStats:
    """What this rank's gradient communication cost (counted by :class:`CountingHook`).

    ``payload_bytes``: gradient bytes handed to the collectives (after compression);
    ``raw_bytes``: the bytes the same buckets hold uncompressed;
    ``buffer_bytes``: module buffers broadcast before forward passes;
    ``rounds``: gradient synchronisations (one per optimizer step; none in ``no_sync``);
    ``last_round_bytes``: the payload of the latest round (PowerSGD's steady state,
    once its warm-up steps of plain all-reduce are over);
    ``busy_seconds``: summed in-flight time of the buckets (overlaps the backward pass
    when there are several buckets);
    ``exposed_seconds``: time from the launch of a round's last bucket (when every
    gradient has been computed) until all its buckets are reduced: communication
    and compression the backward pass did not hide.
    """

    world_size: int = 1
    payload_bytes: int = 0
    raw_bytes: int = 0
    buffer_bytes: int = 0
    buckets: int = 0
    rounds: int = 0
    last_round_bytes: int = 0
    busy_seconds: float = 0.0
    exposed_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _pending: int = field(default=0, repr=False)
    _in_round: bool = field(default=False, repr=False)
    _closing: bool = field(default=False, repr=False)
    _last_launch: float = field(default=0.0, repr=False)
    _last_done: float = field(default=0.0, repr=False)
    _round_bytes: int = field(default=0, repr=False)

    def snapshot(self) -> tuple[int, int, float]:
        """(payload bytes, raw bytes, busy seconds) so far; kept for callers of the old API."""
        return self.payload_bytes, self.raw_bytes, self.busy_seconds

    @property
    def compression(self) -> float:
        """Raw fp32 gradient bytes per byte sent (1.0 for plain all-reduce)."""
        return self.raw_bytes / self.payload_bytes if self.payload_bytes else 1.0

    def per_step(self, steps: int) -> dict:
        """Per-step averages over ``steps`` optimizer steps, as logged in metrics.jsonl."""
        steps = max(steps, 1)
        payload = self.payload_bytes / steps
        return {
            "comm_bytes_per_step": payload,
            "comm_ring_bytes_per_step": ring_allreduce_bytes(payload, self.world_size),
            "comm_raw_bytes_per_step": self.raw_bytes / steps,
            "comm_buffer_bytes_per_step": self.buffer_bytes / steps,
            "comm_bytes_last_step": float(self.last_round_bytes),
            "comm_compression": self.compression,
            "comm_buckets_per_step": self.buckets / steps,
            "comm_busy_ms": 1000 * self.busy_seconds / steps,
            "comm_exposed_ms": 1000 * self.exposed_seconds / steps,
        }

    # The reducer launches a round's buckets in index order from the autograd
    # thread; their futures complete on gloo/NCCL threads, hence the lock.
    def _launched(self, start: float, last: bool, sent: int, raw: int) -> None:
        with self._lock:
            self.payload_bytes += sent
            self.raw_bytes += raw
            self.buckets += 1
            if not self._in_round:
                self._in_round = True
                self._last_done = start
                self._round_bytes = 0
            self._round_bytes += sent
            self._pending += 1
            self._last_launch = start
            self._closing = self._closing or last

    def _done(self, start: float) -> None:
        now = time.perf_counter()
        with self._lock:
            self.busy_seconds += now - start
            self._pending -= 1
            self._last_done = max(self._last_done, now)
            if self._closing and self._pending == 0:
                self.exposed_seconds += self._last_done - self._last_launch
                self.rounds += 1
                self.last_round_bytes = self._round_bytes
                self._closing = self._in_round = False


class CountingHook:
    """Wraps a DDP communication hook; counts the bytes it sends and times it.

    The bytes are what the hook hands to ``all_reduce``: ``numel x 4`` for the
    plain hook, ``numel x 2`` for fp16/bf16, and for PowerSGD the growth of its
    state's ``total_numel_after_compression`` (P and Q factors plus the tensors
    it leaves uncompressed) during warm-up-free steps.
    """

    def __init__(self, name: str, inner: Callable[..., Any], state: Any, stats: CommStats
                 ) -> None:
        self.name = name
        self.inner = inner
        self.state = state
        self.stats = stats
        # DDP reads these off the hook (logging, and a bf16 check that assumes NCCL).
        self.__name__ = f"counting_{name}_hook"
        self.__qualname__ = self.__name__

    # No annotations on purpose: DDP compares them with dist.GradBucket by identity,
    # and ``from __future__ import annotations`` would turn them into strings.
    def __call__(self, state, bucket):
        buffer = bucket.buffer()
        raw = buffer.numel() * buffer.element_size()
        start = time.perf_counter()
        if self.name == "powersgd":
            before = self.state.total_numel_after_compression
            in_warmup = self.state.iter < self.state.start_powerSGD_iter
            fut = self.inner(self.state, bucket)
            if in_warmup:
                sent = raw
            else:
                sent = (self.state.total_numel_after_compression - before) * buffer.element_size()
        else:
            fut = self.inner(self.state, bucket)
            per_element = _WIRE_BYTES[self.name] or buffer.element_size()
            sent = buffer.numel() * per_element
        stats = self.stats
        stats._launched(start, bucket.is_last(), sent, raw)

        def done(f):
            stats._done(start)
            return f.value()

        return fut.then(done)


def gradient_megabytes(model: torch.nn.Module) -> float:
    """Size of all trainable gradients in MB (2**20 bytes, fp32 as in DDP's buckets)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad) * 4 / 2**20


def _count_buffer_broadcasts(ddp: DistributedDataParallel, stats: CommStats) -> None:
    """Count the bytes of the buffers DDP broadcasts from rank 0 before a forward pass."""

    def before_forward(module, args) -> None:
        # DDP syncs buffers when the previous forward synced gradients (it skips
        # the forwards that follow a no_sync one); ask it, do not re-derive it.
        if module.will_sync_module_buffers():
            stats.buffer_bytes += sum(b.numel() * b.element_size() for b in module.modules_buffers)

    ddp.register_forward_pre_hook(before_forward)


def wrap_ddp(
    model: torch.nn.Module, ctx: DistContext, settings: CommSettings
) -> tuple[torch.nn.Module, CommStats]:
    """Wrap ``model`` in DDP with the chosen hook; single-process runs get the model back."""
    stats = CommStats(world_size=ctx.world_size)
    if not ctx.distributed:
        return model, stats
    bucket_cap = settings.bucket_cap_mb
    grad_mb = gradient_megabytes(model)
    if settings.comm_hook == "powersgd" and ctx.backend == "gloo":
        # PowerSGD on gloo aborts with more than one bucket (torch 2.13): one bucket for
        # all. An explicit cap also lifts DDP's 1 MB cap on the first bucket.
        if bucket_cap is not None and bucket_cap < grad_mb:
            raise DnaembedError(
                f"PowerSGD on gloo needs all gradients in one bucket: --bucket-cap-mb "
                f"{bucket_cap:g} is smaller than the model's {grad_mb:.3f} MB of gradients "
                "(omit it, or use another --comm-hook)"
            )
        bucket_cap = max(bucket_cap or 0.0, grad_mb + 1.0)
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
            # Same seed on every rank: the random initial Q must agree across replicas.
            random_seed=0,
        )
        inner = powersgd.powerSGD_hook
    ddp.register_comm_hook(state, CountingHook(settings.comm_hook, inner, state, stats))
    _count_buffer_broadcasts(ddp, stats)
    return ddp, stats
