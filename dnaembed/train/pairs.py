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

from dnaembed.encoding import decode_flat, encode_padded, offsets, segment_ids
from dnaembed.errors import DnaembedError
from dnaembed.sim.channel import PRESETS, Channel, transmit

KINDS = ("read-read", "strand-read", "variant", "unrelated")
MEMBER_ROLES = ("strand", "read", "variant")


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
    group_size: int = 0
    member_mix: dict[str, float] = field(
        default_factory=lambda: {"strand": 0.1, "read": 0.6, "variant": 0.3}
    )

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
        if self.group_size == 1 or self.group_size < 0:
            raise DnaembedError("pairs: group_size must be 0 (independent pairs) or >= 2")
        if set(self.member_mix) - set(MEMBER_ROLES) or sum(self.member_mix.values()) <= 0:
            raise DnaembedError(f"pairs: member_mix takes weights for {MEMBER_ROLES}")


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
        return encode_padded(self.a, window), encode_padded(self.b, window)


@dataclass
class TrainBatch:
    """Sequences to embed once, and the labelled pairs among them (index arrays)."""

    seqs: list[str]
    left: np.ndarray
    right: np.ndarray
    distance: np.ndarray

    @property
    def pairs(self) -> int:
        """The number of labelled pairs."""
        return len(self.left)

    def padded(self, window: int) -> np.ndarray:
        """The sequences as a ``(n, window)`` code matrix for the encoder."""
        return encode_padded(self.seqs, window)

    @classmethod
    def from_pairs(cls, batch: PairBatch) -> TrainBatch:
        """``batch``'s pairs in the training format: every side a sequence of its own."""
        n = len(batch)
        idx = np.arange(n, dtype=np.int64)
        return cls(batch.a + batch.b, idx, idx + n, batch.distance)


def levenshtein_pairs(a: list[str], b: list[str], workers: int = 1) -> np.ndarray:
    """Exact edit distance of each pair ``(a[i], b[i])``."""
    if not a:
        return np.zeros(0, dtype=np.float32)
    return cpdist(a, b, scorer=RFLevenshtein.distance, workers=workers).astype(np.float32)


