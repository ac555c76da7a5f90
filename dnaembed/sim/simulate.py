"""Simulate what a DNA-storage lab sequences: strands -> coverage -> channel -> reads, with truth.

:func:`simulate_reads` is the library form of ``dnaembed simulate``; the
training-pair sampler draws from the same :func:`dnaembed.sim.channel.transmit`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dnaembed.encoding import (
    decode_flat,
    encode_flat,
    offsets,
    random_codes,
    reverse_complement,
    reverse_complement_flat,
    reverse_segments,
    segment_ids,
)
from dnaembed.errors import DnaembedError, InputError, SettingsConflict
from dnaembed.sim.channel import Channel, aligned_rates, calibrated, transmit
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.designs import RelatedDesigns

CONTAMINANT = "contaminant"


def _check_strand_ids(ids: list[str], path: str) -> None:
    """Refuse a reference whose id the truth gives reads of no strand ('contaminant', 'NA',
    ...): its reads were scored as contaminants by ``evaluate``, three strands as one."""
    from dnaembed.evaluate.clustering import NOISE_LABELS
    from dnaembed.io.sequences import describe_path

    for number, rid in enumerate(ids, start=1):
        if rid in NOISE_LABELS:
            raise InputError(f"{describe_path(path)}: record {number} ({rid}): a strand id "
                             "that a truth table keeps for reads of no strand (one of "
                             f"{', '.join(sorted(x for x in NOISE_LABELS if x))}): rename it")


@dataclass(frozen=True)
class ReadLayout:
    """How reads come off the sequencer, beyond the channel's errors.

    * ``reverse_fraction``: fraction of reads returned as reverse complements;
    * ``truncate_fraction``: fraction of reads missing the end of the read
      (as sequenced); the number of missing bases is exponential with mean
      ``truncate_mean``, and at least ``min_length`` bases are kept;
    * ``contaminant_fraction``: fraction of all reads that come from no strand
      (random sequences of the strands' length range).
    """

    reverse_fraction: float = 0.0
    truncate_fraction: float = 0.0
    truncate_mean: float = 30.0
    min_length: int = 20
    contaminant_fraction: float = 0.0

    def __post_init__(self) -> None:
        for name in ("reverse_fraction", "truncate_fraction"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise DnaembedError(f"{name.replace('_', ' ')} must be in [0, 1], got {value}")
        if not 0 <= self.contaminant_fraction < 1:
            raise DnaembedError(
                f"contaminant fraction must be in [0, 1), got {self.contaminant_fraction}"
            )
        if self.truncate_mean <= 0:
            raise DnaembedError(f"truncate mean must be > 0, got {self.truncate_mean}")
        if self.min_length < 1:
            raise DnaembedError(f"min length must be >= 1, got {self.min_length}")


@dataclass
class SimulatedReads:
    """Reads (shuffled) with their truth: strand index (-1 for contaminants) and orientation."""

    ids: list[str]
    seqs: list[str]
    quals: list[str]
    strand: np.ndarray
    reverse: np.ndarray
    truncated: np.ndarray
    strand_ids: list[str]
    strand_seqs: list[str]
    coverage: np.ndarray
    events: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def aligned_error_rates(self, max_reads: int | None = None, seed: int = 0,
                            max_length: int | None = None) -> dict[str, float]:
        """Error rates measured by aligning reads back to their strands (orientation undone),
        and ``reads``, how many were aligned.

        Contaminants and truncated reads are left out (a missing end is not a
        channel error). ``max_reads`` caps the sample for speed; ``max_length`` leaves out
        the reads of longer strands (an alignment costs the square of the length).
        """
        eligible = (self.strand >= 0) & ~self.truncated
        if max_length is not None:
            short = np.fromiter((len(s) <= max_length for s in self.strand_seqs), dtype=bool,
                                count=len(self.strand_seqs))
            eligible &= short[np.maximum(self.strand, 0)]
        eligible = np.flatnonzero(eligible)
        if max_reads is not None and len(eligible) > max_reads:
            eligible = np.sort(
                np.random.default_rng(seed).choice(eligible, max_reads, replace=False)
            )
        refs, reads = [], []
        for i in eligible.tolist():
            refs.append(self.strand_seqs[self.strand[i]])
            reads.append(reverse_complement(self.seqs[i]) if self.reverse[i] else self.seqs[i])
        return {**aligned_rates(refs, reads), "reads": len(reads)}

    def truth_rows(self) -> list[tuple[str, str, str]]:
        """``(read_id, strand_id, orientation)`` rows; contaminants have strand id 'contaminant'."""
        rows = []
        for rid, s, rev in zip(self.ids, self.strand.tolist(), self.reverse.tolist()):
            rows.append((rid, self.strand_ids[s] if s >= 0 else CONTAMINANT, "-" if rev else "+"))
        return rows


def simulate_reads(
    strands: Sequence[str],
    channel: Channel,
    coverage: Coverage,
    layout: ReadLayout = ReadLayout(),
    *,
    seed: int = 0,
    strand_ids: Sequence[str] | None = None,
    id_prefix: str = "read",
) -> SimulatedReads:
    """Sequence ``strands`` through ``channel`` at ``coverage``; reads are shuffled.

    Same seed, same reads (bit for bit).
    """
    if len(strands) == 0:
        raise DnaembedError("no strands to simulate reads from")
    rng = np.random.default_rng(seed)
    if strand_ids is None:
        strand_ids = _default_ids("strand", len(strands))
    strand_ids = list(strand_ids)
    counts = coverage.draw(len(strands), rng)
    generator = calibrated(channel)
    src_codes, src_lengths = encode_flat(strands)
    src_starts = offsets(src_lengths)
    read_strand = np.repeat(np.arange(len(strands), dtype=np.int64), counts)
    n_contam = 0
    if layout.contaminant_fraction > 0:
        frac = layout.contaminant_fraction
        n_contam = int(round(frac * len(read_strand) / (1 - frac)))

    seqs, quals, reverse_parts, truncated_parts, events = _transmit_blocks(
        read_strand, src_codes, src_starts, src_lengths, generator, layout, rng)
    if n_contam:
        out = _contaminants(n_contam, src_lengths, channel, layout, rng)
        seqs += out[0]
        quals += out[1]
        reverse_parts.append(out[2])
        truncated_parts.append(out[3])
        read_strand = np.concatenate([read_strand, np.full(n_contam, -1, dtype=np.int64)])
    reverse = np.concatenate(reverse_parts) if reverse_parts else np.zeros(0, dtype=bool)
    truncated = np.concatenate(truncated_parts) if truncated_parts else np.zeros(0, dtype=bool)

    total_reads = len(read_strand)
    order = rng.permutation(total_reads)
    width = max(6, len(str(total_reads)))
    ids = [f"{id_prefix}{i:0{width}d}" for i in range(total_reads)]
    return SimulatedReads(
        ids=ids,
        seqs=[seqs[i] for i in order],
        quals=[quals[i] for i in order],
        strand=read_strand[order],
        reverse=reverse[order],
        truncated=truncated[order],
        strand_ids=strand_ids,
        strand_seqs=list(strands),
        coverage=counts,
        events=events,
    )


def _transmit_blocks(read_strand, src_codes, src_starts, src_lengths, generator, layout, rng):
    """Every read of ``read_strand`` through the channel, block by block (in order)."""
    seqs: list[str] = []
    quals: list[str] = []
    reverse_parts, truncated_parts = [], []
    events = {"source_bases": 0, "substitutions": 0, "insertions": 0, "deletions": 0}
    for a in range(0, len(read_strand), _BLOCK_READS):
        block = read_strand[a : a + _BLOCK_READS]
        copies, copy_lengths = _gather(src_codes, src_starts, src_lengths, block)
        sent = transmit(copies, copy_lengths, generator, rng)
        events["source_bases"] += int(copy_lengths.sum())
        for key in ("substitutions", "insertions", "deletions"):
            events[key] += int(getattr(sent, key).sum())
        out = _as_sequenced(sent.codes, sent.lengths, sent.quals, layout, rng)
        seqs += out[0]
        quals += out[1]
        reverse_parts.append(out[2])
        truncated_parts.append(out[3])
    return seqs, quals, reverse_parts, truncated_parts, events


def _contaminants(n: int, src_lengths: np.ndarray, channel: Channel, layout: ReadLayout, rng):
    """Reads of no strand: random sequences within the strands' length range, error-free."""
    c_lengths = rng.integers(int(src_lengths.min()), int(src_lengths.max()) + 1, size=n)
    c_codes = random_codes(rng, int(c_lengths.sum()))
    c_quals = np.full(len(c_codes), channel.quality, dtype=np.uint8)
    return _as_sequenced(c_codes, c_lengths, c_quals, layout, rng)


#: Reads per block: the block's temporaries stay in cache (see channel.transmit).
_BLOCK_READS = 1000


def _gather(
    src_codes: np.ndarray, src_starts: np.ndarray, src_lengths: np.ndarray, which: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Flat copies of the source sequences ``which`` (with repeats)."""
    copy_lengths = src_lengths[which]
    seg = segment_ids(copy_lengths)
    within = np.arange(int(copy_lengths.sum()), dtype=np.int64) - offsets(copy_lengths)[seg]
    return src_codes[src_starts[which][seg] + within], copy_lengths


def _as_sequenced(
    codes: np.ndarray,
    lengths: np.ndarray,
    quals: np.ndarray,
    layout: ReadLayout,
    rng: np.random.Generator,
) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """Orientation, then truncation at the read's own 3' end; decoded to strings."""
    n = len(lengths)
    reverse = rng.random(n) < layout.reverse_fraction
    if reverse.any():
        codes = reverse_complement_flat(codes, lengths, reverse)
        quals = reverse_segments(quals, lengths, reverse)
    truncated = np.zeros(n, dtype=bool)
    if layout.truncate_fraction > 0:
        truncated = rng.random(n) < layout.truncate_fraction
        missing = np.ceil(rng.exponential(layout.truncate_mean, size=n)).astype(np.int64)
        floor = np.minimum(lengths, layout.min_length)
        keep_len = np.where(truncated, np.maximum(floor, lengths - missing), lengths)
        seg = segment_ids(lengths)
        pos = np.arange(len(codes), dtype=np.int64) - offsets(lengths)[seg]
        mask = pos < keep_len[seg]
        truncated &= keep_len < lengths
        codes, quals, lengths = codes[mask], quals[mask], keep_len
    return decode_flat(codes, lengths), _phred_strings(quals, lengths), reverse, truncated


def _phred_strings(quals: np.ndarray, lengths: np.ndarray) -> list[str]:
    text = (quals + 33).astype(np.uint8).tobytes().decode("ascii")
    ends = np.cumsum(lengths)
    return [text[s:e] for s, e in zip((ends - lengths).tolist(), ends.tolist())]


def _default_ids(prefix: str, n: int) -> list[str]:
    width = max(5, len(str(n)))
    return [f"{prefix}{i:0{width}d}" for i in range(n)]


def strand_id_list(n: int) -> list[str]:
    """The ids simulate gives to ``n`` generated strands."""
    return _default_ids("strand", n)


#: Strands longer than this are left out of the summary's measured error rates: aligning
#: a read of 2 x 10^6 nt to its strand took longer than writing the whole set (it was
#: stopped after 300 s).
MEASURED_MAX_LENGTH = 10_000


def _rate(measured: dict, kind: str) -> str:
    """A measured rate for the summary; none without an aligned read."""
    return f"{measured[kind]:.3%} per nt" if measured["reads"] else "not measured"


def summarize(sim: SimulatedReads, channel: Channel, coverage: Coverage) -> str:
    """A one-screen summary of a simulated run."""
    lengths = np.fromiter((len(s) for s in sim.seqs), dtype=np.int64, count=len(sim.seqs))
    measured = sim.aligned_error_rates(max_reads=5000, max_length=MEASURED_MAX_LENGTH)
    counts = sim.coverage
    covered = int((counts > 0).sum())
    contaminants = int((sim.strand < 0).sum())
    lines = [
        f"reads               {len(sim):,}",
        f"strands             {len(sim.strand_seqs):,} ({covered:,} with reads, "
        f"{len(counts) - covered:,} without)",
        f"coverage            model {coverage.model}, mean {counts.mean():.2f} "
        f"(requested {coverage.mean:g}), variance {counts.var():.2f} "
        f"(model {coverage.expected_variance():.2f})",
        f"read length         min {lengths.min() if len(lengths) else 0}, "
        f"median {int(np.median(lengths)) if len(lengths) else 0}, "
        f"max {lengths.max() if len(lengths) else 0}",
        f"channel             {channel.name}; errors measured by aligning "
        f"{measured['reads']:,} reads to their strands"
        + (f" of at most {MEASURED_MAX_LENGTH:,} nt:"
           if any(len(s) > MEASURED_MAX_LENGTH for s in sim.strand_seqs) else ":"),
        f"  substitutions     {_rate(measured, 'substitution')} "
        f"(requested {channel.substitution:.3%})",
        f"  insertions        {_rate(measured, 'insertion')} "
        f"(requested {channel.insertion:.3%})",
        f"  deletions         {_rate(measured, 'deletion')} "
        f"(requested {channel.deletion_total:.3%}, bursts included)",
        f"reverse complement  {sim.reverse.mean() if len(sim) else 0:.1%} of reads",
        f"truncated           {sim.truncated.mean() if len(sim) else 0:.1%} of reads",
        f"contaminants        {contaminants:,} reads",
    ]
    return "\n".join(lines)


@dataclass
class SimulationPlan:
    """Everything ``dnaembed simulate`` takes, as plain data (the CLI fills it in)."""

    refs: str | None = None
    n_strands: int = 1000
    length: tuple[int, int] = (150, 150)
    max_homopolymer: int | None = None
    gc_min: float | None = None
    gc_max: float | None = None
    gc_window: int = 20
    primer_length: int = 0
    primer5: str | None = None
    primer3: str | None = None
    preset: str = "nanopore"
    overrides: dict[str, float | None] = field(default_factory=dict)
    coverage: dict[str, object] = field(default_factory=dict)
    layout: dict[str, object] = field(default_factory=dict)
    #: :class:`dnaembed.sim.designs.RelatedDesigns` options (windows, shared region, partners).
    related: dict[str, object] = field(default_factory=dict)
    seed: int = 0

    def channel(self) -> Channel:
        """The preset with any custom rates applied."""
        from dnaembed.sim.channel import get_preset

        return get_preset(self.preset).with_overrides(**self.overrides)

    def strands(self) -> tuple[list[str], list[str]]:
        """Strand ids and sequences: from ``refs`` or random, primers added."""
        from dnaembed.sim.strands import add_primers, random_strands

        related = RelatedDesigns(**self.related)
        # Separate streams for strands, primers, related designs and reads: changing one
        # option (say the primer length) does not reshuffle everything else.
        strand_rng, primer_rng, related_rng = (
            np.random.default_rng([self.seed, k]) for k in (1, 2, 3)
        )
        ids, seqs = self._designs(related, strand_rng)
        if related.active:
            with self._measured_against():
                seqs = related.apply(seqs, related_rng)
        left = _checked_primer(self.primer5, "5'")
        right = _checked_primer(self.primer3, "3'")
        if self.primer_length and (left is None or right is None):
            generated = random_strands(2, self.primer_length, primer_rng, max_homopolymer=3)
            left = generated[0] if left is None else left
            right = generated[1] if right is None else right
        if left or right:
            seqs = add_primers(seqs, left or "", right or "")
        return ids, seqs

    def _designs(self, related: RelatedDesigns,
                 rng: np.random.Generator) -> tuple[list[str], list[str]]:
        """The designs before they are related and primed: from ``refs``, windows or random;
        a related pool that does not fit them is refused before random ones are drawn."""
        from dnaembed.io.sequences import read_sequences
        from dnaembed.sim.designs import window_designs
        from dnaembed.sim.strands import random_strands

        constraints = dict(max_homopolymer=self.max_homopolymer, gc_window=self.gc_window,
                           gc_min=self.gc_min, gc_max=self.gc_max)
        if self.refs is not None:
            if related.window_shift:
                raise SettingsConflict("overlapping windows are made from random strands, "
                                       "not from references",
                                       {"window_shift": related.window_shift, "refs": self.refs})
            refs = read_sequences(self.refs, allow_empty=False)
            if len(refs) == 0:
                raise DnaembedError(f"{self.refs}: no strands in the file")
            _check_strand_ids(refs.ids, self.refs)
            with self._measured_against():
                related.check(min(len(s) for s in refs.seqs))
            return refs.ids, refs.seqs
        with self._measured_against():
            related.check(self.length[0])
        if related.window_shift:
            if self.length[0] != self.length[1]:
                raise SettingsConflict("overlapping windows need one strand length, not a range",
                                       {"window_shift": related.window_shift,
                                        "length": self.length})
            seqs = window_designs(self.n_strands, self.length[0], related.window_shift, rng,
                                  **constraints)
        else:
            seqs = random_strands(self.n_strands, self.length, rng, **constraints)
        return strand_id_list(self.n_strands), seqs

    @contextmanager
    def _measured_against(self) -> Iterator[None]:
        """A related pool's conflict also names what the designs' length came from."""
        try:
            yield
        except SettingsConflict as e:
            basis = {"refs": self.refs} if self.refs is not None else {"length": self.length}
            raise e.adding(**basis) from None


def _checked_primer(primer: str | None, end: str) -> str | None:
    if primer is None:
        return None
    upper = primer.upper()
    if not upper or set(upper) - set("ACGT"):
        raise DnaembedError(f"{end} primer {primer!r} must be a non-empty sequence over ACGT")
    return upper


#: What :func:`run_simulation` writes: PREFIX followed by each of these.
SIMULATED_SUFFIXES = (".refs.fasta", ".truth.tsv", ".fastq.gz")


def run_simulation(plan: SimulationPlan, prefix: str | Path) -> str:
    """Simulate per ``plan`` and write PREFIX.fastq.gz, PREFIX.truth.tsv, PREFIX.refs.fasta.

    Returns the summary text. The three files are all new or all absent (written to
    temporary files, renamed together); ``plan.refs`` is never overwritten; option
    errors are raised before anything is written.
    """
    from dnaembed.io.atomic import OutputSet, check_distinct
    from dnaembed.io.sequences import write_sequences
    from dnaembed.io.tables import command_header, write_tsv
    from dnaembed.log import logger

    channel = plan.channel()
    coverage = Coverage(**plan.coverage)
    layout = ReadLayout(**plan.layout)
    prefix = Path(prefix)
    directory = prefix.parent if str(prefix.parent) else Path(".")
    if not directory.is_dir():
        raise DnaembedError(f"{prefix}: cannot write: directory {directory} does not exist")
    files = {f"PREFIX{ext}": f"{prefix}{ext}" for ext in SIMULATED_SUFFIXES}
    check_distinct({"--refs": plan.refs}, files)  # before the work, not after it
    ids, seqs = plan.strands()
    logger.info("simulating reads of %d strands through the %s channel", len(seqs), channel.name)
    sim = simulate_reads(seqs, channel, coverage, layout, seed=plan.seed, strand_ids=ids)
    params = {
        "preset": plan.preset,
        "seed": plan.seed,
        "refs": plan.refs,
        "strands": len(seqs),
        **{k: v for k, v in plan.overrides.items() if v is not None},
        **plan.coverage,
        **plan.layout,
        **{k: v for k, v in plan.related.items() if v},
    }
    with OutputSet(files, inputs={"--refs": plan.refs}) as out:
        write_sequences(out.path("PREFIX.refs.fasta"), ids, seqs)
        write_tsv(
            out.path("PREFIX.truth.tsv"),
            ["read_id", "strand_id", "orientation"],
            sim.truth_rows(),
            header=command_header("simulate", params),
        )
        write_sequences(out.path("PREFIX.fastq.gz"), sim.ids, sim.seqs, sim.quals)
    logger.info(
        "wrote %s.fastq.gz (%d reads), %s.truth.tsv, %s.refs.fasta",
        prefix,
        len(sim),
        prefix,
        prefix,
    )
    summary = summarize(sim, channel, coverage)
    related = RelatedDesigns(**plan.related)
    if related.active:
        summary += f"\nrelated designs     {related.describe()}"
    return summary
