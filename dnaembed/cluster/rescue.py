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

Candidate clusters: the :data:`MAX_CANDIDATES` target clusters whose central
reads (three, voting together) share the most :data:`RESCUE_K`-mers with the
read (:mod:`dnaembed.cluster.kmers`; a truncated read shares most of its k-mers
with its strand, while the embedding, like the global distance it approximates,
sees it as far), then up to :data:`EMBEDDING_CANDIDATES` more from the read's
nearest embedding neighbours. Decisions within a pass are taken against the
clustering before it, so the result does not depend on the order of the reads.

A noisy sample (per-read error rate from :data:`NOISY_ERROR_RATE`, as the
threshold's same-strand peak shows it) gets a wider search: 10-mers of five
central reads per cluster, clusters sharing at least 4 of them with the read (the
others share 0-2 by chance), and pass 1 takes clusters of up to
:data:`NOISY_MAX_SIZE` reads (:func:`rescue_settings`). At 12% errors per read
(nanopore-hard) the small search encoder leaves ~1% of the reads alone or in
pieces of 3-5; an 11-mer of such a read survives in any one other read of its
strand too rarely (0-4 shared) for the vote, and pieces larger than 2 were not
examined.

Why the consensus (ldpc-exp7): against single reads the two distances the rule
compares both carry the member's own errors, and the labels of the real set are
decided on distances to the designs, which a consensus of five reads is within
~0.2 edits of (against ~1.8 for the representative alone). Why both orientations
always: the orientation that won the k-mer vote (a few k-mers) is wrong often
enough to cost reads.

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

Why these figures (ldpc-exp7, whose labels come from infix distances to the
designs): the reads the rescue got wrong there were short reads (40-100 nt)
that no design explains clearly, their two best designs within 5 edits of
each other; the old rule (3 edits, 3/4) let ~160 of them into clusters, each
one costing its cluster A_0.9, while it refused ~400 truncated reads of their
own strand whose runner-up lay 5-9 edits further but above 3/4 of it. A
margin of 5 and a ratio of 0.85 take the second kind and refuse most of the
first. A read's true cluster and the cluster that is its closest rival must
both be among the candidates for the margin to mean anything: 8 candidates by
11-mers (a 12-mer survives the 15-25% edits of a badly truncated real read, or
a 12%-error nanopore read, too rarely) find them.

Why pass 1 of a large input uses longer k-mers: every query side holding a target's
k-mer costs a look-up and a vote, so with a fixed k the search costs queries x
targets, both growing with the input (at 3 x 10^6 reads ~77% of the targets' 11-mers
are held by some query). Pass 1 asks about full-length reads, which share ~40
12-mers with each read of their strand, and takes one base more for every four times the queries
(:meth:`CandidateSearch.k_for`); pass 2, the truncated reads, keeps 11-mers.
More in ``docs/algorithms.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.arrays import rank_in_groups
from dnaembed.cluster.kmer_tasks import search_in_tasks
from dnaembed.cluster.kmers import KmerIndex, kmer_length
from dnaembed.cluster.labels import assemble
from dnaembed.cluster.profiles import ClusterProfiles
from dnaembed.cluster.rescue_tasks import build_missing_profiles, score_in_tasks
from dnaembed.io.spill import oriented_strings, strings_of
from dnaembed.log import logger

#: Clusters tried per read: by shared k-mers, then by embedding neighbours.
MAX_CANDIDATES = 8
EMBEDDING_CANDIDATES = 2
#: k-mer length of the candidate search (see the module notes).
RESCUE_K = 11
#: Longest k-mers of a large search (:func:`~dnaembed.cluster.kmers.kmer_length`: at
#: 3 x 10^6 reads, 12-mers). A full-length read's true cluster still leads the vote: a
#: 150-nt read with ~5% errors shares ~40 12-mers with each read of its strand (0.95^24
#: of 139), and is expected to share ~0.01 with an unrelated cluster at that scale.
RESCUE_LONGEST_K = 12
#: Central full-length reads of each candidate cluster (the representative first) whose
#: consensus a read is aligned to (:mod:`dnaembed.cluster.profiles`): one read's own errors
#: would otherwise blur the comparison.
MEMBERS_PER_CLUSTER = 5
MIN_MARGIN = 5
RUNNER_UP_RATIO = 0.85
#: Pass 1 examines every full-length read of clusters up to this size; of larger ones (up
#: to ``max_size``), the representative only, and the cluster moves with it.
READ_MAX_SIZE = 2
#: From this per-read error rate of the sample on (the threshold's same-strand peak),
#: :data:`NOISY_SEARCH` and :data:`NOISY_MAX_SIZE` apply (see :func:`rescue_settings`).
NOISY_ERROR_RATE = 0.08
#: Pass 1's largest clusters (reads) in a noisy sample: there, rounds 2.. leave pieces of
#: 3-5 reads that their strand's embedding neighbours missed.
NOISY_MAX_SIZE = 5


@dataclass(frozen=True)
class CandidateSearch:
    """How candidate clusters are found by shared k-mers: k-mer length, how many of each
    cluster's central reads vote for it (see :func:`_member_kmers`), the fewest shared
    k-mers that make a cluster a candidate, and the longest k-mers a search of many reads
    may use instead of ``k`` (:func:`~dnaembed.cluster.kmers.kmer_length`)."""

    k: int = RESCUE_K
    reads: int = 3
    min_votes: int = 1
    longest_k: int = RESCUE_LONGEST_K

    def k_for(self, queries: int, mean_length: float, both: bool) -> int:
        """The k-mer length for ``queries`` full-length reads of ``mean_length`` bases.

        Only pass 1 (full-length reads) asks: with 12-mers instead of 11 the true cluster
        of a full-length read stayed among its 8 candidates (300,000 clusters, 22,000
        queries: 1.000 both), but that of a truncated read with ~18% edits less often
        (0.623 against 0.665; ``scripts/check_kmer_cut.py``), and those are pass 2's.
        """
        k = kmer_length(queries, mean_length - self.k + 1, self.k, both=both)
        return min(k, max(self.k, self.longest_k))


#: In a noisy sample (12% errors per read, two reads of a strand ~24% apart) an 11-mer
#: survives in both a read and any one other read too rarely: 10-mers, five reads' worth.
#: A read shares ~30 of them with its strand's five reads and 0-2 by chance with another
#: strand's (700 of the 10^6 10-mers): clusters sharing fewer than 4 are not worth a
#: consensus and its alignments (nanopore-hard: the same clusters, a third less time;
#: from 6 on, reads of their own strand are lost). Its k never grows: an 11-mer survives
#: there in a read and another of its strand a fifth less often than a 10-mer, and the
#: 4 votes would cost reads; the vote cut keeps its chance candidates out.
NOISY_SEARCH = CandidateSearch(k=10, reads=5, min_votes=4, longest_k=10)
DEFAULT_SEARCH = CandidateSearch()


def is_noisy(error_rate: float | None) -> bool:
    """Whether a sample of this per-read error rate gets the noisy settings."""
    return error_rate is not None and error_rate >= NOISY_ERROR_RATE


def rescue_settings(error_rate: float | None, max_size: int) -> tuple[int, CandidateSearch]:
    """Pass 1's largest clusters and the k-mer search, for a sample whose reads carry
    ``error_rate`` errors per base (None: unknown) and the caller's ``max_size``."""
    if is_noisy(error_rate):
        return max(max_size, NOISY_MAX_SIZE), NOISY_SEARCH
    return max_size, DEFAULT_SEARCH


def allowed_distance(length: int, rate: float) -> int:
    """The largest infix distance a read of ``length`` may have to its new cluster."""
    return math.floor(rate * length + 1e-9)


def accepted(best: int, runner_up: int, length: int, rate: float) -> bool:
    """The rescue rule (see the module notes)."""
    return (
        best <= allowed_distance(length, rate)
        and best <= RUNNER_UP_RATIO * runner_up
        and runner_up - best >= MIN_MARGIN
    )


def _alignment_bound(length: int, rate: float) -> int:
    """Distances beyond this cannot change the decision (so alignments may stop there)."""
    allowed = allowed_distance(length, rate)
    return max(allowed + MIN_MARGIN, math.ceil(allowed / RUNNER_UP_RATIO))


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
    runner=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Move leftover reads into clusters they clearly belong to (see the module notes).

    ``labels``/``orientation`` as :func:`assemble` makes them; ``centrality``
    chooses representatives; ``neighbours_of(rows)`` returns the nearest reads
    of those rows and their embedding distances (``(len(rows), m)``, -1 for
    none). ``details``, when given, receives ``(read, length, best, runner_up,
    cluster, accepted)`` for every read examined. ``lengths``: the reads' lengths, when
    known (else measured from ``seqs``, which reads every sequence once). ``search``: how
    candidate clusters are found by k-mers (:func:`rescue_settings`). ``runner``: where the
    k-mer search and the alignments run (:mod:`dnaembed.execute`; None: here); the result
    does not depend on it. Returns labels, orientations, representatives and the number
    of reads moved (counting collapsed copies).
    """
    lengths = np.asarray(lengths if lengths is not None else [len(s) for s in seqs], np.int64)
    centrality = np.asarray(centrality, dtype=np.float64)
    labels, orientation, reps = assemble(labels, orientation, centrality, weights)
    moved = 0
    known_profiles: dict = {}  # shared by the passes (ClusterProfiles)
    for full_pass in (True, False):
        targets = lengths[reps] >= full_length  # clusters of a full-length representative
        if full_pass:
            sizes = np.bincount(labels, weights=weights, minlength=len(reps))
            rows = _small_cluster_rows(labels, sizes, reps, lengths, full_length, max_size)
        else:
            rows = np.flatnonzero(~targets[labels] & (lengths > 0))
        if len(rows) == 0 or not targets.any():
            continue
        members = _central_members(labels, orientation, centrality, lengths, reps, full_length,
                                   max(MEMBERS_PER_CLUSTER, search.reads))
        new_labels, new_orient, n_moved = _rescue_pass(
            seqs, rc_seqs, labels, orientation, reps, members, weights, lengths, rows, targets,
            neighbours_of, rate, details, upward_only=full_pass, seed=seed, search=search,
            known_profiles=known_profiles, runner=runner,
        )
        if n_moved:
            moved += n_moved
            # Keep every surviving cluster's representative.
            bonus = np.zeros(len(seqs))
            bonus[reps] = np.inf
            labels, orientation, reps = assemble(new_labels, new_orient, centrality + bonus,
                                                 weights)
    return labels, orientation, reps, moved


def _central_members(labels, orientation, centrality, lengths, reps, full_length, count: int
                     ) -> CentralMembers:
    """Per cluster: (read, orientation) of its representative and most central full-length reads.

    The reads that may be listed are sorted by cluster, then centrality, by a stable sort
    from read order (ties: the earliest); sorting every read with its position as a third
    key took 1.0 s of CPU for 3 x 10^6 reads in 300,000 clusters, twice a run; this 0.7.
    """
    is_rep = np.zeros(len(labels), dtype=bool)
    is_rep[reps] = True
    eligible = np.flatnonzero((lengths >= full_length) & ~is_rep)
    order = eligible[np.lexsort((-centrality[eligible], labels[eligible]))]
    rank = rank_in_groups(labels[order])
    order, rank = order[rank < count - 1], rank[rank < count - 1]
    reads = np.full((len(reps), count), -1, dtype=np.int64)
    flips = np.zeros((len(reps), count), dtype=np.int8)
    reads[:, 0] = reps
    reads[labels[order], rank + 1] = order
    flips[labels[order], rank + 1] = orientation[order]
    return CentralMembers(reads, flips)


class CentralMembers:
    """The central reads of every cluster, as arrays (``-1``: none), each cluster's read as
    a list of (read, orientation) when asked for: lists of tuples for every cluster took
    163 MB for 300,000 clusters of five (3 x 10^6 reads), the arrays 14 MB."""

    def __init__(self, reads: np.ndarray, flips: np.ndarray) -> None:
        self.reads, self.flips = reads, flips

    def __len__(self) -> int:
        return len(self.reads)

    def __getitem__(self, cluster: int) -> list[tuple[int, int]]:
        row = self.reads[cluster]
        n = int((row >= 0).sum())
        return list(zip(row[:n].tolist(), self.flips[cluster, :n].tolist()))


def _rescue_pass(seqs, rc_seqs, labels, orientation, reps, members, weights, lengths, rows,
                 targets, neighbours_of, rate, details, *, upward_only: bool, seed: int,
                 search: CandidateSearch, known_profiles: dict, runner
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    labels, orientation = labels.copy(), orientation.copy()
    before = labels.copy()
    target_ids = np.flatnonzero(targets)
    started = time.perf_counter()
    # Pass 2's reads are the truncated ones, whose strands the k-mers are there to find:
    # their k never grows (see CandidateSearch.k_for).
    k = search.k_for(len(rows), float(lengths[rows].mean()), rc_seqs is not None) \
        if upward_only else search.k
    kmer_index = _member_kmers(seqs, rc_seqs, members, target_ids, search.reads, k)
    by_kmers, _ = search_in_tasks(kmer_index, strings_of(seqs, rows), MAX_CANDIDATES, runner,
                                  min_votes=search.min_votes)
    logger.info("rescue: %d reads against %d clusters; %d-mers, those held by more than %d "
                "clusters ignored", len(rows), len(target_ids), k, kmer_index.cut)
    searched = time.perf_counter()
    # Clusters are numbered by decreasing size: "larger" is a smaller number.
    limits = before[rows] if upward_only else np.full(len(rows), len(reps))
    examined, chosen = _choose_candidates(rows, by_kmers, neighbours_of(rows), before, targets,
                                          limits, np.random.default_rng([seed, 13]))
    central = CentralMembers(members.reads[:, :MEMBERS_PER_CLUSTER],
                             members.flips[:, :MEMBERS_PER_CLUSTER])  # views, not copies
    profiles = ClusterProfiles(seqs, rc_seqs, central, known=known_profiles)
    build_missing_profiles(profiles, dict.fromkeys(c for cs in chosen for c in cs), runner)
    built = time.perf_counter()
    bounds = [_alignment_bound(int(lengths[row]), rate) for row in examined]
    scores = score_in_tasks(seqs, rc_seqs, examined, chosen, bounds, profiles, runner)
    logger.debug("rescue pass: k-mer search %.1f s, candidates and profiles %.1f s, "
                 "alignments %.1f s", searched - started, built - searched,
                 time.perf_counter() - built)
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
    if upward_only and moved:
        moved += _follow_moved_pieces(labels, orientation, before, reps, weights)
        _follow_moved_representatives(labels, orientation, before, reps)
    return labels, orientation, moved


def _choose_candidates(rows, by_kmers, neighbours, before, targets, limits, rng
                       ) -> tuple[list[int], list[list[int]]]:
    """The reads that have candidate clusters (in row order) and theirs: by k-mers, then
    by the embedding neighbours' clusters (:func:`_candidate_clusters`), below each
    read's ``limits`` (a cluster number)."""
    by_embedding, embedded = neighbours
    # Clusters of the embedding neighbours, nearest first (-1: none, or not a target).
    order = np.argsort(embedded, axis=1, kind="stable")
    nearest = np.take_along_axis(by_embedding, order, axis=1)
    near_clusters = np.where(nearest >= 0, before[np.maximum(nearest, 0)], -1)
    near_clusters[(near_clusters >= 0) & ~targets[np.maximum(near_clusters, 0)]] = -1
    kmer_rows, near_rows = by_kmers.tolist(), near_clusters.tolist()
    target_list = np.flatnonzero(targets).tolist()
    examined, chosen = [], []
    for r, (row, own, limit) in enumerate(zip(rows.tolist(), before[rows].tolist(),
                                              limits.tolist())):
        clusters = _candidate_clusters(kmer_rows[r], near_rows[r], target_list, own, limit,
                                       rng)
        if clusters is not None:
            examined.append(row)
            chosen.append(clusters)
    return examined, chosen


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


def _member_kmers(seqs, rc_seqs, members, target_ids: np.ndarray, per_cluster: int, k: int):
    """The k-mers of the target clusters' central reads, each read oriented as its cluster.

    A noisy read shares few k-mers with any one read of its strand (each k-mer must
    survive the errors of both), but more with several: the k-mers of
    ``per_cluster`` reads of a cluster vote for it together.
    """
    reads = members.reads[target_ids, :per_cluster]
    present = reads >= 0  # row by row: each group's reads contiguous, representative first
    groups = np.broadcast_to(np.arange(len(target_ids))[:, None], reads.shape)[present]
    targets = _OrientedReads(seqs, rc_seqs, reads[present],
                             members.flips[target_ids, :per_cluster][present].astype(bool))
    return KmerIndex(targets, both=rc_seqs is not None, k=k, groups=groups)


class _OrientedReads:
    """Reads by number and orientation, each fetched when the k-mer index reads its block.

    A list of them all would hold up to five new strings per cluster at once: at 3 x 10^6
    reads (300,000 clusters) about 180 MB, which took a run under ``--memory 2G`` over it.
    """

    def __init__(self, seqs, rc_seqs, reads: np.ndarray, flips: np.ndarray) -> None:
        self.seqs, self.rc_seqs, self.reads, self.flips = seqs, rc_seqs, reads, flips

    def __len__(self) -> int:
        return len(self.reads)

    def __getitem__(self, i: int) -> str:
        read = int(self.reads[i])
        return self.rc_seqs[read] if self.flips[i] and self.rc_seqs is not None else self.seqs[read]

    def take(self, rows: np.ndarray) -> list[str]:
        """Reads ``rows`` (a block of the k-mer index) at once."""
        return oriented_strings(self.seqs, self.rc_seqs, self.reads[rows], self.flips[rows])


def _candidate_clusters(kmer_targets, near, target_list, own: int, limit: int, rng
                        ) -> list[int] | None:
    """A read's candidate clusters, or None.

    Most shared k-mers first, then nearest in the embedding; with a single candidate,
    a random other cluster as the runner-up (what an unrelated strand scores).
    """
    clusters: dict[int, None] = {}  # insertion-ordered set
    for t in kmer_targets:
        if t >= 0 and target_list[t] != own and target_list[t] < limit:
            clusters[target_list[t]] = None
    extra = 0
    for c in near:
        if extra == EMBEDDING_CANDIDATES:
            break
        if c >= 0 and c != own and c < limit and c not in clusters:
            clusters[c] = None
            extra += 1
    if not clusters:
        return None
    if len(clusters) == 1:
        # No other candidate (a good embedding sends all neighbours to one strand).
        pool = [c for c in rng.choice(target_list, size=min(4, len(target_list)),
                                      replace=False).tolist()
                if c != own and c < limit and c not in clusters]
        if not pool:
            return None
        clusters[pool[0]] = None
    return list(clusters)


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
