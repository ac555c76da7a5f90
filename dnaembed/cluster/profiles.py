"""What the rescue aligns a read to for each candidate cluster: a consensus of a few reads.

The rescue (:mod:`dnaembed.cluster.rescue`) compares a read's distance to its
best candidate cluster with its distance to the runner-up. Measured against
single member reads, both distances carry the member's own errors besides the
read's, which blurs a margin of a few edits; measured against a consensus of
the cluster's central full-length reads, they come close to the distances to
the designs themselves (what the labels of real sets are decided on).

The consensus is a star alignment: every other read is aligned globally to the
representative (python-Levenshtein's edit operations), and an edit that a strict
majority of the reads (the representative included) agree on is applied. With
three reads, two that agree outvote the third; a representative's own error is
thus corrected where two other reads disagree with it. A cluster with fewer
than :data:`MIN_READS` central reads keeps its reads as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import Levenshtein
import numpy as np

from dnaembed.io.strings import oriented_strings

#: Fewest reads (the representative included) for a consensus.
MIN_READS = 3


def star_consensus(reference: str, others: Sequence[str]) -> str:
    """The reference with every edit applied that a strict majority of all the reads share.

    Edits are python-Levenshtein's (``replace``/``delete``/``insert``, in the
    reference's coordinates), indels moved to the start of their homopolymer run (reads
    that lost or gained a base of one run vote for one edit, wherever their alignment
    put it); a read's ``n``-th insertion before one reference position counts as the
    same edit as another read's ``n``-th there.
    """
    # The inner loop of the rescue's cost (every candidate cluster of every read examined):
    # plain dict counts, indels moved left inline.
    votes: dict[tuple[int, int, int, str], int] = {}
    get = votes.get
    for read in others:
        slot, run = -1, 0
        for tag, i, j in Levenshtein.editops(reference, read):
            if tag == "replace":
                key = (i, 2, 0, read[j])
            elif tag == "insert":
                base = read[j]
                while i > 0 and reference[i - 1] == base:  # to the start of its run
                    i -= 1
                run = run + 1 if i == slot else 0
                slot = i
                key = (i, 1, run, base)
            else:
                base = reference[i]
                while i > 0 and reference[i - 1] == base:
                    i -= 1
                key = (i, 2, 0, "")
            votes[key] = get(key, 0) + 1
    need = (len(others) + 1) // 2 + 1  # a strict majority of len(others) + 1 reads
    agreed = sorted(key for key, count in votes.items() if count >= need)
    if not agreed:
        return reference
    # Rebuilt by slices between the agreed edits (few), not base by base.
    parts, at = [], 0
    for i, kind, _, base in agreed:
        if i < at:
            continue  # a second change of one base (a deletion and a substitution)
        parts.append(reference[at:i])
        parts.append(base)
        at = i if kind == 1 else i + 1
    parts.append(reference[at:])
    return "".join(parts)


def profile_of(reads: list[str], consensus: bool = True) -> list[str]:
    """What a cluster of these central reads (oriented, representative first) is aligned to:
    their consensus, or the reads themselves when there are fewer than :data:`MIN_READS`."""
    if consensus and len(reads) >= MIN_READS:
        return [star_consensus(reads[0], reads[1:])]
    return reads


class ClusterProfiles:
    """Per cluster, on demand: the sequences the rescue aligns reads to, in the cluster's
    orientation (its consensus, or its central reads when there are too few).

    ``known``: profiles by their (read, orientation) members, shared between the
    rescue's passes: a cluster that both examine (renumbered, with the same central
    reads) is built once.
    """

    def __init__(self, seqs: Sequence[str], rc_seqs: Sequence[str] | None,
                 members: list[list[tuple[int, int]]], *, consensus: bool = True,
                 known: dict[tuple, list[str]] | None = None) -> None:
        self.seqs, self.rc_seqs, self.members = seqs, rc_seqs, members
        self.consensus = consensus
        self.known = {} if known is None else known
        self._cache: dict[int, list[str]] = {}

    def _oriented(self, read: int, flip: int) -> str:
        return self.rc_seqs[read] if flip and self.rc_seqs is not None else self.seqs[read]

    def key(self, cluster: int) -> tuple:
        """The cluster's central (read, orientation) pairs: what its profile is built from."""
        return tuple(self.members[cluster])

    def missing(self, clusters: Iterable[int]) -> dict[tuple, list[str]]:
        """The oriented reads of each of ``clusters`` whose profile is not yet known, by key
        (to build elsewhere, :func:`dnaembed.cluster.rescue_tasks.build_profiles`, which
        builds consensus profiles, then :meth:`add`)."""
        keys: dict[tuple, None] = {}
        for c in clusters:
            key = self.key(c)
            if key not in self.known:
                keys[key] = None
        # Every read fetched in one bulk take: one at a time from a read store was most of
        # this step, on the client's thread while the workers wait (the rescue at 10^6
        # reads, two workers: 6.4-6.7 s against 6.7-7.4 with reads fetched one by one).
        pairs = np.array([pair for key in keys for pair in key], np.int64).reshape(-1, 2)
        strings = iter(oriented_strings(self.seqs, self.rc_seqs, pairs[:, 0], pairs[:, 1]))
        return {key: [next(strings) for _ in key] for key in keys}

    def add(self, key: tuple, profile: list[str]) -> None:
        """Records the ``profile`` built for ``key`` (:meth:`missing`)."""
        self.known[key] = profile

    def __call__(self, cluster: int) -> list[str]:
        found = self._cache.get(cluster)
        if found is None:
            key = self.key(cluster)
            found = self.known.get(key)
            if found is None:
                found = profile_of([self._oriented(r, f) for r, f in key], self.consensus)
                self.known[key] = found
            self._cache[cluster] = found
        return found
