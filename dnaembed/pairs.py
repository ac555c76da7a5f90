"""Training pairs drawn on the fly from the storage channel, labelled with exact edit distances.

A batch mixes four kinds of pair, so that the whole range clustering needs is
covered (0 edits up to unrelated strands):

* ``read-read``: two reads of one strand, each through the channel at a
  per-pair error rate drawn up to ``max_error`` (nanopore-hard is ~12%);
* ``strand-read``: a strand and one of its reads;
* ``variant``: a strand and a copy with k random edits, k uniform in
  ``1..variant_max_edits`` (spreads labels evenly over the near range);
* ``unrelated``: reads of two different strands.

Strand lengths are uniform in ``[length_min, length_max]`` (primers
included). A fraction of pairs carry shared primer flanks: the two strands of
an unrelated pair then agree on both ends, as in real designs (their distance
drops from ~80 to ~55 at 150 nt). A fraction of reads lose their 3' end.
Labels come from rapidfuzz's bit-parallel Levenshtein distance.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from rapidfuzz.distance import Levenshtein as RFLevenshtein
from rapidfuzz.process import cpdist

from dnaembed.channel import PRESETS, Channel, transmit
from dnaembed.encoding import decode_flat, encode_flat, offsets, segment_ids, to_padded
from dnaembed.errors import DnaembedError

KINDS = ("read-read", "strand-read", "variant", "unrelated")


@dataclass
class PairConfig:
    """The mixture of training pairs (plain data; part of every training config)."""

    length_min: int = 100
    length_max: int = 200
    max_error: float = 0.15
    mix: dict[str, float] = field(
        default_factory=lambda: {
            "read-read": 0.35,
            "strand-read": 0.15,
            "variant": 0.25,
            "unrelated": 0.25,
        }
    )
    variant_max_edits: int = 60
    primer_fraction: float = 0.5
    primer_length_min: int = 18
    primer_length_max: int = 25
    truncate_fraction: float = 0.05
    truncate_max: int = 60
    error_bins: int = 8

    def __post_init__(self) -> None:
        if not 1 <= self.length_min <= self.length_max:
            raise DnaembedError("pairs: need 1 <= length_min <= length_max")
        if not 0 <= self.max_error <= 0.5:
            raise DnaembedError("pairs: max_error must be in [0, 0.5]")
        unknown = set(self.mix) - set(KINDS)
        if unknown:
            raise DnaembedError(f"pairs: unknown pair kinds {sorted(unknown)} (known: {KINDS})")
        if sum(self.mix.values()) <= 0 or min(self.mix.values()) < 0:
            raise DnaembedError("pairs: mixture weights must be >= 0 with a positive sum")
        if 2 * self.primer_length_max >= self.length_min:
            raise DnaembedError("pairs: primers must leave room for a payload")


@dataclass
class PairBatch:
    """Pairs as strings, their exact distances, and the kind of each pair."""

    a: list[str]
    b: list[str]
    distance: np.ndarray
    kind: np.ndarray

    def __len__(self) -> int:
        return len(self.a)

    def padded(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Both sides as ``(n, window)`` code matrices for the encoder."""
        return (to_padded(*encode_flat(self.a), window), to_padded(*encode_flat(self.b), window))


def levenshtein_pairs(a: list[str], b: list[str], workers: int = 1) -> np.ndarray:
    """Exact edit distance of each pair ``(a[i], b[i])``."""
    if not a:
        return np.zeros(0, dtype=np.float32)
    return cpdist(a, b, scorer=RFLevenshtein.distance, workers=workers).astype(np.float32)


