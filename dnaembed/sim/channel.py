"""The storage channel: insertions, deletions and substitutions applied to strands.

One :class:`Channel` describes per-base error rates; :func:`transmit` applies it
to many sequences at once, vectorised over a flat code array (no Python loop per
base or per read). Rates are per nucleotide of the source strand:

* ``substitution``: the base is replaced by one of the three others;
* ``deletion``: the base is lost (single-base deletions);
* ``insertion``: a random base is inserted after the base;
* ``burst_rate``/``burst_mean_length``: a multi-base deletion (length >= 2,
  geometric with that mean) starts at the base; its bases count as deletions;
* ``homopolymer_bias``: nanopore-like deletion bias; the deletion probability of
  a base in a homopolymer run of length r is scaled by ``1 + bias * (r - 1)``
  and renormalised so the mean single-base deletion rate stays ``deletion``.

The rates are those an aligner measures: :data:`PRESETS` take their figures from
published alignments of DNA-storage reads to their designs (see method.md), and
``scripts/check_channel.py`` aligns simulated reads back to check them.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from dnaembed.encoding import random_codes, segment_ids
from dnaembed.errors import DnaembedError, SettingsConflict


@dataclass(frozen=True)
class Channel:
    """Per-base error rates of a sequencing/synthesis channel, and Phred levels for reads."""

    substitution: float = 0.0
    insertion: float = 0.0
    deletion: float = 0.0
    burst_rate: float = 0.0
    burst_mean_length: float = 3.0
    homopolymer_bias: float = 0.0
    quality: int = 36
    error_quality: int = 12
    name: str = "custom"

    def __post_init__(self) -> None:
        for field in ("substitution", "insertion", "deletion", "burst_rate"):
            value = getattr(self, field)
            if not 0.0 <= value <= 1.0:
                raise DnaembedError(f"channel {field} rate must be in [0, 1], got {value}")
        if self.substitution + self.deletion > 1.0:
            # One uniform draw per base decides it: deleted, substituted or kept.
            raise SettingsConflict(
                "the channel's substitution and deletion rates add up to more than 1",
                {"substitution": self.substitution, "deletion": self.deletion},
            )
        if self.burst_mean_length < 2.0:
            raise DnaembedError(
                f"burst mean length must be at least 2, got {self.burst_mean_length}"
            )
        if self.homopolymer_bias < 0:
            raise DnaembedError(f"homopolymer bias must be >= 0, got {self.homopolymer_bias}")

    @property
    def deletion_total(self) -> float:
        """Expected deleted bases per nt, bursts included."""
        return self.deletion + self.burst_rate * self.burst_mean_length

    @property
    def total_rate(self) -> float:
        """Expected edit events per nt (substitutions + insertions + deleted bases)."""
        return self.substitution + self.insertion + self.deletion_total

    def with_overrides(self, **rates: float | None) -> Channel:
        """A copy with the given (non-None) fields replaced; named 'custom' if anything changed."""
        changes = {k: v for k, v in rates.items() if v is not None}
        if not changes:
            return self
        return dataclasses.replace(self, name=f"{self.name}+custom", **changes)

    def scaled(self, factor: float) -> Channel:
        """The same error mix at ``factor`` times the rates (used to sample error levels)."""
        return dataclasses.replace(
            self,
            substitution=min(1.0, self.substitution * factor),
            insertion=min(1.0, self.insertion * factor),
            deletion=min(0.5, self.deletion * factor),
            burst_rate=min(1.0, self.burst_rate * factor),
            name=f"{self.name}*{factor:g}",
        )


#: Presets at published scales (method.md, "The channel").
PRESETS: dict[str, Channel] = {
    # Twist synthesis + Illumina (Erlich & Zielinski 2017): ~0.3% total, rare multi-base deletions.
    "illumina": Channel(
        0.0013,
        0.0006,
        0.0009,
        burst_rate=0.00003,
        burst_mean_length=3.0,
        quality=36,
        error_quality=20,
        name="illumina",
    ),
    # Older array synthesis + Illumina (Grass 2015, Organick 2018): ~1.5% total.
    "illumina-array": Channel(
        0.0060,
        0.0030,
        0.0052,
        burst_rate=0.0001,
        burst_mean_length=3.0,
        quality=34,
        error_quality=18,
        name="illumina-array",
    ),
    # Nanopore (Yazdi 2017; Microsoft's clustered 110-nt reads): about 2% of each, ~6% total.
    "nanopore": Channel(
        0.020,
        0.019,
        0.019,
        burst_rate=0.0003,
        burst_mean_length=3.0,
        homopolymer_bias=0.5,
        quality=14,
        error_quality=6,
        name="nanopore",
    ),
    # The harder published nanopore runs: ~12% total.
    "nanopore-hard": Channel(
        0.040,
        0.038,
        0.038,
        burst_rate=0.0008,
        burst_mean_length=3.0,
        homopolymer_bias=0.5,
        quality=11,
        error_quality=5,
        name="nanopore-hard",
    ),
}


def get_preset(name: str) -> Channel:
    """The preset called ``name``, or a clear error listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        known = ", ".join(PRESETS)
        raise DnaembedError(f"unknown channel preset {name!r} (known: {known})") from None


