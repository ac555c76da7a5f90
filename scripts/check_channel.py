#!/usr/bin/env python
"""Measure the simulator: align simulated reads back to their strands and compare with the request.

For every preset: substitution / insertion / deletion rates per nt counted from
exact edit operations (Levenshtein.editops of strand -> read), coverage mean and
variance per model, and simulation speed (reads/s of 150 nt, median of repeats).
Rates pass when within 10% (relative) of the requested ones.

    python scripts/check_channel.py [--strands 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from benchlib import Transcript, add_write_docs, finish

from dnaembed.sim.channel import PRESETS
from dnaembed.sim.coverage import COVERAGE_MODELS, Coverage
from dnaembed.sim.simulate import ReadLayout, simulate_reads
from dnaembed.sim.strands import random_strands


def check_presets(n_strands: int, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    strands = random_strands(n_strands, 150, rng)
    ok = True
    print(
        "| preset | bases aligned | sub req | sub obs | ins req | ins obs | del req | del obs "
        "| within 10% |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, channel in PRESETS.items():
        sim = simulate_reads(strands, channel, Coverage("fixed", 5), ReadLayout(0.5), seed=seed)
        rates = sim.aligned_error_rates()
        obs = {
            "sub": rates["substitution"],
            "ins": rates["insertion"],
            "del": rates["deletion"],
            "bases": rates["bases"],
        }
        req = {"sub": channel.substitution, "ins": channel.insertion, "del": channel.deletion_total}
        good = all(abs(obs[k] - req[k]) <= 0.10 * req[k] for k in req)
        ok &= good
        print(
            f"| {name} | {obs['bases']:,} | {req['sub']:.3%} | {obs['sub']:.3%} | "
            f"{req['ins']:.3%} | {obs['ins']:.3%} | {req['del']:.3%} | {obs['del']:.3%} | "
            f"{'yes' if good else 'NO'} |"
        )
    return ok


def check_coverage(seed: int) -> bool:
    print("\n| coverage model | mean req | mean obs | var model | var obs |")
    print("|---|---|---|---|---|")
    ok = True
    rng = np.random.default_rng(seed)
    for model in COVERAGE_MODELS:
        cov = Coverage(model, mean=10, dispersion=5, sigma=0.5)
        counts = cov.draw(200_000, rng)
        good = abs(counts.mean() - 10) < 0.1 and abs(counts.var() - cov.expected_variance()) <= (
            0.05 * cov.expected_variance() + 0.05
        )
        ok &= bool(good)
        print(
            f"| {model} | 10 | {counts.mean():.3f} | {cov.expected_variance():.2f} | "
            f"{counts.var():.2f} |"
        )
    return ok


def check_speed(seed: int, repeats: int = 7) -> float:
    rng = np.random.default_rng(seed)
    strands = random_strands(10_000, 150, rng)
    rates = []
    for r in range(repeats):
        t = time.perf_counter()
        sim = simulate_reads(strands, PRESETS["nanopore"], Coverage("negbin", 10), seed=seed + r)
        rates.append(len(sim) / (time.perf_counter() - t))
    median = statistics.median(rates)
    print(
        f"\nsimulation speed, nanopore preset, 150 nt, ~100k reads per run: median "
        f"{median:,.0f} reads/s over {repeats} runs (min {min(rates):,.0f}, max {max(rates):,.0f})"
    )
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strands", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    add_write_docs(parser, "Simulated channel")
    args = parser.parse_args()
    printed = Transcript()
    ok = check_presets(args.strands, args.seed)
    ok &= check_coverage(args.seed)
    speed = check_speed(args.seed)
    ok &= speed >= 50_000
    print(f"\nall checks {'passed' if ok else 'FAILED'}")
    finish(args.write_docs, printed.text())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
