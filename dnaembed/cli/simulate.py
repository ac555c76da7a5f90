"""`dnaembed simulate`."""

from __future__ import annotations

import re
from pathlib import Path

import click

from dnaembed.cli.base import (
    FRACTION,
    RATE,
    FiniteRange,
    _length_range,
    cli,
    common_options,
    echo_result,
    given,
)
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
    help="Strands from this FASTA/FASTQ instead of random ones (not with --strands, "
    "--length, --max-homopolymer or the GC options).",
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
@click.option("--gc-window", type=click.IntRange(min=2), default=20, show_default=True,
              help="Bases per GC window: at most the shortest strand (the window of "
              "--gc-min/--gc-max).")
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
    "--window-shift",
    type=click.IntRange(min=1),
    help="Related pool: designs are overlapping windows of one random sequence, each "
    "starting this many nt after the previous (Goldman et al. 2013).",
)
@click.option(
    "--shared-region",
    "shared_length",
    type=click.IntRange(min=1),
    help="Related pool: this many nt (an address or index region) identical in every design.",
)
@click.option(
    "--shared-start",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Where the shared region starts in each design (0-based, primers not counted).",
)
@click.option(
    "--partners",
    "partner_fraction",
    type=FRACTION,
    help="Related pool: fraction of the designs that form pairs of related designs "
    "(with --partner-shift or --partner-edits).",
)
@click.option(
    "--partner-shift",
    type=click.IntRange(min=1),
    help="A partner is its design shifted by this many nt (new bases at the end).",
)
@click.option(
    "--partner-edits",
    type=click.IntRange(min=1),
    help="A partner is its design with exactly this many substitutions (edit distance).",
)
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
@click.option("--burst-length", type=FiniteRange(min=2.0), help="Mean burst length (>= 2).")
@click.option(
    "--homopolymer-bias",
    type=FiniteRange(min=0.0),
    help="Deletion bias in homopolymers (nanopore-like).",
)
@click.option(
    "--coverage",
    "coverage_model",
    default="negbin",
    show_default=True,
    type=click.Choice(["fixed", "poisson", "negbin", "lognormal"]),
    help="Reads per strand: --mean-coverage each (fixed), Poisson, negative binomial "
    "(--dispersion) or lognormal (--sigma).",
)
@click.option(
    "--mean-coverage",
    type=FiniteRange(min=0.0, min_open=True),
    default=10.0,
    show_default=True,
    help="Mean reads per strand.",
)
@click.option(
    "--dispersion",
    type=FiniteRange(min=0.0, min_open=True),
    default=5.0,
    show_default=True,
    help="Negative binomial dispersion k (variance m + m^2/k).",
)
@click.option(
    "--sigma",
    type=FiniteRange(min=0.0),
    default=0.5,
    show_default=True,
    help="Lognormal coverage: sd of the log rate.",
)
@click.option(
    "--dropout",
    type=FiniteRange(0.0, 1.0, max_open=True),
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
    type=FiniteRange(min=0.0, min_open=True),
    default=30.0,
    show_default=True,
    help="Mean number of missing bases of a truncated read.",
)
@click.option(
    "--contaminants",
    type=FiniteRange(0.0, 1.0, max_open=True),
    default=0.0,
    show_default=True,
    help="Fraction of reads that come from no strand.",
)
@common_options
def simulate(prefix: str, seed: int, threads: int, **options) -> None:
    """Simulate sequencing reads of DNA-storage strands, with the truth.

    Writes PREFIX.fastq.gz (shuffled reads), PREFIX.truth.tsv (read_id, strand_id,
    orientation) and PREFIX.refs.fasta; prints a summary. Related pools
    (--window-shift, --shared-region, --partners) keep every design its own strand.
    """
    from dnaembed.errors import SettingsConflict, UsageError
    from dnaembed.sim.simulate import run_simulation

    if prefix == "-":
        # As `run -o -`: it wrote files named -.fastq.gz, -.truth.tsv and -.refs.fasta.
        raise UsageError("-o/--output is the prefix of PREFIX.fastq.gz, PREFIX.truth.tsv and "
                         "PREFIX.refs.fasta: it cannot be standard output (-)")
    _refuse_random_strand_options(options)
    try:
        summary = run_simulation(_plan(options, seed), Path(prefix))
    except SettingsConflict as e:
        # The library decides what fits (a shared region, a partner shift, a GC limit) and
        # names its parameters; here they are the options.
        raise click.UsageError(_in_options(e, options)) from None
    echo_result(summary)


