"""Related design pools: designs that are closer to each other than random strands are.

Real pools are not random (method.md, "Design pools are not random"):

* **overlapping windows** (Goldman et al., 2013): the designs are windows of
  one long sequence, design ``i + 1`` being design ``i`` shifted by ``S`` nt, so
  neighbouring designs are about ``2 S`` edits apart;
* **a shared region**: an address, index or sync stretch that every design
  carries at the same place;
* **partners**: a fraction of the designs each have one other design at a
  chosen distance, either the same sequence shifted by ``S`` nt (the first ``S``
  bases dropped, ``S`` new ones at the end: ``2 S`` edits for random sequence)
  or the same sequence with exactly ``D`` substitutions (edit distance ``D``,
  checked).

Every design stays its own strand (its own strand id in the truth): a
clusterer must keep them apart. :class:`RelatedDesigns` holds the options;
:meth:`RelatedDesigns.apply` turns random designs into a related pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dnaembed.encoding import decode_flat, random_codes
from dnaembed.errors import DnaembedError, SettingsConflict
from dnaembed.sim.strands import check_gc_limit, random_strands

#: Redraws of a partner whose substitutions came out closer than asked (a base put back).
_EDIT_REDRAWS = 20


@dataclass(frozen=True)
class RelatedDesigns:
    """How the designs of a pool relate (everything off by default).

    * ``window_shift``: > 0 makes the designs overlapping windows of one random
      sequence, each starting this many nt after the previous;
    * ``shared_length`` / ``shared_start``: a region of this many nt, starting
      at this 0-based position of every design, identical in all designs;
    * ``partner_fraction``: fraction of the designs that belong to a related
      pair (``round(fraction * n / 2)`` pairs), the partner made with
      ``partner_shift`` (shifted by this many nt) or ``partner_edits`` (exactly
      this many substitutions, outside the shared region).
    """

    window_shift: int = 0
    shared_length: int = 0
    shared_start: int = 0
    partner_fraction: float = 0.0
    partner_shift: int = 0
    partner_edits: int = 0

    def __post_init__(self) -> None:
        for name in ("window_shift", "shared_length", "shared_start", "partner_shift",
                     "partner_edits"):
            if getattr(self, name) < 0:
                raise DnaembedError(f"{name.replace('_', ' ')} must be >= 0, "
                                    f"got {getattr(self, name)}")
        if not 0 <= self.partner_fraction <= 1:
            raise DnaembedError(f"partner fraction must be in [0, 1], got {self.partner_fraction}")
        if self.partner_fraction > 0 and (self.partner_shift > 0) == (self.partner_edits > 0):
            raise DnaembedError("partners need exactly one of a partner shift or a number of "
                                "partner edits")
        if self.partner_fraction == 0 and (self.partner_shift or self.partner_edits):
            raise DnaembedError("a partner shift or partner edits need a partner fraction > 0")

    @property
    def active(self) -> bool:
        """Whether the designs are related at all (shifted windows, a shared stretch or
        partners)."""
        return bool(self.window_shift or self.shared_length or self.partner_fraction)

    def describe(self) -> str:
        """One line for the summary."""
        parts = []
        if self.window_shift:
            parts.append(f"overlapping windows {self.window_shift} nt apart")
        if self.partner_fraction:
            how = (f"shifted by {self.partner_shift} nt" if self.partner_shift
                   else f"{self.partner_edits} substitutions apart")
            parts.append(f"{self.partner_fraction:.0%} of designs in pairs {how}")
        if self.shared_length:
            parts.append(f"{self.shared_length} nt shared by all at position {self.shared_start}")
        return "; ".join(parts) + " (each design its own strand)"

    def check(self, shortest: int) -> None:
        """Refuse a shared region or partners that do not fit in designs of ``shortest`` nt
        (before the designs are made: the same rules :meth:`apply` meets)."""
        if self.shared_length:
            check_shared_region(self.shared_start, self.shared_length, shortest)
        if self.partner_fraction > 0:
            check_partner(shortest, shift=self.partner_shift, edits=self.partner_edits,
                          protect=(self.shared_start, self.shared_length))

    def apply(self, designs: list[str], rng: np.random.Generator) -> list[str]:
        """The pool ``designs`` turned related: partners first, then the shared region."""
        if designs:
            self.check(min(len(s) for s in designs))
        out = list(designs)
        if self.partner_fraction > 0:
            out = add_partners(out, self.partner_fraction, rng, shift=self.partner_shift,
                               edits=self.partner_edits,
                               protect=(self.shared_start, self.shared_length))
        if self.shared_length:
            out = share_region(out, self.shared_start, self.shared_length, rng)
        return out


def window_designs(n: int, length: int, shift: int, rng: np.random.Generator,
                   **constraints: Any) -> list[str]:
    """``n`` designs of ``length`` nt, overlapping windows ``shift`` nt apart of one sequence.

    ``constraints`` (``max_homopolymer``, ``gc_*``) apply to the whole sequence
    (:func:`dnaembed.sim.strands.random_strands`), so every window meets them.
    """
    if shift < 1:
        raise DnaembedError(f"window shift must be >= 1, got {shift}")
    if length < 1:
        raise DnaembedError(f"design length must be >= 1, got {length}")
    # The whole sequence is longer than a design: the window must fit in a design.
    check_gc_limit(length, **{k: v for k, v in constraints.items() if k.startswith("gc_")})
    whole = random_strands(1, length + (n - 1) * shift, rng, **constraints)[0]
    return [whole[i * shift : i * shift + length] for i in range(n)]


def share_region(designs: list[str], start: int, length: int,
                 rng: np.random.Generator) -> list[str]:
    """Every design with the same random ``length`` nt at positions ``start .. start+length``."""
    check_shared_region(start, length, min(len(s) for s in designs))
    region = decode_flat(random_codes(rng, length), np.array([length]))[0]
    return [s[:start] + region + s[start + length :] for s in designs]


def check_shared_region(start: int, length: int, shortest: int) -> None:
    """Refuse a shared region of ``length`` nt at ``start`` that runs past a design of
    ``shortest`` nt."""
    if start + length > shortest:
        raise SettingsConflict(
            f"the shared region does not fit in the shortest design ({shortest} nt)",
            {"shared_length": length, "shared_start": start},
        )


def check_partner(shortest: int, *, shift: int = 0, edits: int = 0,
                  protect: tuple[int, int] = (0, 0)) -> None:
    """Refuse a partner shift that is not shorter than a design of ``shortest`` nt, or more
    partner edits than it has positions outside ``protect`` (start, length)."""
    if shift >= shortest:
        raise SettingsConflict(
            f"the partner shift is not shorter than the shortest design ({shortest} nt)",
            {"partner_shift": shift},
        )
    start, length = protect
    free = shortest - len(range(start, min(start + length, shortest)))
    if edits > free:
        outside = f", {free} positions outside the shared region" if length else ""
        raise SettingsConflict(
            f"the partner edits do not fit in the shortest design ({shortest} nt{outside})",
            {"partner_edits": edits, **({"shared_length": length} if length else {})},
        )


def add_partners(designs: list[str], fraction: float, rng: np.random.Generator, *,
                 shift: int = 0, edits: int = 0,
                 protect: tuple[int, int] = (0, 0)) -> list[str]:
    """Replace designs by partners of others: ``round(fraction * n / 2)`` related pairs.

    A pair is a source design and, in place of another design, its partner:
    the source shifted by ``shift`` nt, or the source with exactly ``edits``
    substitutions at positions outside ``protect`` (start, length). Which
    designs pair up is drawn from ``rng``; the number of designs is unchanged.
    """
    n = len(designs)
    pairs = int(round(fraction * n / 2))
    if pairs == 0:
        return list(designs)
    chosen = rng.permutation(n)[: 2 * pairs]
    out = list(designs)
    for source, target in zip(chosen[:pairs].tolist(), chosen[pairs:].tolist()):
        seq = designs[source]
        if shift:
            check_partner(len(seq), shift=shift)
            tail = decode_flat(random_codes(rng, shift), np.array([shift]))[0]
            out[target] = seq[shift:] + tail
        else:
            out[target] = _substituted(seq, edits, rng, protect)
    return out


def _substituted(seq: str, edits: int, rng: np.random.Generator,
                 protect: tuple[int, int]) -> str:
    """``seq`` with ``edits`` substitutions outside ``protect``, exactly ``edits`` edits away."""
    from rapidfuzz.distance import Levenshtein

    check_partner(len(seq), edits=edits, protect=protect)
    start, length = protect
    free = np.setdiff1d(np.arange(len(seq)), np.arange(start, start + length))
    codes = np.frombuffer(seq.encode("ascii"), dtype=np.uint8)
    for _ in range(_EDIT_REDRAWS):
        where = rng.choice(free, edits, replace=False)
        new = codes.copy()
        # A substitution is another base: shift the base by 1-3 places in ACGT.
        order = np.frombuffer(b"ACGT", dtype=np.uint8)
        index = np.searchsorted(order, new[where])
        new[where] = order[(index + rng.integers(1, 4, size=edits)) % 4]
        partner = new.tobytes().decode("ascii")
        # Substitutions next to each other can cost less as an indel pair: draw again.
        if Levenshtein.distance(seq, partner) == edits:
            return partner
    # Many substitutions on a short design nearly always include neighbours that align
    # as fewer edits: a matter of the settings, not of bad luck.
    raise SettingsConflict(f"could not place that many substitutions exactly that many edits "
                           f"apart in a {len(seq)}-nt design ({_EDIT_REDRAWS} tries; fewer "
                           "edits or longer designs)", {"partner_edits": edits})
