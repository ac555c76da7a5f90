"""The rescue's rule, when a read moves to another cluster, and how its candidate
clusters are searched by k-mers (:class:`CandidateSearch`), as a sample's noise asks.

The rescue's passes are in :mod:`dnaembed.cluster.rescue`.

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

A noisy sample (per-read error rate from :data:`NOISY_ERROR_RATE`, as the
threshold's same-strand peak shows it) gets a wider search: 10-mers of five
central reads per cluster, clusters sharing at least 4 of them with the read (the
others share 0-2 by chance), and pass 1 takes clusters of up to
:data:`NOISY_MAX_SIZE` reads (:func:`rescue_settings`). At 12% errors per read
(nanopore-hard) the small search encoder leaves ~1% of the reads alone or in
pieces of 3-5; an 11-mer of such a read survives in any one other read of its
strand too rarely (0-4 shared) for the vote, and pieces larger than 2 were not
examined.

Why pass 1 of a large input uses longer k-mers: every query side holding a target's
k-mer costs a look-up and a vote, so with a fixed k the search costs queries x
targets, both growing with the input (at 3 x 10^6 reads ~77% of the targets' 11-mers
are held by some query). Pass 1 asks about full-length reads, which share ~40
12-mers with each read of their strand, and takes one base more for every four times the queries
(:meth:`CandidateSearch.k_for`); pass 2, the truncated reads, keeps 11-mers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dnaembed.cluster.kmers import kmer_length

#: k-mer length of the candidate search (see the module notes).
RESCUE_K = 11
#: Longest k-mers of a large search (:func:`~dnaembed.cluster.kmers.kmer_length`: at
#: 3 x 10^6 reads, 12-mers). A full-length read's true cluster still leads the vote: a
#: 150-nt read with ~5% errors shares ~40 12-mers with each read of its strand (0.95^24
#: of 139), and is expected to share ~0.01 with an unrelated cluster at that scale.
RESCUE_LONGEST_K = 12
#: The rule against the runner-up cluster: at least this many edits fewer, and at most this
#: fraction of its edits (see the module notes).
MIN_MARGIN = 5
RUNNER_UP_RATIO = 0.85
#: From this per-read error rate of the sample on (the threshold's same-strand peak),
#: :data:`NOISY_SEARCH` and :data:`NOISY_MAX_SIZE` apply (see :func:`rescue_settings`).
NOISY_ERROR_RATE = 0.08
#: Pass 1's largest clusters (reads) in a noisy sample: there, rounds 2.. leave pieces of
#: 3-5 reads that their strand's embedding neighbours missed.
NOISY_MAX_SIZE = 5


@dataclass(frozen=True)
class CandidateSearch:
    """How candidate clusters are found by shared k-mers: k-mer length, how many of each
    cluster's central reads vote for it
    (:func:`~dnaembed.cluster.rescue_candidates.member_kmers`), the fewest shared k-mers
    that make a cluster a candidate, and the longest k-mers a search of many reads may use
    instead of ``k`` (:func:`~dnaembed.cluster.kmers.kmer_length`)."""

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


def alignment_bound(length: int, rate: float) -> int:
    """Distances beyond this cannot change the decision (so alignments may stop there)."""
    allowed = allowed_distance(length, rate)
    return max(allowed + MIN_MARGIN, math.ceil(allowed / RUNNER_UP_RATIO))
