"""`dnaembed train --nproc N`: N local ranks through torch's own launcher.

This is what ``torchrun --standalone --nproc-per-node N -m dnaembed train ...``
does, from inside the CLI: an elastic agent (``torch.distributed.launcher.api``)
with a c10d rendezvous on 127.0.0.1 starts N copies of ``python -m dnaembed
train ...`` (the same arguments, less ``--nproc``), sets RANK / WORLD_SIZE /
LOCAL_RANK / MASTER_ADDR / MASTER_PORT for each, and waits for them. Each copy
then runs :func:`dnaembed.train.train` as one rank of a DDP job. For several
machines use torchrun itself (see docs/distributed.md).
"""

from __future__ import annotations

import logging
import os
import sys
import uuid

from dnaembed.errors import DnaembedError, UsageError
from dnaembed.io.atomic import COMPRESSED_SUFFIXES
from dnaembed.log import LOG_APPEND_ENV, available_cores, logger


def strip_nproc(argv: list[str]) -> list[str]:
    """``argv`` without ``--nproc N`` / ``--nproc=N`` (what each rank re-runs)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--nproc":
            skip = True
            continue
        if arg.startswith("--nproc="):
            continue
        out.append(arg)
    return out


def launch_local(nproc: int, argv: list[str]) -> None:
    """Run ``python -m dnaembed ARGV`` (without ``--nproc``) as ``nproc`` DDP ranks on this machine.

    Returns when every rank has finished; raises :class:`DnaembedError` naming the
    first failed rank (the ranks print their own error lines first).
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc < 1:
        raise DnaembedError(f"--nproc must be >= 1, got {nproc}")
    if "--nproc" not in argv and not any(a.startswith("--nproc=") for a in argv):
        # The ranks re-run the command line; without it there is nothing to re-run.
        raise DnaembedError("--nproc: the command line is not in sys.argv; use torchrun instead")
    args = strip_nproc(argv)
    _check_log_for_ranks(args)
    # Like torchrun, keep each rank from claiming every core; the ranks themselves
    # take cores // nproc threads (dnaembed.train.ddp.context.local_share_of_cores).
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, available_cores() // nproc)))
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=f"dnaembed-{uuid.uuid4().hex[:12]}",
        rdzv_backend="c10d",
        # Port 0: the store picks a free port; only this machine needs to find it.
        rdzv_endpoint="127.0.0.1:0",
        local_addr="127.0.0.1",
        max_restarts=0,
        monitor_interval=0.1,
    )
    quiet = logger.getEffectiveLevel() > logging.DEBUG
    elastic_log = logging.getLogger("torch.distributed.elastic")
    saved = (elastic_log.handlers[:], elastic_log.propagate)
    if quiet:
        # The agent's own failure report is a page of text; the ranks' one-line
        # errors and ours below say the same (-v shows it).
        elastic_log.handlers = [logging.NullHandler()]
        elastic_log.propagate = False
    logger.info("launching %d local ranks: %s -m dnaembed %s", nproc, sys.executable,
                " ".join(args))
    os.environ[LOG_APPEND_ENV] = "1"  # the ranks' --log: this one's, appended to
    try:
        elastic_launch(config, sys.executable)("-m", "dnaembed", *args)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        raise DnaembedError(
            f"--nproc {nproc}: rank {rank} failed with exit code {failure.exitcode} "
            f"({len(e.failures)} of {nproc} ranks failed; see their messages above)"
        ) from None
    except SignalException:
        raise KeyboardInterrupt from None
    finally:
        os.environ.pop(LOG_APPEND_ENV, None)
        elastic_log.handlers, elastic_log.propagate = saved


def _check_log_for_ranks(args: list[str]) -> None:
    """Refuses a compressed ``--log`` (usage error): the ranks write the launcher's log
    too, by appends, which a compressed stream cannot take from several processes."""
    for i, arg in enumerate(args):
        value = arg.removeprefix("--log=") if arg.startswith("--log=") else (
            args[i + 1] if arg == "--log" and i + 1 < len(args) else None)
        if value is not None and value.endswith(COMPRESSED_SUFFIXES):
            raise UsageError(f"--log {value} with --nproc: the ranks write to it too; give "
                             "an uncompressed file")
