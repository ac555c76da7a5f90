"""A second chance for reads left alone: truncated reads and outliers.

A read that lost its end (5% of the real set's reads are under 94 nt) is far
from its strand's full-length reads by the missing length alone, so neither the
embedding nor a global Levenshtein check puts it with them. After the main
clustering, such reads are aligned semi-globally (infix: the read may start and
end anywhere in the target, edlib ``HW`` mode) against the consensus of a few
reads (:data:`MEMBERS_PER_CLUSTER`: the representative and the most central
other full-length reads; :mod:`dnaembed.cluster.profiles`) of a few candidate
clusters, in both orientations when both are clustered, and move to the best
cluster only when

* it is clearly better than the runner-up cluster: at most 0.85 of the
  runner-up's edits, and at least 5 fewer. The rule is relative because how
  close unrelated reads come depends on the read's length and on what all
  strands share (primers); primer-only reads, which align equally well to
  every strand, stay where they are. When all candidates point to one cluster
  (a good embedding), the runner-up is a random other cluster: what an
  unrelated strand scores; and
* the alignment stays clearly below what unrelated reads reach: at most
  ``rate * length`` edits, ``rate`` being, per base of the reference length,
  halfway between the main threshold and the unrelated peak of the threshold
  histogram (:attr:`Threshold.rescue_rate`).

Why the comparison with the runner-up, not a tight distance bound, decides: on
real data truncated reads are the sequencer's worst reads, their last bases
full of errors (ldpc-exp7: many reads that lost a third of their length carry
15-25% edits against their strand, against ~2% for full-length reads).

Two passes, so that no read moves into a cluster that is itself moving:

1. reads of full length in small clusters (at most ``max_size`` reads), against
   clusters with a full-length representative that are larger than their own
   (by size, then by cluster number: moves only go one way, so they cannot
   cycle; a read that joins a cluster whose representative itself moves on
   follows it);
2. every read in a cluster whose representative is short (shorter than
   ``full_length``, by default 90% of the median read length), against every
   cluster with a full-length representative, however small (a design with a
   single full-length read still takes its truncated reads).

Where: on a runner of worker processes the k-mer search, the consensus and the
alignments are tasks (:mod:`dnaembed.cluster.kmer_tasks`,
:mod:`dnaembed.cluster.rescue_tasks`); the candidates (drawn from a seeded generator,
in read order) and the decisions are taken here, so the result is the same wherever
the tasks run. In one process all of it runs here, in one pass, the k-mer search's
blocks on the process's threads (:meth:`~dnaembed.cluster.kmers.KmerIndex.candidates`).

Cost: a cluster's consensus is built the first time a read needs it and kept for
both passes (most clusters are candidates of many reads); the k-mer index reverses
the reads asked about rather than the clusters' reads, and counts only their
k-mers (:mod:`dnaembed.cluster.kmers`). On the real set the rescue costs what the
single-read rescue did.

The rule and the k-mer search's settings: :mod:`dnaembed.cluster.rescue_rule`; the
candidates and the clusters' central reads: :mod:`dnaembed.cluster.rescue_candidates`.
More in ``docs/algorithms.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.cluster.kmer_tasks import search_in_tasks
from dnaembed.cluster.labels import assemble
from dnaembed.cluster.profiles import ClusterProfiles
from dnaembed.cluster.rescue_candidates import (
    MAX_CANDIDATES,
    MEMBERS_PER_CLUSTER,
    CentralMembers,
    central_members,
    choose_candidates,
    member_kmers,
)
from dnaembed.cluster.rescue_rule import DEFAULT_SEARCH, CandidateSearch, accepted, alignment_bound
from dnaembed.cluster.rescue_tasks import build_missing_profiles, score_in_tasks
from dnaembed.io.strings import strings_of
from dnaembed.log import counted, logger

if TYPE_CHECKING:
    from dnaembed.execute import Runner

#: Pass 1 examines every full-length read of clusters up to this size; of larger ones (up
#: to ``max_size``), the representative only, and the cluster moves with it.
READ_MAX_SIZE = 2


def rescue_reads(
    seqs: Sequence[str],
    rc_seqs: Sequence[str] | None,
    labels: np.ndarray,
    orientation: np.ndarray,
    centrality: np.ndarray,
    weights: np.ndarray,
    neighbours_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    *,
    rate: float,
    max_size: int,
    full_length: float = 0.0,
    seed: int = 0,
    details: list | None = None,
    lengths: np.ndarray | None = None,
    search: CandidateSearch = DEFAULT_SEARCH,
    runner: Runner | None = None,
    threads: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Move leftover reads into clusters they clearly belong to (see the module notes).

    ``labels``/``orientation`` as :func:`assemble` makes them; ``centrality``
    chooses representatives; ``neighbours_of(rows)`` returns the nearest reads
    of those rows and their embedding distances (``(len(rows), m)``, -1 for
    none). ``details``, when given, receives ``(read, length, best, runner_up,
    cluster, accepted)`` for every read examined. ``lengths``: the reads' lengths, when
    known (else measured from ``seqs``, which reads every sequence once). ``search``: how
    candidate clusters are found by k-mers
    (:func:`~dnaembed.cluster.rescue_rule.rescue_settings`). ``runner``: where the k-mer
    search and the alignments run (:mod:`dnaembed.execute`; None: here), ``threads`` this
    process's threads for a search that is cheaper here
    (:func:`~dnaembed.cluster.kmer_tasks.searched_here`; 0: every available core); the
    result depends on neither. Returns labels, orientations, representatives and the number
    of reads moved (counting collapsed copies).
    """
    lengths = np.asarray(lengths if lengths is not None else [len(s) for s in seqs], np.int64)
    centrality = np.asarray(centrality, dtype=np.float64)
    labels, orientation, reps = assemble(labels, orientation, centrality, weights)
    moved = 0
    known_profiles: dict = {}  # shared by the passes (ClusterProfiles)
    for full_pass in (True, False):
        targets = lengths[reps] >= full_length  # clusters of a full-length representative
        rows = _pass_rows(full_pass, labels, reps, weights, lengths, targets, full_length,
                          max_size)
        if len(rows) == 0 or not targets.any():
            continue
        members = central_members(labels, orientation, centrality, lengths, reps, full_length,
                                   max(MEMBERS_PER_CLUSTER, search.reads))
        new_labels, new_orient, n_moved = _rescue_pass(
            seqs, rc_seqs, labels, orientation, reps, members, weights, lengths, rows, targets,
            neighbours_of, rate, details, upward_only=full_pass, seed=seed, search=search,
            known_profiles=known_profiles, runner=runner, threads=threads,
        )
        if n_moved:
            moved += n_moved
            labels, orientation, reps = _reassembled(new_labels, new_orient, reps, centrality,
                                                     weights)
    return labels, orientation, reps, moved


