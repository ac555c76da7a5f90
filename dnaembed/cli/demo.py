"""`dnaembed demo`: the main job on bundled defaults."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from dnaembed.cli.base import cli, common_options, echo_result
from dnaembed.sim.channel import PRESETS

STRAND_LENGTH = 150
#: The simulated reads' files: READS.fastq.gz, READS.truth.tsv, READS.refs.fasta.
READS = "reads"


@cli.command()
@click.option("-o", "--output", "out_dir", default="dnaembed-demo", show_default=True,
              type=click.Path(file_okay=False), help="Directory for the demo's files.")
@click.option("--strands", "n_strands", type=click.IntRange(min=1), default=1000,
              show_default=True, help="Number of strands simulated (N).")
@click.option("--preset", type=click.Choice(list(PRESETS)), default="nanopore",
              show_default=True, help="Channel preset of the simulated reads.")
@common_options
def demo(out_dir: str, n_strands: int, preset: str, seed: int, threads: int) -> None:
    """The main job on bundled defaults: simulate a run, then `dnaembed run` on it, scored.

    Simulates N strands of 150 nt through the preset's channel (negative-binomial
    coverage of mean 10, half the reads reverse-complemented), clusters the
    reads and reconstructs the strands with the bundled model, and prints the
    clustering scores against the truth and the recovery scores against the
    designs. A demo that fails removes the directory it created; in a directory that was
    there, it removes the files a demo writes (an earlier demo's too), so that what is left
    is never two demos' files mixed.
    """
    from dnaembed.cli.jobs import run_job
    from dnaembed.cli.run import format_run
    from dnaembed.sim.simulate import SimulationPlan, run_simulation

    out = Path(out_dir)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        # An earlier demo's results beside this one's reads would read as this demo's.
        _remove_demo_files(out)
        plan = SimulationPlan(n_strands=n_strands, preset=preset, seed=seed,
                              length=(STRAND_LENGTH, STRAND_LENGTH),
                              coverage={"model": "negbin", "mean": 10.0, "dispersion": 5.0},
                              layout={"reverse_fraction": 0.5})
        echo_result(run_simulation(plan, out / READS) + "\n")
        summary = run_job(
            (str(out / f"{READS}.fastq.gz"),), str(out), json_path=None, plot_dir=None,
            truth=str(out / f"{READS}.truth.tsv"), refs=str(out / f"{READS}.refs.fasta"),
            model_path=None, strand="both", max_dist=None, expected_length=STRAND_LENGTH,
            min_size=1, device="auto", batch_size=None, precision="auto", seed=seed,
            threads=threads,
        )
    except BaseException:
        if created:  # only what this demo made: the directory did not exist before
            shutil.rmtree(out, ignore_errors=True)
        else:
            _remove_demo_files(out)
        raise
    echo_result(format_run(summary, out_dir))


def _remove_demo_files(out: Path) -> None:
    """The files a demo writes in ``out`` (the simulated reads', then `run`'s), removed."""
    from dnaembed.cli.jobs import RUN_FILES
    from dnaembed.sim.simulate import SIMULATED_SUFFIXES

    for name in [f"{READS}{suffix}" for suffix in SIMULATED_SUFFIXES] + list(RUN_FILES):
        path = out / name
        if path.is_file() or path.is_symlink():
            path.unlink()
