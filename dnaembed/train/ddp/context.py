"""How training is executed: one process, or one of N ranks under torchrun (DDP).

This module holds the execution strategy only; :mod:`dnaembed.train` holds the
algorithm and calls it the same way whether there is one process or many.
torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT; we
read them, pick the backend (NCCL on CUDA, gloo on CPU) and wrap the model in
DistributedDataParallel with the chosen communication hook (:mod:`dnaembed.train.ddp.comm`).
"""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

from dnaembed.errors import DnaembedError
from dnaembed.log import available_cores

T = TypeVar("T")


@dataclass
class DistContext:
    """Where this process sits: rank, world size, device and backend (None when single)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the main process."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether there is more than one process."""
        return self.world_size > 1


def launched_by_torchrun() -> bool:
    """True when the environment of a torchrun (or compatible) launcher is present."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def is_main_rank() -> bool:
    """True in a single process and on rank 0 of a torchrun job (read from the environment)."""
    return int(os.environ.get("RANK", "0")) == 0


def local_share_of_cores() -> int | None:
    """CPU threads for one of the ranks on this machine; None outside torchrun (all cores).

    torchrun sets OMP_NUM_THREADS=1 for every rank; on a CPU-only machine that
    leaves cores idle, all cores per rank oversubscribes them. Each of the
    LOCAL_WORLD_SIZE ranks gets an equal share instead (``-t`` overrides).
    """
    if not launched_by_torchrun():
        return None
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, available_cores() // max(1, local_world))


def setup(device: torch.device) -> DistContext:
    """Join the process group when launched by torchrun; otherwise a single-process context.

    ``device`` is the resolved --device; under torchrun with CUDA each rank takes
    the GPU of its LOCAL_RANK.
    """
    if not launched_by_torchrun() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return DistContext(device=device)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise DnaembedError(
                f"rank {rank}: LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} GPUs"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        backend = "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return DistContext(rank, world, local_rank, device, backend)


def teardown(ctx: DistContext, *, finished: bool = True) -> None:
    """Leave the process group (if we joined one).

    After a run that ``finished`` on this rank, every rank first waits for the others,
    and the objects that still hold the group (a DDP reducer, a PowerSGD state in a
    reference cycle) are collected. Why: once in CI a rank aborted at exit after its
    work was done ("terminate called without an active exception"); not reproduced
    since, and these are the two likely causes (a rank destroying the group while
    another still uses it, a reducer outliving the group into interpreter shutdown).
    A failed rank skips the wait: the others may never arrive.
    """
    if not (ctx.distributed and dist.is_initialized()):
        return
    if finished:
        # A rank that failed and left makes the barrier fail: its own error is the one to
        # report, not this one.
        with contextlib.suppress(RuntimeError):
            dist.barrier()
        gc.collect()
    dist.destroy_process_group()


def broadcast_object(ctx: DistContext, obj: T) -> T:
    """Rank 0's ``obj`` on every rank (identity when single-process)."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]
