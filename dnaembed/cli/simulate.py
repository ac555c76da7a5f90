"""`dnaembed simulate`."""

from __future__ import annotations

from pathlib import Path

import click

from dnaembed.cli.base import FRACTION, RATE, _length_range, cli, common_options, echo_result
from dnaembed.sim.channel import PRESETS


@cli.command()
@click.option(
    "-o",
    "--output",
    "prefix",
    default="simulated",
    show_default=True,
    help="Output prefix: PREFIX.fastq.gz, PREFIX.truth.tsv, PREFIX.refs.fasta.",
)
@click.option(
    "--refs",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Strands from this FASTA/FASTQ instead of random ones.",
)
@click.option(
    "--strands",
    "n_strands",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Number of random strands.",
)
@click.option(
    "--length",
    default="150",
    show_default=True,
    help="Random strand length, or a range MIN-MAX (primers not included).",
)
@click.option("--max-homopolymer", type=click.IntRange(min=1), help="Longest run of one base.")
@click.option("--gc-min", type=FRACTION, help="Minimum GC fraction in every GC window.")
@click.option("--gc-max", type=FRACTION, help="Maximum GC fraction in every GC window.")
@click.option("--gc-window", type=click.IntRange(min=2), default=20, show_default=True)
@click.option(
    "--primers",
    "primer_length",
    type=click.IntRange(min=0),
    default=0,
    help="Flank every strand with the same random primer of this length at each end.",
)
@click.option("--primer-5", "primer5", help="Explicit 5' primer (overrides --primers).")
@click.option("--primer-3", "primer3", help="Explicit 3' primer (overrides --primers).")
@click.option(
    "--preset",
    type=click.Choice(list(PRESETS)),
    default="nanopore",
    show_default=True,
    help="Channel preset (error rates of a sequencing technology).",
)
@click.option("--sub", type=RATE, help="Substitution rate per nt (overrides the preset).")
@click.option("--ins", type=RATE, help="Insertion rate per nt (overrides the preset).")
@click.option("--del", "deletion", type=RATE, help="Deletion rate per nt (overrides the preset).")
@click.option("--burst-rate", type=RATE, help="Rate of multi-base deletions per nt.")
@click.option("--burst-length", type=click.FloatRange(min=2.0), help="Mean burst length (>= 2).")
@click.option(
    "--homopolymer-bias",
    type=click.FloatRange(min=0.0),
    help="Deletion bias in homopolymers (nanopore-like).",
)
@click.option(
    "--coverage",
    "coverage_model",
    default="negbin",
    show_default=True,
    type=click.Choice(["fixed", "poisson", "negbin", "lognormal"]),
)
@click.option(
    "--mean-coverage",
    type=click.FloatRange(min=0.0, min_open=True),
    default=10.0,
    show_default=True,
    help="Mean reads per strand.",
)
@click.option(
    "--dispersion",
    type=click.FloatRange(min=0.0, min_open=True),
    default=5.0,
    show_default=True,
    help="Negative binomial dispersion k (variance m + m^2/k).",
)
@click.option(
    "--sigma",
    type=click.FloatRange(min=0.0),
    default=0.5,
    show_default=True,
    help="Lognormal coverage: sd of the log rate.",
)
@click.option(
    "--dropout",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.0,
    show_default=True,
    help="Fraction of strands with no reads.",
)
@click.option(
    "--reverse-fraction",
    type=FRACTION,
    default=0.0,
    show_default=True,
    help="Fraction of reads returned as reverse complements.",
)
@click.option(
    "--truncate-fraction",
    type=FRACTION,
    default=0.0,
    show_default=True,
    help="Fraction of reads missing their 3' end.",
)
@click.option(
    "--truncate-mean",
    type=click.FloatRange(min=0.0, min_open=True),
    default=30.0,
    show_default=True,
    help="Mean number of missing bases of a truncated read.",
)
@click.option(
    "--contaminants",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.0,
    show_default=True,
    help="Fraction of reads that come from no strand.",
)
@common_options
def simulate(
    prefix: str,
    refs: str | None,
    n_strands: int,
    length: str,
    max_homopolymer,
    gc_min,
    gc_max,
    gc_window,
    primer_length,
    primer5,
    primer3,
    preset,
    sub,
    ins,
    deletion,
    burst_rate,
    burst_length,
    homopolymer_bias,
    coverage_model,
    mean_coverage,
    dispersion,
    sigma,
    dropout,
    reverse_fraction,
    truncate_fraction,
    truncate_mean,
    contaminants,
    seed: int,
    threads: int,
) -> None:
    """Simulate sequencing reads of DNA-storage strands, with the truth.

    Writes PREFIX.fastq.gz (shuffled reads), PREFIX.truth.tsv (read_id, strand_id,
    orientation) and PREFIX.refs.fasta; prints a summary.
    """
    from dnaembed.sim.simulate import SimulationPlan, run_simulation

    plan = SimulationPlan(
        refs=refs,
        n_strands=n_strands,
        length=_length_range(length),
        max_homopolymer=max_homopolymer,
        gc_min=gc_min,
        gc_max=gc_max,
        gc_window=gc_window,
        primer_length=primer_length,
        primer5=primer5,
        primer3=primer3,
        preset=preset,
        overrides=dict(
            substitution=sub,
            insertion=ins,
            deletion=deletion,
            burst_rate=burst_rate,
            burst_mean_length=burst_length,
            homopolymer_bias=homopolymer_bias,
        ),
        coverage=dict(
            model=coverage_model,
            mean=mean_coverage,
            dispersion=dispersion,
            sigma=sigma,
            dropout=dropout,
        ),
        layout=dict(
            reverse_fraction=reverse_fraction,
            truncate_fraction=truncate_fraction,
            truncate_mean=truncate_mean,
            contaminant_fraction=contaminants,
        ),
        seed=seed,
    )
    summary = run_simulation(plan, Path(prefix))
    echo_result(summary)


