"""How many stored strands came back: recovered strands scored against the references.

Each reference strand is matched to its nearest recovered strand (Levenshtein
distance, either orientation of the recovered strand, since without primers the
orientation a cluster is read in is arbitrary). Candidates come from a k-mer
index: every recovered strand sharing k-mers with the reference, the ``candidates``
sharing the most are compared exactly (beyond the first, only up to the largest
distance of a reference to its first: :func:`_candidate_distances`). K-mers found in
more than ``max_occurrences`` strands (shared primers, low-complexity sequence) are
ignored, as minimap2 ignores repetitive minimizers. A reference that shares no k-mer
with any strand is compared with every strand when that is cheap (fewer than 10^7
pairs), else it counts as not found.

Scores (:func:`recovery_scores`): the fraction of references recovered exactly,
within edit distance 1 and within 3; the references found at all (nearest strand
within a quarter of the reference's length); the per-position error of those,
sum of distances / sum of lengths; and how many recovered strands are the
nearest exact match of no reference (spurious or duplicate strands).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein as RFLevenshtein

from dnaembed.arrays import sorted_unique
from dnaembed.encoding import kmer_codes, offsets, reverse_complement, segment_ids

if TYPE_CHECKING:
    from dnaembed.io.sequences import ReadSet

#: A reference whose nearest strand is further than this fraction of its length is "not found".
FOUND_FRACTION = 0.25
_BRUTE_FORCE_PAIRS = 10_000_000


@dataclass
class RecoveryMatch:
    """Per reference: its nearest recovered strand (-1: none), the distance, the orientation."""

    nearest: np.ndarray
    distance: np.ndarray
    reverse: np.ndarray
    ref_lengths: np.ndarray

    @property
    def found(self) -> np.ndarray:
        """References whose nearest strand is within FOUND_FRACTION of their length."""
        return (self.nearest >= 0) & (self.distance <= FOUND_FRACTION * self.ref_lengths)


def match_references(
    refs: Sequence[str],
    strands: Sequence[str],
    *,
    k: int = 12,
    candidates: int = 8,
    both_orientations: bool = True,
    max_occurrences: int = 32,
    workers: int = 1,
) -> RecoveryMatch:
    """The nearest recovered strand of every reference (see the module docstring).

    ``workers``: threads for the exact distances (-1: all cores).
    """
    n_refs = len(refs)
    ref_lengths = np.fromiter((len(r) for r in refs), dtype=np.int64, count=n_refs)
    nearest = np.full(n_refs, -1, dtype=np.int64)
    distance = np.full(n_refs, -1, dtype=np.int64)
    reverse = np.zeros(n_refs, dtype=bool)
    if n_refs == 0 or len(strands) == 0:
        return RecoveryMatch(nearest, distance, reverse, ref_lengths)
    targets = list(strands)
    if both_orientations:
        targets += [reverse_complement(s) for s in strands]
    n_strands = len(strands)

    pairs = _candidate_pairs(refs, targets, k, candidates, max_occurrences)
    if len(pairs):
        ref_i, tgt_i = pairs[:, 0], pairs[:, 1]
        dist = _candidate_distances(refs, targets, ref_i, tgt_i, workers)
        # Per reference, the smallest distance (ties: the lower target index).
        order = np.lexsort((tgt_i, dist, ref_i))
        first = np.ones(len(order), dtype=bool)
        first[1:] = ref_i[order][1:] != ref_i[order][:-1]
        best = order[first]
        nearest[ref_i[best]] = tgt_i[best]
        distance[ref_i[best]] = dist[best]

    missing = np.flatnonzero(nearest < 0)
    if len(missing) and len(missing) * len(targets) <= _BRUTE_FORCE_PAIRS:
        dist = process.cdist(
            [refs[i] for i in missing.tolist()],
            targets,
            scorer=RFLevenshtein.distance,
            dtype=np.int64,
            workers=workers,
        )
        nearest[missing] = np.argmin(dist, axis=1)
        distance[missing] = dist[np.arange(len(missing)), nearest[missing]]

    reverse = nearest >= n_strands
    nearest = np.where(nearest >= 0, nearest % n_strands, -1)
    return RecoveryMatch(nearest, distance, reverse, ref_lengths)


def _candidate_distances(refs: Sequence[str], targets: Sequence[str], ref_i: np.ndarray,
                         tgt_i: np.ndarray, workers: int) -> np.ndarray:
    """The distance of each (reference, target) pair, exact up to the largest distance of a
    reference to its first candidate (the one sharing the most k-mers) and capped above it,
    so each reference's nearest candidate and its distance come out exact.

    Why: an exact distance costs the product of the lengths, a capped one a band of that
    width. Random strands of 100 kb share ~1,000 12-mers by chance, so every reference had
    its full list of candidates: 0.28 s a pair, 0.002 s capped near the true match's.
    """
    def distances(which: np.ndarray, cutoff: int | None = None) -> np.ndarray:
        return process.cpdist([refs[i] for i in ref_i[which].tolist()],
                              [targets[j] for j in tgt_i[which].tolist()],
                              scorer=RFLevenshtein.distance, dtype=np.int64,
                              workers=workers, score_cutoff=cutoff)

    first = np.ones(len(ref_i), dtype=bool)
    first[1:] = ref_i[1:] != ref_i[:-1]
    dist = np.empty(len(ref_i), dtype=np.int64)
    dist[first] = distances(first)
    if not first.all():
        dist[~first] = distances(~first, int(dist[first].max()))
    return dist


def _distinct_kmers(seqs: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """(sequence index, k-mer code) of every distinct k-mer without N in each sequence."""
    codes, seq_of = kmer_codes(seqs, k)
    key = sorted_unique(seq_of * (4**k) + codes)
    return key // (4**k), key % (4**k)


def _candidate_pairs(
    refs: Sequence[str], targets: Sequence[str], k: int, candidates: int, max_occurrences: int
) -> np.ndarray:
    """(reference, target) pairs: per reference the targets sharing the most k-mers."""
    t_seq, t_kmer = _distinct_kmers(targets, k)
    r_seq, r_kmer = _distinct_kmers(refs, k)
    if len(t_kmer) == 0 or len(r_kmer) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(t_kmer, kind="stable")
    t_seq, t_kmer = t_seq[order], t_kmer[order]
    lo = np.searchsorted(t_kmer, r_kmer, "left")
    hi = np.searchsorted(t_kmer, r_kmer, "right")
    hits = hi - lo
    keep = (hits > 0) & (hits <= max_occurrences)
    r_seq, lo, hits = r_seq[keep], lo[keep], hits[keep]
    if len(hits) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    which = segment_ids(hits)
    at = lo[which] + (np.arange(int(hits.sum()), dtype=np.int64) - offsets(hits)[which])
    pair = r_seq[which] * len(targets) + t_seq[at]
    pair, shared = np.unique(pair, return_counts=True)
    ref_i, tgt_i = pair // len(targets), pair % len(targets)
    # The `candidates` targets sharing the most k-mers with each reference.
    order = np.lexsort((tgt_i, -shared, ref_i))
    ref_i, tgt_i = ref_i[order], tgt_i[order]
    first = np.ones(len(ref_i), dtype=bool)
    first[1:] = ref_i[1:] != ref_i[:-1]
    idx = np.arange(len(ref_i))
    rank = idx - np.maximum.accumulate(np.where(first, idx, 0))
    chosen = rank < candidates
    return np.stack([ref_i[chosen], tgt_i[chosen]], axis=1)


def read_references(path: str | os.PathLike) -> ReadSet:
    """The reference strands of ``path`` (a :class:`~dnaembed.io.sequences.ReadSet`); none is
    an error: every score against them was nan. So is an empty reference, which a strand
    of no bases matched exactly and whose error per position was 0/0 (numpy's warning on
    stderr)."""
    from dnaembed.errors import InputError
    from dnaembed.io.sequences import describe_path, read_sequences

    references = read_sequences(path, allow_empty=False)
    if not len(references.seqs):
        raise InputError(f"{describe_path(path)}: no reference sequences")
    return references


def recovery_scores(
    refs: Sequence[str],
    strands: Sequence[str],
    *,
    subset: np.ndarray | Sequence[int] | None = None,
    match: RecoveryMatch | None = None,
    **kwargs: Any,
) -> dict:
    """Strand-recovery figures (module docstring); ``subset``: score only these references.

    Pass ``match`` (from :func:`match_references`) to score several subsets
    without matching again; other keyword arguments go to :func:`match_references`.
    """
    if match is None:
        match = match_references(refs, strands, **kwargs)
    which = np.arange(len(refs)) if subset is None else np.asarray(subset, dtype=np.int64)
    n = len(which)
    dist = match.distance[which]
    has = match.nearest[which] >= 0
    found = match.found[which]
    exact = has & (dist == 0)
    lengths = match.ref_lengths[which]
    exact_targets = np.unique(match.nearest[which][exact])

    def frac(x: np.ndarray) -> float:
        return float(x.sum() / n) if n else float("nan")

    return {
        "references": n,
        "strands": len(strands),
        "exact": frac(exact),
        "within_1": frac(has & (dist <= 1)),
        "within_3": frac(has & (dist <= 3)),
        "found": frac(found),
        # Bases, not references: empty references found (library callers) give no 0/0.
        "error_per_position": float(dist[found].sum() / lengths[found].sum())
        if lengths[found].sum() > 0
        else float("nan"),
        "mean_distance_found": float(dist[found].mean()) if found.any() else float("nan"),
        "strands_not_exact_match": int(len(strands) - len(exact_targets)),
    }


def format_scores(scores: dict) -> str:
    """A short human-readable report of :func:`recovery_scores`."""
    return (
        f"references {scores['references']}, recovered strands {scores['strands']}\n"
        f"  exact      {scores['exact']:.4f}\n"
        f"  within 1   {scores['within_1']:.4f}\n"
        f"  within 3   {scores['within_3']:.4f}\n"
        f"  found      {scores['found']:.4f}  (nearest strand within "
        f"{FOUND_FRACTION:.0%} of the length)\n"
        f"  per-position error of found {scores['error_per_position']:.5f}\n"
        f"  strands that exactly match no reference {scores['strands_not_exact_match']}"
    )