def _reassembled(labels: np.ndarray, orientation: np.ndarray, reps: np.ndarray,
                 centrality: np.ndarray, weights: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`assemble` after a pass, each representative that stayed in its cluster kept.
    One that moved keeps no priority: its tie with its new cluster's own went to the
    earlier read, a truncated one in pass 2."""
    bonus = np.zeros(len(labels))
    bonus[reps[labels[reps] == np.arange(len(reps))]] = np.inf
    return assemble(labels, orientation, centrality + bonus, weights)


def _rescue_pass(seqs, rc_seqs, labels, orientation, reps, members, weights, lengths, rows,
                 targets, neighbours_of, rate, details, *, upward_only: bool, seed: int,
                 search: CandidateSearch, known_profiles: dict, runner, threads: int
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """One pass over ``rows``: their candidate clusters, the alignments to the candidates'
    consensus, the moves the rule accepts. New labels and orientations, and the reads moved
    (``labels`` and ``orientation`` are left as they are)."""
    started = time.perf_counter()
    examined, chosen = _candidates(seqs, rc_seqs, labels, reps, members, lengths, rows,
                                   targets, neighbours_of, upward_only=upward_only, seed=seed,
                                   search=search, runner=runner, threads=threads)
    searched = time.perf_counter()
    central = CentralMembers(members.reads[:, :MEMBERS_PER_CLUSTER],
                             members.flips[:, :MEMBERS_PER_CLUSTER])  # views, not copies
    profiles = ClusterProfiles(seqs, rc_seqs, central, known=known_profiles)
    build_missing_profiles(profiles, dict.fromkeys(c for cs in chosen for c in cs), runner)
    built = time.perf_counter()
    bounds = [alignment_bound(int(lengths[row]), rate) for row in examined]
    scores = score_in_tasks(seqs, rc_seqs, examined, chosen, bounds, profiles, runner)
    logger.debug("rescue pass: k-mer search and candidates %.1f s, profiles %.1f s, "
                 "alignments %.1f s", searched - started, built - searched,
                 time.perf_counter() - built)
    before, labels, orientation = labels, labels.copy(), orientation.copy()
    moved = _move_accepted(labels, orientation, examined, scores, lengths, weights, rate,
                           details)
    if upward_only and moved:
        moved += _follow_moved_pieces(labels, orientation, before, reps, weights)
        _follow_moved_representatives(labels, orientation, before, reps)
    return labels, orientation, moved


def _candidates(seqs, rc_seqs, labels, reps, members, lengths, rows, targets, neighbours_of, *,
                upward_only: bool, seed: int, search: CandidateSearch, runner, threads: int
                ) -> tuple[list[int], list[list[int]]]:
    """The reads of ``rows`` that have candidate clusters, and theirs: by the k-mers they
    share with the target clusters' central reads, then by their embedding neighbours."""
    target_ids = np.flatnonzero(targets)
    # Pass 2's reads are the truncated ones, whose strands the k-mers are there to find:
    # their k never grows (see CandidateSearch.k_for).
    k = search.k_for(len(rows), float(lengths[rows].mean()), rc_seqs is not None) \
        if upward_only else search.k
    kmer_index = member_kmers(seqs, rc_seqs, members, target_ids, search.reads, k)
    by_kmers, _ = search_in_tasks(kmer_index, strings_of(seqs, rows), MAX_CANDIDATES, runner,
                                  min_votes=search.min_votes, threads=threads)
    logger.info("rescue: %s against %s; %d-mers, those held by more than %d clusters "
                "ignored", counted(len(rows), "read"), counted(len(target_ids), "cluster"), k,
                kmer_index.cut)
    # Clusters are numbered by decreasing size: "larger" is a smaller number.
    limits = labels[rows] if upward_only else np.full(len(rows), len(reps))
    return choose_candidates(rows, by_kmers, neighbours_of(rows), labels, targets, limits,
                             np.random.default_rng([seed, 13]))


def _move_accepted(labels, orientation, examined, scores, lengths, weights, rate,
                   details) -> int:
    """Moves each examined read the rule accepts to its best cluster (in place); returns the
    reads moved (counting collapsed copies). ``details`` as :func:`rescue_reads` says."""
    moved = 0
    for row, d1, flip, c1, d2 in zip(examined, scores.best.tolist(), scores.flip.tolist(),
                                     scores.cluster.tolist(), scores.runner_up.tolist()):
        length = int(lengths[row])
        accept = accepted(d1, d2, length, rate)
        if details is not None:
            details.append((row, length, d1, d2, c1, accept))
        if accept:
            labels[row] = c1
            orientation[row] = flip
            moved += int(weights[row])
    return moved


def _pass_rows(full_pass: bool, labels, reps, weights, lengths, targets, full_length,
               max_size) -> np.ndarray:
    """The reads a pass examines: pass 1 those of small clusters
    (:func:`_small_cluster_rows`), pass 2 every read of a cluster that is not a target."""
    if full_pass:
        sizes = np.bincount(labels, weights=weights, minlength=len(reps))
        return _small_cluster_rows(labels, sizes, reps, lengths, full_length, max_size)
    return np.flatnonzero(~targets[labels] & (lengths > 0))


def _small_cluster_rows(labels, sizes, reps, lengths, full_length, max_size) -> np.ndarray:
    """Pass 1's reads: the full-length reads of clusters of up to :data:`READ_MAX_SIZE`
    reads, and the representatives of larger ones up to ``max_size`` (pieces of a strand,
    which move as a whole with their representative)."""
    alone = np.flatnonzero((sizes[labels] <= min(READ_MAX_SIZE, max_size))
                           & (lengths >= full_length))
    piece = (sizes > READ_MAX_SIZE) & (sizes <= max_size) & (lengths[reps] >= full_length)
    return np.union1d(alone, reps[piece])


def _follow_moved_pieces(labels, orientation, before, reps, weights) -> int:
    """The reads of a piece (a cluster of more than :data:`READ_MAX_SIZE` reads) whose
    representative moved follow it (in place); returns the reads moved so."""
    sizes = np.bincount(before, weights=weights, minlength=len(reps))
    rep_moved = labels[reps] != np.arange(len(reps))
    pieces = np.flatnonzero(rep_moved & (sizes > READ_MAX_SIZE))
    if len(pieces) == 0:
        return 0
    rows = np.flatnonzero(np.isin(before, pieces) & (labels == before))
    rep = reps[before[rows]]
    labels[rows] = labels[rep]
    orientation[rows] ^= orientation[rep]
    return int(weights[rows].sum())


def _follow_moved_representatives(labels: np.ndarray, orientation: np.ndarray,
                                  before: np.ndarray, reps: np.ndarray) -> None:
    """A read that joined a cluster whose representative moved on follows it (in place).

    Moves go to smaller cluster numbers only, so resolving in increasing order is complete.
    """
    rep_moved = {int(c): (int(labels[rep]), int(orientation[rep]))
                 for c, rep in enumerate(reps.tolist()) if labels[rep] != c}
    if not rep_moved:
        return
    for c in sorted(rep_moved):
        dest, flip = rep_moved[c]
        if dest in rep_moved:
            dest2, flip2 = rep_moved[dest]
            rep_moved[c] = (dest2, flip ^ flip2)
    for row in np.flatnonzero(labels != before).tolist():
        c = int(labels[row])
        if c in rep_moved and reps[c] != row:
            dest, flip = rep_moved[c]
            labels[row] = dest
            orientation[row] ^= flip
