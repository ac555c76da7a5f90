"""Distributed training: real gloo ranks on 127.0.0.1, real steps, no mocks.

Each test launches ``torchrun`` (or ``dnaembed train --nproc``) as a subprocess;
the ranks run tests/ddp_worker.py, which is ``dnaembed train`` plus a record of
what the ranks did (parameter digests, losses, bytes handed to all_reduce).
Tiny models and 1 thread per rank keep the file to a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_clean_error, run_cli

from dnaembed.errors import DnaembedError
from dnaembed.train.ddp.comm import CommSettings, ring_allreduce_bytes
from dnaembed.train.ddp.launch import strip_nproc

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("ddp_worker.py")
ROOT = Path(__file__).resolve().parents[1]

TINY = [
    "--set", "model.channels=[8,8,8,8,8]",
    "--set", "model.window=128",
    "--set", "pairs.length_min=60",
    "--set", "pairs.length_max=100",
    "--set", "train.batch_size=32",
    "--set", "train.val_pairs=200",
    "--set", "train.warmup_steps=3",
    "--set", "train.val_every=10",
    "--set", "train.lr=0.01",
    "--set", "distributed.powersgd_start_iter=5",
]


def _env(report_dir: Path) -> dict:
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        DNAEMBED_NO_PROGRESS="1",
        PYTHONWARNINGS="ignore",
        DDP_TEST_REPORT_DIR=str(report_dir),
        PYTHONPATH=str(ROOT),
    )


def _torchrun(tmp_path: Path, args: list[str], nproc: int = 2, name: str = "run") -> list[dict]:
    """``torchrun --standalone`` on ``nproc`` ranks; each rank's report, by rank."""
    reports = tmp_path / f"{name}-reports"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", str(nproc), str(WORKER), "train", "-o", str(tmp_path / name),
        *TINY, *args,
    ]
    proc = subprocess.run(cmd, env=_env(reports), capture_output=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return _reports(reports, nproc)


def _reports(reports: Path, nproc: int) -> list[dict]:
    out = [json.loads((reports / f"rank{r}.json").read_text()) for r in range(nproc)]
    assert [r["world_size"] for r in out] == [nproc] * nproc
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_replicas_agree_and_learn(reports: list[dict]) -> None:
    digests = {r["params"] for r in reports}
    assert len(digests) == 1, "replicas' parameters differ after training"
    # ... while each rank trained on pairs of its own (seeded by seed and rank).
    assert reports[0]["losses"] != reports[1]["losses"]
    for r in reports:
        losses = r["losses"]
        head, tail = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
        assert tail < 0.9 * head, (r["rank"], head, tail)
        assert r["torch_threads"] == 1


def _powersgd_numel(shapes: list[list[int]], rank: int) -> int:
    """Elements PowerSGD sends for these gradients (P and Q factors, rest uncompressed)."""
    total = 0
    for shape in shapes:
        n = shape[0]
        m = 1
        for d in shape[1:]:
            m *= d
        r = min(n, m, rank)
        compressed = (n + m) * r
        # Worth compressing only when it saves at least 2x (min_compression_rate=2).
        total += compressed if 2 * compressed < n * m else n * m
    return total


@pytest.mark.parametrize("hook", ["allreduce", "fp16", "bf16", "powersgd"])
def test_two_gloo_ranks_train_in_step(tmp_path, hook):
    steps = 20
    reports = _torchrun(tmp_path, ["--steps", str(steps), "--comm-hook", hook])
    _assert_replicas_agree_and_learn(reports)
    n = reports[0]["n_params"]
    for r in reports:
        assert r["rounds"] == steps
        # What the hook says it sent is what reached all_reduce, to the byte.
        assert r["payload_bytes"] == r["allreduce_bytes"]
        assert r["raw_bytes"] == 4 * n * steps
        assert r["buffer_bytes"] > 0  # BatchNorm statistics broadcast from rank 0
        assert 0 < r["exposed_seconds"] <= r["busy_seconds"] + 1e-6
        if hook == "allreduce":
            assert r["payload_bytes"] == 4 * n * steps
        elif hook in ("fp16", "bf16"):
            assert r["payload_bytes"] == 2 * n * steps
        else:
            warmup = 5
            after = 4 * _powersgd_numel(r["shapes"], 2)
            assert r["last_round_bytes"] == after
            assert r["payload_bytes"] == 4 * n * warmup + after * (steps - warmup)
            assert after * 10 < 4 * n  # far smaller than the fp32 gradients
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    last = metrics[-1]
    assert last["step"] == steps
    assert last["comm_bytes_per_step"] == reports[0]["payload_bytes"] / steps
    assert last["comm_ring_bytes_per_step"] == ring_allreduce_bytes(last["comm_bytes_per_step"], 2)
    assert last["time_compute_ms"] > 0 and last["time_comm_ms"] > 0
    total = last["time_wait_ms"] + last["time_comm_ms"] + last["time_compute_ms"]
    assert total == pytest.approx(last["time_step_ms"])


def test_grad_accumulation_syncs_once_per_step(tmp_path):
    steps = 12
    reports = _torchrun(tmp_path, ["--steps", str(steps), "--grad-accum", "2"])
    _assert_replicas_agree_and_learn(reports)
    n = reports[0]["n_params"]
    for r in reports:
        assert len(r["losses"]) == 2 * steps
        # no_sync on the first micro-step: one gradient all-reduce per optimizer step.
        assert r["rounds"] == steps
        assert r["payload_bytes"] == r["allreduce_bytes"] == 4 * n * steps


def test_powersgd_with_several_buckets_is_refused(tmp_path):
    proc = run_cli(
        "train", "-o", str(tmp_path / "run"), *TINY, "--steps", "3", "--nproc", "2",
        "--comm-hook", "powersgd", "--bucket-cap-mb", "0.01", timeout=300,
    )
    err = assert_clean_error(proc, "PowerSGD on gloo needs all gradients in one bucket",
                             "--bucket-cap-mb 0.01", "failed with exit code 1")
    assert "ChildFailedError" not in err


def test_resume_on_another_number_of_ranks(tmp_path):
    out = tmp_path / "run"
    # 2 ranks through the CLI's own launcher, then 1 rank, then 2 ranks again (torchrun).
    # The launcher's --log has its line, then rank 0's (the ranks append to it).
    log = tmp_path / "train.log"
    run_cli("train", "-o", str(out), *TINY, "--steps", "10", "--nproc", "2", "--log",
            str(log), check=True, timeout=300)
    lines = log.read_text().splitlines()
    assert "launching 2 local ranks" in lines[0] and "done: 10 steps" in lines[-1], lines
    assert "\0" not in log.read_text()
    ckpt_training = _checkpoint_training(out / "last.pt")
    assert ckpt_training["world_size"] == 2 and ckpt_training["step"] == 10
    proc = run_cli("train", "-o", str(out), *TINY, "--steps", "15", "--resume", check=True,
                   timeout=300)
    assert "resuming from" in proc.stderr.decode()
    assert "saved by 2 rank(s), resumed on 1" in proc.stderr.decode()
    assert _checkpoint_training(out / "last.pt")["world_size"] == 1
    reports = _torchrun(tmp_path, ["--steps", "20", "--resume"], name="run")
    assert len({r["params"] for r in reports}) == 1
    assert all(len(r["losses"]) == 5 for r in reports)  # steps 16..20 only
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").open()]
    assert steps == [10, 15, 20]


def test_resume_without_checkpoint_fails_on_every_rank(tmp_path):
    # In the --log too: each rank's error, then the launcher's, whole lines. The launcher
    # wrote its last line at its own offset, over what the ranks had written anew: NULs.
    log = tmp_path / "train.log"
    proc = run_cli("train", "-o", str(tmp_path / "none"), *TINY, "--steps", "3", "--nproc", "2",
                   "--resume", "--log", str(log), timeout=300)
    assert_clean_error(proc, "does not exist (nothing to resume)")
    lines = log.read_text().splitlines()
    assert "launching 2 local ranks" in lines[0], lines
    assert sum("does not exist (nothing to resume)" in line for line in lines) == 2, lines
    assert lines[-1].endswith("ranks failed; see their messages above)")
    assert "\0" not in log.read_text()
    # A compressed log cannot take the ranks' appends: refused before they start.
    proc = run_cli("train", "-o", str(tmp_path / "x"), *TINY, "--nproc", "2", "--log",
                   str(tmp_path / "train.log.gz"))
    assert_clean_error(proc, "--log", "with --nproc", code=2)
    assert not (tmp_path / "x").exists()


def test_a_torchrun_rank_after_the_first_appends_to_the_log(tmp_path):
    # Under a user's torchrun every rank opened --log anew, and rank 0's first lines went.
    # A later rank (torchrun's RANK and WORLD_SIZE) appends; rank 0 starts it anew; a
    # compressed log, which several ranks cannot share, is refused.
    log = tmp_path / "train.log"
    bad = ("train", "-o", str(tmp_path / "x"), "--set", "train.lr=oops", "--log", str(log))
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore", WORLD_SIZE="2")

    def rank(number: int, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dnaembed", *args], capture_output=True,
                              timeout=120, env=dict(env, RANK=str(number)), cwd=tmp_path)

    log.write_text("17:00:00 dnaembed: rank 0's line\n")
    assert_clean_error(rank(1, *bad), "train.lr", code=2)
    lines = log.read_text().splitlines()
    assert lines[0] == "17:00:00 dnaembed: rank 0's line" and "train.lr" in lines[1], lines
    assert_clean_error(rank(0, *bad), "train.lr", code=2)
    assert len(log.read_text().splitlines()) == 1
    proc = rank(1, "train", "-o", str(tmp_path / "y"), "--log", str(tmp_path / "t.log.gz"))
    assert_clean_error(proc, "with torchrun's ranks", code=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.log"]


def test_two_nodes_on_localhost(tmp_path):
    """The multi-node form: two torchrun agents (one rank each) meet at a c10d endpoint."""
    port = _free_port()
    reports = tmp_path / "reports"
    procs = []
    for _node in range(2):
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
            "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "dnaembed-test",
            "--local-addr", "127.0.0.1", str(WORKER), "train", "-o", str(tmp_path / "run"),
            *TINY, "--steps", "12", "--comm-hook", "fp16",
        ]
        procs.append(subprocess.Popen(cmd, env=_env(reports), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, cwd=tmp_path))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-3000:]
    out = _reports(reports, 2)
    assert len({r["params"] for r in out}) == 1
    assert all(r["payload_bytes"] == r["allreduce_bytes"] for r in out)


def _checkpoint_training(path: Path) -> dict:
    from dnaembed.model.checkpoint import load_checkpoint

    return load_checkpoint(path).training


def test_strip_nproc():
    argv = ["train", "--nproc", "2", "-o", "x", "--nproc=3", "--steps", "5"]
    assert strip_nproc(argv) == ["train", "-o", "x", "--steps", "5"]


def test_comm_settings_validation():
    with pytest.raises(DnaembedError, match="unknown communication hook"):
        CommSettings(comm_hook="int8")
    with pytest.raises(DnaembedError, match="powersgd_start_iter must be >= 2"):
        CommSettings(powersgd_start_iter=1)
    assert ring_allreduce_bytes(100, 1) == 0
    assert ring_allreduce_bytes(100, 4) == 150