#: Options that shape random strands: beside --refs (the file gives the strands) they did nothing.
_RANDOM_STRAND_OPTIONS = ("n_strands", "length", "max_homopolymer", "gc_min", "gc_max",
                          "gc_window")

#: The library's names of settings whose option's name differs (the rest are the same).
_SETTING_OPTIONS = {"substitution": "sub", "insertion": "ins", "burst_mean_length": "burst_length"}

#: Settings a --preset gives when no option does.
_PRESET_RATES = ("substitution", "insertion", "deletion", "burst_rate", "burst_mean_length",
                 "homopolymer_bias")


def _refuse_random_strand_options(o: dict) -> None:
    """A usage error for --refs with an option given on the command line that only random
    strands use (``--refs FILE --length 50`` took the file's strands, silently)."""
    if o["refs"] is None:
        return
    ignored = [_as_option(name, o[name], o) for name in _RANDOM_STRAND_OPTIONS if given(name)]
    if ignored:
        which = "that option shapes" if len(ignored) == 1 else "those options shape"
        raise click.UsageError(f"{_and(ignored)} cannot go with --refs {o['refs']}: the strands "
                               f"come from the file ({which} random strands)")


def _in_options(conflict, o: dict) -> str:
    """The message of a library :class:`~dnaembed.errors.SettingsConflict`, naming the options
    and their values (``--shared-region 200, --shared-start 0 and --length 150: ...``)."""
    words = [_as_option(name, value, o) for name, value in conflict.settings.items()]
    return f"{_and(words)}: {conflict.problem}"


def _as_option(name: str, value: object, o: dict) -> str:
    """A setting as the command line gives it: its option and value, or where it came from."""
    key = _SETTING_OPTIONS.get(name, name)
    params = {p.name: p for p in click.get_current_context().command.params}
    if key in params and o.get(key) is not None:
        return f"{max(params[key].opts, key=len)} {o[key]}"
    if name in _PRESET_RATES:
        return f"--preset {o['preset']} ({name.replace('_', ' ')} {value:g})"
    return f"{name.replace('_', ' ')} {value}"


def _and(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _plan(o: dict, seed: int):
    """The SimulationPlan of the command's options (usage errors for combinations)."""
    from dnaembed.sim.simulate import SimulationPlan

    if o["partner_fraction"] and bool(o["partner_shift"]) == bool(o["partner_edits"]):
        raise click.UsageError("--partners needs one of --partner-shift or --partner-edits")
    if (o["partner_shift"] or o["partner_edits"]) and not o["partner_fraction"]:
        raise click.UsageError("--partner-shift and --partner-edits need --partners")
    if o["shared_start"] and not o["shared_length"]:
        raise click.UsageError("--shared-start needs --shared-region")
    # Checked here, where the options' names are known (the library's messages name its
    # parameters, and these exited 1).
    if o["gc_min"] is not None and o["gc_max"] is not None and o["gc_min"] > o["gc_max"]:
        raise click.UsageError(f"--gc-min {o['gc_min']:g} is above --gc-max {o['gc_max']:g}")
    for option, key in (("--primer-5", "primer5"), ("--primer-3", "primer3")):
        if o[key] is not None and not re.fullmatch(r"[ACGTacgt]+", o[key]):
            raise click.UsageError(f"{option} {o[key]!r}: a primer is a sequence of A, C, G "
                                   "and T")
    strands = ("refs", "n_strands", "max_homopolymer", "gc_min", "gc_max", "gc_window",
               "primer_length", "primer5", "primer3", "preset")
    return SimulationPlan(
        **{k: o[k] for k in strands},
        length=_length_range(o["length"]),
        overrides=dict(
            substitution=o["sub"], insertion=o["ins"], deletion=o["deletion"],
            burst_rate=o["burst_rate"], burst_mean_length=o["burst_length"],
            homopolymer_bias=o["homopolymer_bias"],
        ),
        coverage=dict(
            model=o["coverage_model"], mean=o["mean_coverage"], dispersion=o["dispersion"],
            sigma=o["sigma"], dropout=o["dropout"],
        ),
        layout=dict(
            reverse_fraction=o["reverse_fraction"], truncate_fraction=o["truncate_fraction"],
            truncate_mean=o["truncate_mean"], contaminant_fraction=o["contaminants"],
        ),
        related=dict(
            window_shift=o["window_shift"] or 0,
            shared_length=o["shared_length"] or 0,
            shared_start=o["shared_start"] if o["shared_length"] else 0,
            partner_fraction=o["partner_fraction"] or 0.0,
            partner_shift=o["partner_shift"] or 0,
            partner_edits=o["partner_edits"] or 0,
        ),
        seed=seed,
    )
