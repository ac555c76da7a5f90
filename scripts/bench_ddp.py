"""Benchmark DDP gradient communication: bytes, step time and accuracy per hook.

Trains the same budget (optimizer steps at a fixed *global* batch, i.e.
``train.batch_size`` summed over the ranks, so every run sees as much training
data) with 1 rank and with N ranks under each
communication hook, then prints a Markdown table from each run's last
metrics.jsonl entry:

* gradient bytes each rank hands to the collective per step (steady state, and
  averaged over the run, PowerSGD's warm-up of plain all-reduce included), and
  what a ring all-reduce of that payload sends per rank (``2(N-1)/N`` x payload);
* compression (fp32 gradient bytes / bytes sent, steady state);
* step time split into compute, exposed communication and waiting for pairs;
* validation MAE on near pairs (true distance <= 40) after the budget, and its
  change against N-rank plain all-reduce (same seeds, same pairs, same start).

Every rank uses one thread (-t 1), so 1 rank = 1 core and N ranks = N cores.

Usage::

    python scripts/bench_ddp.py --steps 800 --global-batch 128 -o runs/bench_ddp
    python scripts/bench_ddp.py --runs 2:allreduce,2:powersgd:2,2:powersgd:8 --steps 400
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib import add_write_docs, finish

DEFAULT_RUNS = "1:allreduce,2:allreduce,2:fp16,2:bf16,2:powersgd"


def parse_runs(spec: str) -> list[tuple[int, str, int | None]]:
    """``"1:allreduce,2:powersgd:4"`` -> [(1, "allreduce", None), (2, "powersgd", 4)]."""
    runs = []
    for item in spec.split(","):
        parts = item.strip().split(":")
        if len(parts) not in (2, 3):
            raise SystemExit(f"bad run {item!r}: want RANKS:HOOK or RANKS:powersgd:RANK")
        rank = int(parts[2]) if len(parts) == 3 else None
        runs.append((int(parts[0]), parts[1], rank))
    return runs


def run_one(
    ranks: int, hook: str, psgd_rank: int | None, args: argparse.Namespace, out: Path
) -> dict:
    """Train one configuration in a subprocess; its last metrics plus wall time."""
    if args.global_batch % ranks:
        raise SystemExit(f"--global-batch {args.global_batch} is not divisible by {ranks} ranks")
    name = f"{ranks}r-{hook}" + (f"-r{psgd_rank}" if psgd_rank else "")
    run_dir = out / name
    shutil.rmtree(run_dir, ignore_errors=True)  # a run from scratch (train refuses an old one)
    train_args = [
        "train", "-t", "1", "-o", str(run_dir), "--seed", str(args.seed),
        "--steps", str(args.steps), "--batch-size", str(args.global_batch // ranks),
        "--set", f"train.val_every={args.steps}",
        "--set", f"train.val_pairs={args.val_pairs}",
        "--set", f"train.warmup_steps={max(1, args.steps // 10)}",
        "--comm-hook", hook,
        *(["--config", args.config] if args.config else []),
        *(["--powersgd-rank", str(psgd_rank)] if psgd_rank else []),
        *(["--loss", args.loss] if args.loss else []),
    ]
    for item in args.set or []:
        train_args += ["--set", item]
    if ranks == 1:
        cmd = [sys.executable, "-m", "dnaembed", *train_args]
    else:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(ranks), "-m", "dnaembed", *train_args,
        ]
    env = dict(os.environ, OMP_NUM_THREADS="1", DNAEMBED_NO_PROGRESS="1")
    if run_dir.exists():
        for f in ("metrics.jsonl", "last.pt", "best.pt"):
            (run_dir / f).unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out / f"{name}.log").write_text(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return {"name": name, "ranks": ranks, "hook": hook, "powersgd_rank": psgd_rank,
            "wall_s": wall, **last}


def _kb(x: float) -> str:
    return f"{x / 1024:,.1f}"


def table(results: list[dict]) -> str:
    """The Markdown table of a benchmark."""
    base = {r["ranks"]: r for r in results if r["hook"] == "allreduce"}
    head = (
        "| ranks | hook | payload KiB/step (steady) | payload KiB/step (mean) "
        "| ring KiB/step/rank | compression | step ms | compute ms | comm ms | wait ms "
        "| val MAE(d≤40) | ΔMAE vs allreduce | wall s |\n"
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = []
    for r in results:
        hook = r["hook"] + (f" (rank {r['powersgd_rank']})" if r["powersgd_rank"] else "")
        steady = r["comm_bytes_last_step"]
        raw_per_round = r["comm_raw_bytes_per_step"]
        compression = raw_per_round / steady if steady else float("nan")
        ring = steady * 2 * (r["ranks"] - 1) / r["ranks"]
        ref = base.get(r["ranks"])
        delta = (
            f"{100 * (r['mae_near'] / ref['mae_near'] - 1):+.1f}%"
            if ref is not None and ref is not r
            else "—"
        )
        if r["ranks"] == 1:
            comm_cols = "— | — | — | — "
        else:
            comm_cols = f"{_kb(steady)} | {_kb(r['comm_bytes_per_step'])} | {_kb(ring)} | " \
                        f"{compression:.1f}x "
        rows.append(
            f"| {r['ranks']} | {hook} | {comm_cols}| {r['time_step_ms']:.1f} "
            f"| {r['time_compute_ms']:.1f} | {r['time_comm_ms']:.1f} | {r['time_wait_ms']:.1f} "
            f"| {r['mae_near']:.3f} | {delta} "
            f"| {r['wall_s']:.0f} |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default=DEFAULT_RUNS, help=f"default {DEFAULT_RUNS}")
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument(
        "--global-batch", type=int, default=128, help="train.batch_size summed over the ranks"
    )
    ap.add_argument("--val-pairs", type=int, default=2000)
    ap.add_argument("--config", help="training config (TOML); default: the built-in defaults")
    ap.add_argument("--loss", help="override train.loss")
    ap.add_argument("--set", action="append", help="extra SECTION.KEY=VALUE overrides")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", default="runs/bench_ddp")
    add_write_docs(ap, "DDP gradient communication")
    args = ap.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for ranks, hook, psgd_rank in parse_runs(args.runs):
        print(f"running {ranks} rank(s), {hook} ...", file=sys.stderr, flush=True)
        r = run_one(ranks, hook, psgd_rank, args, out)
        print(f"  {r['wall_s']:.0f} s, MAE(d<=40) {r['mae_near']:.3f}", file=sys.stderr)
        results.append(r)
        (out / "results.json").write_text(json.dumps(results, indent=1))
    md = table(results)
    (out / "table.md").write_text(md)
    setting = (f"{args.steps} steps, global batch {args.global_batch}, one thread per rank, "
               f"config {args.config or 'defaults'}")
    print(setting + "\n")
    print(md)
    finish(args.write_docs, setting + "\n\n" + md)


if __name__ == "__main__":
    main()