class PairSampler:
    """Draws :class:`PairBatch` es; deterministic given ``seed`` (each DDP rank passes its own)."""

    def __init__(self, config: PairConfig, seed: int | list[int]) -> None:
        self.config = config
        self.rng = np.random.default_rng(seed)
        weights = np.array([config.mix.get(k, 0.0) for k in KINDS], dtype=np.float64)
        self.kind_p = weights / weights.sum()
        self.mixes = [PRESETS[name] for name in ("illumina-array", "nanopore", "nanopore-hard")]

    def state(self) -> dict:
        """RNG state, for resuming."""
        return self.rng.bit_generator.state

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state

    def sample(self, n: int) -> PairBatch:
        cfg, rng = self.config, self.rng
        if n == 0:
            return PairBatch([], [], np.zeros(0, np.float32), np.zeros(0, np.int8))
        kind = rng.choice(len(KINDS), size=n, p=self.kind_p).astype(np.int8)
        lengths = rng.integers(cfg.length_min, cfg.length_max + 1, size=n)
        strand_a = rng.integers(0, 4, size=int(lengths.sum()), dtype=np.uint8)
        strand_b = strand_a.copy()
        unrelated = kind == KINDS.index("unrelated")
        seg = segment_ids(lengths)
        fresh = rng.integers(0, 4, size=len(strand_b), dtype=np.uint8)
        # Unrelated pairs get an independent strand, except for shared primer flanks.
        primer_len = np.where(
            rng.random(n) < cfg.primer_fraction,
            rng.integers(cfg.primer_length_min, cfg.primer_length_max + 1, size=n),
            0,
        )
        pos = np.arange(len(strand_b)) - offsets(lengths)[seg]
        flank = (pos < primer_len[seg]) | (pos >= (lengths - primer_len)[seg])
        replace = unrelated[seg] & ~flank
        strand_b[replace] = fresh[replace]

        error = rng.random(n) * cfg.max_error
        through_a = (kind == KINDS.index("read-read")) | unrelated
        through_b = kind != KINDS.index("variant")
        seq_a = self._channel(strand_a, lengths, error, through_a)
        seq_b = self._channel(strand_b, lengths, error, through_b)
        variant = np.flatnonzero(kind == KINDS.index("variant"))
        for i in variant.tolist():
            seq_b[i] = self._edit(seq_b[i], int(rng.integers(1, cfg.variant_max_edits + 1)))
        for side in (seq_a, seq_b):
            cut = np.flatnonzero(rng.random(n) < cfg.truncate_fraction / 2)
            for i in cut.tolist():
                missing = int(rng.integers(1, cfg.truncate_max + 1))
                side[i] = side[i][: max(len(side[i]) - missing, cfg.length_min // 3)]
        # Randomise which side is which, so the encoder never learns a role.
        swap = rng.random(n) < 0.5
        a = [y if s else x for x, y, s in zip(seq_a, seq_b, swap.tolist())]
        b = [x if s else y for x, y, s in zip(seq_a, seq_b, swap.tolist())]
        return PairBatch(a, b, levenshtein_pairs(a, b), kind)

    def _channel(
        self, codes: np.ndarray, lengths: np.ndarray, error: np.ndarray, which: np.ndarray
    ) -> list[str]:
        """Pass the sequences where ``which`` through the channel at their pair's error rate."""
        out = decode_flat(codes, lengths)
        idx = np.flatnonzero(which)
        if len(idx) == 0:
            return out
        # Pairs are grouped into error-rate bins: one vectorised channel call per bin.
        bins = np.minimum(
            (error[idx] / max(self.config.max_error, 1e-9) * self.config.error_bins).astype(int),
            self.config.error_bins - 1,
        )
        starts = offsets(lengths)
        for b in np.unique(bins).tolist():
            members = idx[bins == b]
            rate = (b + 0.5) / self.config.error_bins * self.config.max_error
            channel = self._mix_at(rate)
            sub_lengths = lengths[members]
            seg = segment_ids(sub_lengths)
            within = np.arange(int(sub_lengths.sum())) - offsets(sub_lengths)[seg]
            src = codes[starts[members][seg] + within]
            sent = transmit(src, sub_lengths, channel, self.rng)
            for i, s in zip(members.tolist(), decode_flat(sent.codes, sent.lengths)):
                out[i] = s
        return out

    def _mix_at(self, rate: float) -> Channel:
        """A published error mix (chosen at random) scaled to ``rate`` errors per nt."""
        mix = self.mixes[int(self.rng.integers(len(self.mixes)))]
        return dataclasses.replace(mix.scaled(rate / mix.total_rate), name=f"pairs@{rate:.3f}")

    def _edit(self, seq: str, k: int) -> str:
        """``seq`` with ``k`` random single-base edits (substitution, insertion or deletion)."""
        rng = self.rng
        chars = list(seq)
        ops = rng.integers(0, 3, size=k)
        for op in ops.tolist():
            if not chars:
                chars.append("ACGT"[int(rng.integers(4))])
                continue
            i = int(rng.integers(len(chars)))
            if op == 0:
                chars[i] = "ACGT".replace(chars[i], "")[int(rng.integers(3))]
            elif op == 1:
                chars.insert(i, "ACGT"[int(rng.integers(4))])
            else:
                del chars[i]
        return "".join(chars)
