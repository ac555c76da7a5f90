#!/usr/bin/env python
"""Training speed on this CPU: steps/s of configs/default.toml, pairs in-process or in workers.

Two tables:

* **steps/s**: a few steps of chosen stages of the recipe (full size: 512 sequences a
  step), the batches drawn in this process by a background thread
  (``train.label_workers = 0``) or by N worker processes (``--label-workers N``),
  each the median of ``--repeats`` runs, side by side in one run; with the time a
  step waits for its batch;
* **pairs/s**: the pair sampler alone (the channel, exact Levenshtein labels, the
  code matrix), labelled pairs per second of wall time drawn in this process, or
  by N worker processes.

    python scripts/bench_train.py [--steps 30] [--repeats 3] [--stages 1,3]
        [--workers 0,1] [--sampler-workers 0,1,2] [--threads 2] [--write-docs [TITLE]]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from dnaembed.log import configure, set_threads  # noqa: E402
from dnaembed.train.batches import BatchSource, open_stream  # noqa: E402
from dnaembed.train.loop import train  # noqa: E402
from dnaembed.train.stages import Stage, load_recipe  # noqa: E402

RECIPE = benchlib.ROOT / "configs" / "default.toml"
TITLE = "Training steps/s on CPU (scripts/bench_train.py)"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def timed_run(stage: Stage, steps: int, workers: int, out: Path) -> dict:
    """``steps`` steps of ``stage`` from fresh weights (no init: the speed is the same);
    the loop's own step timing (validation excluded)."""
    cfg = dataclasses.replace(stage.config.train, steps=steps, val_every=10 ** 9,
                              val_pairs=200, label_workers=workers, init="")
    result = train(dataclasses.replace(stage.config, train=cfg), out, device="cpu")
    step_ms, wait_ms = result.timing["time_step_ms"], result.timing["time_wait_ms"]
    return {"steps_s": 1000 / step_ms, "step_ms": step_ms, "wait_ms": wait_ms,
            "seqs_s": result.last["train_seqs_per_s"]}


def sampler_rate(stage: Stage, workers: int, batches: int) -> float:
    """Labelled pairs per second of wall time (after the first batch, i.e. worker start-up)."""
    c = stage.config
    source = BatchSource(c.pairs, c.seed, 0, 0, c.train.batch_size, c.model.window)
    stream = open_stream(source, 0, batches + 1, workers=workers, prefetch=4)
    try:
        stream.next()
        t, pairs = time.perf_counter(), 0
        for _ in range(batches):
            pairs += stream.next().pairs
        return pairs / (time.perf_counter() - t)
    finally:
        stream.close()


def steps_table(args, stages: list[tuple[int, Stage]], work: Path) -> str:
    rows = ["| stage | model | batches drawn | steps/s | ms/step | waiting for pairs, ms/step "
            "| sequences/s |", "|---|---|---|---:|---:|---:|---:|"]
    for index, stage in stages:
        base = None
        for workers in args.workers:
            runs = [timed_run(stage, args.steps, workers, work / f"s{index}-w{workers}-r{r}")
                    for r in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            base = base or med["steps_s"]
            how = "in this process (thread)" if workers == 0 else f"{workers} worker process(es)"
            ratio = "" if med["steps_s"] == base else f" ({med['steps_s'] / base:.2f}x)"
            rows.append(f"| {index}. {stage.name} | {stage.config.model.name} | {how} | "
                        f"{med['steps_s']:.2f}{ratio} | {med['step_ms']:.0f} | "
                        f"{med['wait_ms']:.1f} | {med['seqs_s']:,.0f} |")
            print(rows[-1], flush=True)
    return "\n".join(rows)


def sampler_table(args, stage: Stage) -> str:
    rows = ["| pairs drawn | labelled pairs/s | x in-process |", "|---|---:|---:|"]
    base = None
    for workers in args.sampler_workers:
        rate = statistics.median(sampler_rate(stage, workers, args.sampler_batches)
                                 for _ in range(args.repeats))
        base = base or rate
        how = "in this process" if workers == 0 else f"{workers} worker process(es)"
        rows.append(f"| {how} | {rate:,.0f} | {rate / base:.2f} |")
        print(rows[-1], flush=True)
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stages", type=_ints, default=[1, 3], help="recipe stages (1-based)")
    parser.add_argument("--workers", type=_ints, default=[0, 1], help="label workers to time")
    parser.add_argument("--sampler-workers", type=_ints, default=[0, 1, 2])
    parser.add_argument("--sampler-batches", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    benchlib.add_write_docs(parser, TITLE)
    args = parser.parse_args()
    configure(quiet=True)
    threads = set_threads(args.threads or None)
    recipe = load_recipe(RECIPE)
    stages = [(i, recipe.stages[i - 1]) for i in args.stages]
    print(f"{benchlib.cpu_description()}; {threads} torch thread(s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_train.") as work:
        steps = steps_table(args, stages, Path(work))
    sampler = sampler_table(args, recipe.stages[0])
    body = (
        f"`configs/default.toml` at full size (512 sequences a step, groups of 8), "
        f"{args.steps} steps a run, median of {args.repeats} runs, {threads} torch thread(s), "
        f"float32. Step time excludes validation; a worker process shares the same cores.\n\n"
        f"{steps}\n\nThe pair sampler alone (stage 1's pairs, {args.sampler_batches} batches "
        f"of 512 sequences after the first, median of {args.repeats}):\n\n{sampler}\n"
    )
    benchlib.finish(args.write_docs, body)


if __name__ == "__main__":
    main()