@dataclass
class Transmission:
    """Sequences after the channel (flat codes + lengths), with Phred scores and event counts."""

    codes: np.ndarray
    lengths: np.ndarray
    quals: np.ndarray
    substitutions: np.ndarray
    insertions: np.ndarray
    deletions: np.ndarray


def _homopolymer_run_lengths(codes: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """For each base, the length of the homopolymer run it belongs to (within its sequence)."""
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (codes[1:] != codes[:-1]) | (seg[1:] != seg[:-1])
    run_id = np.cumsum(new_run) - 1
    return np.bincount(run_id)[run_id]


def _deletion_probability(
    channel: Channel, codes: np.ndarray, seg: np.ndarray
) -> np.ndarray | np.float32:
    if channel.homopolymer_bias <= 0 or len(codes) == 0:
        return np.float32(channel.deletion)
    runs = _homopolymer_run_lengths(codes, seg).astype(np.float32)
    weight = 1.0 + np.float32(channel.homopolymer_bias) * (runs - 1.0)
    return np.minimum(np.float32(channel.deletion) * weight / weight.mean(), np.float32(0.9))


def _burst_mask(
    channel: Channel, lengths: np.ndarray, seg: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    n = len(seg)
    mask = np.zeros(n, dtype=bool)
    if channel.burst_rate <= 0 or n == 0:
        return mask
    starts = np.flatnonzero(rng.random(n) < channel.burst_rate)
    if len(starts) == 0:
        return mask
    # Burst length L >= 2 with mean m: L = 1 + Geometric(p), E = 1 + 1/p.
    burst = 1 + rng.geometric(1.0 / (channel.burst_mean_length - 1.0), size=len(starts))
    read_end = np.cumsum(lengths)[seg[starts]]
    ends = np.minimum(starts + burst, read_end)
    diff = np.zeros(n + 1, dtype=np.int64)
    np.add.at(diff, starts, 1)
    np.add.at(diff, ends, -1)
    return np.cumsum(diff[:n]) > 0


def transmit(
    codes: np.ndarray, lengths: np.ndarray, channel: Channel, rng: np.random.Generator
) -> Transmission:
    """Pass each sequence of a flat array once through ``channel``.

    Returns the noisy copies in the same order, with per-read event counts
    (what the channel did, not what an aligner would see). Callers with many
    reads should pass blocks of ~10^5 bases: the temporaries then stay in cache
    (2-3x faster than one call over 10^7 bases).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(codes)
    reads = len(lengths)
    seg = segment_ids(lengths)
    u = rng.random(n, dtype=np.float32)
    p_del = _deletion_probability(channel, codes, seg)
    deleted = u < p_del
    substituted = (~deleted) & (u < p_del + channel.substitution)
    deleted |= _burst_mask(channel, lengths, seg, rng)
    substituted &= ~deleted
    inserted = (rng.random(n, dtype=np.float32) < channel.insertion).astype(np.int64)

    emit = (~deleted).astype(np.int64) + inserted
    total = int(emit.sum())
    source = np.repeat(np.arange(n, dtype=np.int64), emit)
    first = np.cumsum(emit) - emit
    slot = np.arange(total, dtype=np.int64) - first[source]
    original = (slot == 0) & ~deleted[source]

    out = random_codes(rng, total)
    src_codes = codes[source[original]]
    is_sub = substituted[source[original]]
    shift = rng.integers(1, 4, size=int(is_sub.sum()), dtype=np.uint8)
    kept = src_codes.copy()
    subbed = src_codes[is_sub]
    kept[is_sub] = np.where(subbed < 4, (subbed + shift) % 4, subbed)
    out[original] = kept

    error_slot = ~original
    error_slot[np.flatnonzero(original)[is_sub]] = True
    # Phred: the channel's level for correct bases, its error level for changed ones, +-4 jitter.
    level = np.where(error_slot, np.int16(channel.error_quality), np.int16(channel.quality))
    jitter = rng.integers(-4, 5, size=total, dtype=np.int16)
    quals = np.clip(level + jitter, 2, 41).astype(np.uint8)

    out_lengths = np.bincount(seg, weights=emit, minlength=reads).astype(np.int64)
    return Transmission(
        codes=out,
        lengths=out_lengths,
        quals=quals,
        substitutions=np.bincount(seg, weights=substituted, minlength=reads).astype(np.int64),
        insertions=np.bincount(seg, weights=inserted, minlength=reads).astype(np.int64),
        deletions=np.bincount(seg, weights=deleted, minlength=reads).astype(np.int64),
    )


def aligned_rates(refs: list[str], reads: list[str]) -> dict[str, float]:
    """Per-nt substitution, insertion and deletion rates of ``reads`` against their ``refs``.

    Counted from one optimal alignment per pair (Levenshtein edit operations,
    ref -> read): what an aligner reports, which at high error rates is less than
    what the channel did (an insertion next to a deletion aligns as a substitution).
    """
    import Levenshtein

    counts = {"replace": 0, "insert": 0, "delete": 0}
    bases = 0
    for ref, read in zip(refs, reads):
        for op, _, _ in Levenshtein.editops(ref, read):
            counts[op] += 1
        bases += len(ref)
    bases = max(bases, 1)
    return {
        "substitution": counts["replace"] / bases,
        "insertion": counts["insert"] / bases,
        "deletion": counts["delete"] / bases,
        "bases": bases,
    }


#: Below this total rate, events and aligned edits differ by less than 2%: no calibration.
_CALIBRATION_THRESHOLD = 0.02


@functools.lru_cache(maxsize=64)
def calibrated(channel: Channel) -> Channel:
    """The generator rates whose *aligned* rates match ``channel``'s.

    The presets' figures come from aligning real reads to their designs, so the
    simulator must reproduce what an aligner sees. At high error rates the
    aligner merges adjacent events, so the generator runs slightly hotter. Found
    by a few fixed-point steps on a fixed internal sample (deterministic, ~0.2 s).
    """
    if channel.total_rate < _CALIBRATION_THRESHOLD:
        return channel
    from dnaembed.encoding import decode_flat

    rng = np.random.default_rng(20221117)
    n, length = 1500, 150
    src = random_codes(rng, n * length)
    lengths = np.full(n, length, dtype=np.int64)
    refs = decode_flat(src, lengths)
    target = {
        "substitution": channel.substitution,
        "insertion": channel.insertion,
        "deletion": channel.deletion_total,
    }
    gen = channel
    for _ in range(4):
        sent = transmit(src, lengths, gen, np.random.default_rng(rng.integers(1 << 62)))
        obs = aligned_rates(refs, decode_flat(sent.codes, sent.lengths))
        factor = {k: (target[k] / obs[k] if obs[k] > 0 else 1.0) for k in target}
        factor = {k: float(np.clip(v, 0.5, 2.0)) for k, v in factor.items()}
        gen = dataclasses.replace(
            gen,
            substitution=min(0.9, gen.substitution * factor["substitution"]),
            insertion=min(0.9, gen.insertion * factor["insertion"]),
            deletion=min(0.5, gen.deletion * factor["deletion"]),
            burst_rate=min(0.5, gen.burst_rate * factor["deletion"]),
        )
    return gen
