"""One rank of a test DDP job: ``dnaembed train ARGS`` with a few things recorded.

Run by torchrun from tests/test_distributed.py (not collected by pytest). The
training is the real CLI and the real loop; this script only watches it:

* every ``torch.distributed.all_reduce`` call, to count the bytes actually
  handed to the collective (the ground truth for :class:`dnaembed.train.ddp.comm.CountingHook`);
* the model and the :class:`~dnaembed.train.ddp.comm.CommStats` that ``wrap_ddp`` sees;
* each micro-step's loss.

Writes ``REPORT_DIR/rank<R>.json`` when the command succeeds.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path

import torch
import torch.distributed as dist

import dnaembed.train.loop as train_module
from dnaembed.cli import main

seen: dict = {"allreduce_bytes": 0, "allreduce_calls": 0, "losses": []}
lock = threading.Lock()

real_all_reduce = dist.all_reduce


def counting_all_reduce(tensor, *args, **kwargs):
    # PowerSGD calls this from future callbacks on gloo's threads, hence the lock.
    with lock:
        seen["allreduce_bytes"] += tensor.numel() * tensor.element_size()
        seen["allreduce_calls"] += 1
    return real_all_reduce(tensor, *args, **kwargs)


dist.all_reduce = counting_all_reduce

real_wrap_ddp = train_module.wrap_ddp


def watching_wrap_ddp(model, ctx, settings):
    ddp, stats = real_wrap_ddp(model, ctx, settings)
    seen["model"], seen["stats"] = model, stats
    return ddp, stats


train_module.wrap_ddp = watching_wrap_ddp

real_get_loss = train_module.get_loss


def watching_get_loss(name):
    loss_fn = real_get_loss(name)

    def recorded(pred, target):
        out = loss_fn(pred, target)
        seen["losses"].append(float(out.detach().mean()))
        return out

    return recorded


train_module.get_loss = watching_get_loss


def parameter_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


if __name__ == "__main__":
    report_dir = Path(os.environ["DDP_TEST_REPORT_DIR"])
    rank = int(os.environ.get("RANK", "0"))
    main(sys.argv[1:])
    stats = seen["stats"]
    model = seen["model"]
    report = {
        "rank": rank,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "params": parameter_digest(model),
        "n_params": sum(p.numel() for p in model.parameters()),
        "shapes": [list(p.shape) for p in model.parameters()],
        "losses": seen["losses"],
        "allreduce_bytes": seen["allreduce_bytes"],
        "allreduce_calls": seen["allreduce_calls"],
        "payload_bytes": stats.payload_bytes,
        "raw_bytes": stats.raw_bytes,
        "buffer_bytes": stats.buffer_bytes,
        "rounds": stats.rounds,
        "buckets": stats.buckets,
        "last_round_bytes": stats.last_round_bytes,
        "exposed_seconds": stats.exposed_seconds,
        "busy_seconds": stats.busy_seconds,
        "torch_threads": torch.get_num_threads(),
    }
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / f"rank{rank}.json").write_text(json.dumps(report))
