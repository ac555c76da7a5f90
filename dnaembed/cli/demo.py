"""`dnaembed demo`: the main job on bundled defaults."""

from __future__ import annotations

from pathlib import Path

import click

from dnaembed.cli.base import cli, common_options, echo_result
from dnaembed.cli.run import run

STRAND_LENGTH = 150


@cli.command()
@click.option("-o", "--output", "out_dir", default="dnaembed-demo", show_default=True,
              help="Directory for the demo's files.")
@click.option("--strands", "n_strands", type=click.IntRange(min=1), default=1000,
              show_default=True)
@click.option("--preset", default="nanopore", show_default=True)
@common_options
@click.pass_context
def demo(ctx: click.Context, out_dir: str, n_strands: int, preset: str, seed: int,
         threads: int) -> None:
    """The main job on bundled defaults: simulate a run, then `dnaembed run` on it, scored.

    Simulates N strands of 150 nt through the preset's channel (negative-binomial
    coverage of mean 10, half the reads reverse-complemented), clusters the
    reads and reconstructs the strands with the bundled model, and prints the
    clustering scores against the truth and the recovery scores against the
    designs.
    """
    from dnaembed.sim.simulate import SimulationPlan, run_simulation

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = SimulationPlan(n_strands=n_strands, preset=preset, seed=seed,
                          length=(STRAND_LENGTH, STRAND_LENGTH),
                          coverage={"model": "negbin", "mean": 10.0, "dispersion": 5.0},
                          layout={"reverse_fraction": 0.5})
    echo_result(run_simulation(plan, out / "reads") + "\n")
    ctx.invoke(
        run, reads=(str(out / "reads.fastq.gz"),), out_dir=str(out),
        truth=str(out / "reads.truth.tsv"), refs=str(out / "reads.refs.fasta"),
        expected_length=STRAND_LENGTH, seed=seed, threads=threads,
        quiet=ctx.params["quiet"], verbose=ctx.params["verbose"],
    )
