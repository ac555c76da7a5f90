"""`dnaembed demo`: the main job on bundled defaults."""

from __future__ import annotations

from pathlib import Path

import click

from dnaembed.cli.base import cli, common_options, echo_result


@cli.command()
@click.option("-o", "--output", "out_dir", default="dnaembed-demo", show_default=True,
              help="Directory for the demo's files.")
@click.option("--strands", "n_strands", type=click.IntRange(min=1), default=1000,
              show_default=True)
@click.option("--preset", default="nanopore", show_default=True)
@common_options
def demo(out_dir: str, n_strands: int, preset: str, seed: int, threads: int) -> None:
    """The main job on bundled defaults: simulate a run and report on it."""
    from dnaembed.simulate import SimulationPlan, run_simulation

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    plan = SimulationPlan(n_strands=n_strands, preset=preset, seed=seed,
                          coverage={"model": "negbin", "mean": 10.0, "dispersion": 5.0})
    echo_result(run_simulation(plan, Path(out_dir) / "reads"))