class _ChannelDraws:
    """What both samplers share: the RNG, the channel at a drawn rate, k-edit variants."""

    def __init__(self, config: PairConfig, seed: int | list[int]) -> None:
        self.config = config
        self.rng = np.random.default_rng(seed)
        self.mixes = [PRESETS[name] for name in ("illumina-array", "nanopore", "nanopore-hard")]

    def _channel(
        self, codes: np.ndarray, lengths: np.ndarray, error: np.ndarray, which: np.ndarray
    ) -> list[str]:
        """Pass the sequences where ``which`` through the channel at their own error rate."""
        out = decode_flat(codes, lengths)
        idx = np.flatnonzero(which)
        if len(idx) == 0:
            return out
        # Sequences are grouped into error-rate bins: one vectorised channel call per bin.
        bins = np.minimum(
            (error[idx] / max(self.config.max_error, 1e-9) * self.config.error_bins).astype(int),
            self.config.error_bins - 1,
        )
        starts = offsets(lengths)
        for b in np.unique(bins).tolist():
            members = idx[bins == b]
            rate = (b + 0.5) / self.config.error_bins * self.config.max_error
            sub_lengths = lengths[members]
            seg = segment_ids(sub_lengths)
            within = np.arange(int(sub_lengths.sum())) - offsets(sub_lengths)[seg]
            src = codes[starts[members][seg] + within]
            sent = transmit(src, sub_lengths, self._mix_at(rate), self.rng)
            for i, seq in zip(members.tolist(), decode_flat(sent.codes, sent.lengths)):
                out[i] = seq
        return out

    def _mix_at(self, rate: float) -> Channel:
        """A published error mix (chosen at random) scaled to ``rate`` errors per nt."""
        mix = self.mixes[int(self.rng.integers(len(self.mixes)))]
        return dataclasses.replace(mix.scaled(rate / mix.total_rate), name=f"pairs@{rate:.3f}")

    def _edit(self, seq: str, k: int) -> str:
        """``seq`` with ``k`` random single-base edits (substitution, insertion or deletion)."""
        rng = self.rng
        chars = list(seq)
        for op in rng.integers(0, 3, size=k).tolist():
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

    def _truncate(self, seqs: list[str], fraction: float) -> None:
        """Cut the 3' end of a random ``fraction`` of ``seqs`` (in place)."""
        cfg = self.config
        for i in np.flatnonzero(self.rng.random(len(seqs)) < fraction).tolist():
            missing = int(self.rng.integers(1, cfg.truncate_max + 1))
            seqs[i] = seqs[i][: max(len(seqs[i]) - missing, cfg.length_min // 3)]


class PairSampler(_ChannelDraws):
    """Independent pairs (:class:`PairBatch`); deterministic given ``seed``.

    Used for validation and benchmarks: every pair is drawn on its own, so the
    figures are over independent pairs of the stated mixture.
    """

    def __init__(self, config: PairConfig, seed: int | list[int]) -> None:
        super().__init__(config, seed)
        weights = np.array([config.mix.get(k, 0.0) for k in KINDS], dtype=np.float64)
        self.kind_p = weights / weights.sum()

    def sample_train(self, n_seqs: int) -> TrainBatch:
        """``n_seqs // 2`` independent pairs in the training format."""
        return TrainBatch.from_pairs(self.sample(max(1, n_seqs // 2)))

    def sample(self, n: int) -> PairBatch:
        """``n`` independent pairs, each of a kind drawn from the mixture."""
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
            self._truncate(side, cfg.truncate_fraction / 2)
        # Randomise which side is which, so the encoder never learns a role.
        swap = rng.random(n) < 0.5
        a = [y if s else x for x, y, s in zip(seq_a, seq_b, swap.tolist())]
        b = [x if s else y for x, y, s in zip(seq_a, seq_b, swap.tolist())]
        return PairBatch(a, b, levenshtein_pairs(a, b), kind)


class GroupSampler(_ChannelDraws):
    """Groups of ``group_size`` sequences of one strand, with every pair inside a group.

    One forward pass embeds ``n`` sequences and trains on ``m(m-1)/2`` pairs per
    group of ``m`` plus one cross-group (unrelated) pair per sequence: several
    times more labelled pairs per unit of compute than independent pairs. Members
    are the strand itself, reads through the channel at their own error rate, or
    k-edit variants (``member_mix``); pairs among variants reach the middle range
    (40-80 edits) that independent near pairs rarely cover. A random subset of
    groups carries the batch's shared primers, so some unrelated pairs share flanks.
    """

    def sample_train(self, n_seqs: int) -> TrainBatch:
        """About ``n_seqs`` sequences in groups of ``group_size`` (at least two groups),
        with their pairs."""
        cfg, rng = self.config, self.rng
        m = cfg.group_size
        groups = max(2, n_seqs // m)
        n = groups * m
        lengths = rng.integers(cfg.length_min, cfg.length_max + 1, size=groups)
        strands = rng.integers(0, 4, size=int(lengths.sum()), dtype=np.uint8)
        # Shared primers on a random subset of groups.
        primer_len = int(rng.integers(cfg.primer_length_min, cfg.primer_length_max + 1))
        left, right = (rng.integers(0, 4, size=primer_len, dtype=np.uint8) for _ in range(2))
        starts = offsets(lengths)
        for g in np.flatnonzero(rng.random(groups) < cfg.primer_fraction).tolist():
            s, e = starts[g], starts[g] + lengths[g]
            strands[s : s + primer_len] = left
            strands[e - primer_len : e] = right
        group = np.repeat(np.arange(groups), m)
        member_lengths = lengths[group]
        seg = segment_ids(member_lengths)
        within = np.arange(int(member_lengths.sum())) - offsets(member_lengths)[seg]
        codes = strands[starts[group][seg] + within]
        roles = np.array(MEMBER_ROLES)
        weights = np.array([cfg.member_mix.get(r, 0.0) for r in MEMBER_ROLES], dtype=np.float64)
        role = rng.choice(len(roles), size=n, p=weights / weights.sum())
        error = rng.random(n) * cfg.max_error
        seqs = self._channel(codes, member_lengths, error, role == MEMBER_ROLES.index("read"))
        for i in np.flatnonzero(role == MEMBER_ROLES.index("variant")).tolist():
            seqs[i] = self._edit(seqs[i], int(rng.integers(1, cfg.variant_max_edits + 1)))
        self._truncate(seqs, cfg.truncate_fraction)
        # Every pair within a group, and one partner in another group per sequence.
        iu, ju = np.triu_indices(m, k=1)
        base = (np.arange(groups) * m)[:, None]
        left_idx = (base + iu[None, :]).ravel()
        right_idx = (base + ju[None, :]).ravel()
        other = (group + rng.integers(1, groups, size=n)) % groups
        cross = other * m + rng.integers(0, m, size=n)
        left_idx = np.concatenate([left_idx, np.arange(n)])
        right_idx = np.concatenate([right_idx, cross])
        distance = levenshtein_pairs([seqs[i] for i in left_idx.tolist()],
                                     [seqs[j] for j in right_idx.tolist()])
        return TrainBatch(seqs, left_idx.astype(np.int64), right_idx.astype(np.int64), distance)


def make_sampler(config: PairConfig, seed: int | list[int]) -> PairSampler | GroupSampler:
    """The training sampler the config asks for (groups when ``group_size`` >= 2)."""
    return GroupSampler(config, seed) if config.group_size >= 2 else PairSampler(config, seed)
