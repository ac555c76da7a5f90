"""Strand reconstruction of one chunk of clusters: the algorithm, step by step.

After clustering, each cluster holds noisy copies (insertions, deletions,
substitutions; either orientation; some truncated) of one stored strand.
:func:`reconstruct_chunk` turns every cluster of a chunk back into its most
likely strand, in the spirit of the bitwise-majority-alignment family of
trace-reconstruction algorithms used in DNA storage:

1. **Orientation.** When the caller gives each read's orientation (the clusters
   table's optional third column, or the clusterer's flags) it is used;
   otherwise every read is compared, as read and as its reverse complement,
   with a pivot (the read whose length is nearest the target length), then with
   the medoid, and turned to the closer. The output strand is in the
   orientation of the reads marked ``+`` when orientations are given, otherwise
   in the orientation most reads were read in (ties: the medoid's).
2. **Medoid.** The starting estimate is the read with the least total
   Levenshtein distance to the others, among reads whose length is within
   :func:`length_tolerance` of the target length (the expected length when
   given, else the cluster's 75th-percentile read length: truncation only
   shortens reads), so a truncated read never starts the estimate. Ties go to
   the read nearer the target length, then to the higher mean base quality,
   then to the first. Big clusters use a seeded sample (at most 32 candidates
   against at most 64 reads).
3. **Majority refinement.** Every read is aligned to the current estimate
   (globally; a read shorter than the estimate by more than the tolerance as an
   infix, clipped to its best-aligned stretch, so a truncated read, or one that
   lost a piece of its middle, votes only where it aligns). Reads whose edits
   exceed 30% of their aligned span do not vote. Votes: per estimate position a
   base or a gap, per gap between positions inserted bases; indels in a
   homopolymer run are first moved to the run's left end, so reads that lost
   "one A of AAAA" vote for the same position. A position takes the plurality
   (ties keep the estimate); an insertion needs a strict majority of the reads
   covering it. A change of a homopolymer run's length is held back when a
   run-length model learnt from the data (how often a run of length t is read
   t-2 .. t+2) prefers another length: a biased channel (nanopore) shortens runs
   far more often than it lengthens them, which a plain majority cannot know.
4. **Polishing.** When the majority changes nothing, every edit that at least a
   quarter of the covering reads ask for (a substitution, deletion or insertion
   the majority missed because pairwise alignments split one event's votes, or
   a run length held back) is tried, from the strand's end to its start, and
   kept when the reads become likelier: each edit of each read's alignment
   costs its negative log-probability under error rates learnt from all the
   clusters (substitutions, insertions, run-length changes), an error at a
   low-quality base (FASTQ) costs less, and each base of the strand costs
   log 4 (a uniform prior). Clusters of one read are never polished; of two
   only with base qualities (otherwise every edit ties). Strands longer than
   :data:`~dnaembed.consensus.polish.POLISH_WHOLE_MAX_LENGTH` weigh an edit on a
   window around it, not on every read's alignment to the whole strand (whose
   cost grows as the cube of the length).
   Steps 3-4 repeat until no estimate changes (at most ``max_iterations``);
   only the clusters that changed are aligned again. All clusters of a chunk
   are voted on together with numpy; alignments are C calls (python-Levenshtein,
   edlib); the polishing loop is Python.
5. **Expected length.** When given, an estimate that ends within 2% (at least 2
   bases) of it but not on it is brought to it: the weakest-supported positions
   are removed, or the best-supported rejected insertions added.
6. **Confidence.** From the votes on the final estimate: ``confidence`` is the
   fraction of positions that no single read could overturn (winner ahead of the
   runner-up by at least two reads and backed by a majority of the reads
   covering it, and not N), so a single-read cluster scores 0 and two agreeing
   reads score 1; ``agreement`` is the mean fraction of covering reads that agree with the
   consensus base; ``mean_distance`` the mean edit distance of the reads to the
   consensus (a truncated read counted over the part it covers).

Where each step lives: 1 :mod:`.orient`, 2 :mod:`.medoid`, 3 :mod:`.align`,
:mod:`.votes` and :mod:`.runlength`, 4 :mod:`.polish`, 5 and the iteration
here, 6 :class:`~dnaembed.consensus.votes.StrandScores`. The rules on inputs,
chunks and processes: :mod:`.reconstruct`.
"""

from __future__ import annotations

import math

import numpy as np

from dnaembed.consensus.align import Estimates, align_reads
from dnaembed.consensus.chunks import ChunkReads, ChunkResult, ChunkTask
from dnaembed.consensus.inputs import quality_summary
from dnaembed.consensus.medoid import MedoidSearch, target_lengths
from dnaembed.consensus.orient import orient_reads
from dnaembed.consensus.polish import ErrorCounts, polish_estimates
from dnaembed.consensus.runlength import hold_disputed_runs
from dnaembed.consensus.votes import GAP, StrandScores, Votes, count_votes
from dnaembed.encoding import reverse_complement


def reconstruct_chunk(task: ChunkTask) -> ChunkResult:
    """The strands of a chunk's clusters: orientation, medoids, refinement, scores."""
    n = task.n_clusters
    sizes = np.bincount(task.cluster, minlength=n)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    lengths = np.fromiter((len(s) for s in task.seqs), dtype=np.int64, count=len(task.seqs))
    mean_quality, qual_all = quality_summary(task.quals, task.cluster, n)
    search = MedoidSearch(
        lengths=lengths,
        bounds=bounds,
        targets=target_lengths(lengths, bounds, task.expected_length),
        mean_quality=mean_quality,
        seed=task.seed,
        first_cluster=task.first_cluster,
    )
    oriented = orient_reads(task.seqs, task.given_flips, search)
    quals = None
    if task.quals is not None:
        quals = [q[::-1] if f else q for q, f in zip(task.quals, oriented.flips.tolist())]
    reads = ChunkReads(oriented.seqs, quals, task.cluster, bounds, sizes)
    refinement = Refinement(
        reads, [oriented.seqs[m] for m in oriented.medoids], qual_all, task.expected_length
    )
    refinement.run(task.iterations)
    # Reads turned relative to the orientation the strand is written in.
    turned = oriented.flips ^ oriented.output_flip[task.cluster]
    written = oriented.output_flip.tolist()
    return ChunkResult(
        sequences=[_as_written(s, f) for s, f in zip(refinement.estimates, written)],
        medoids=[_as_written(oriented.seqs[m], f) for m, f in zip(oriented.medoids, written)],
        sizes=sizes,
        confidence=refinement.scores.confidence,
        agreement=refinement.scores.agreement,
        mean_distance=refinement.scores.mean_distance,
        reversed_reads=np.bincount(task.cluster, weights=turned, minlength=n),
        iterations=refinement.iterations,
    )


def _as_written(seq: str, reverse: bool) -> str:
    return reverse_complement(seq) if reverse else seq


class Refinement:
    """The estimates of a chunk's clusters, refined round by round (steps 3-5)."""

    def __init__(
        self,
        reads: ChunkReads,
        estimates: list[str],
        qual_all: np.ndarray | None,
        expected_length: int | None,
    ) -> None:
        n = len(estimates)
        self.reads = reads
        self.expected_length = expected_length
        #: Per cluster: the current estimate, in the reads' working orientation.
        self.estimates = estimates
        #: Per cluster: the round in which its estimate last changed.
        self.iterations = np.zeros(n, dtype=np.int64)
        self.scores = StrandScores.zeros(n)
        self.counts = ErrorCounts.empty(n, qual_all)

    def run(self, max_iterations: int) -> None:
        """Refine until no estimate changes; the last voting pass sets the scores.

        Each round: align and vote; clusters whose majority decision changes the
        estimate take it; the others are polished
        (:func:`~dnaembed.consensus.polish.polish_estimates`). Only clusters that
        changed are aligned again.
        """
        active = np.arange(len(self.estimates))
        for it in range(max_iterations + 1):
            if len(active) == 0:
                break
            votes = self._vote(active)
            self._record(active, votes)
            if it == max_iterations:
                break
            new = votes.rebuild(*hold_disputed_runs(votes, self.counts.run_log_p()))
            changed = []
            settled = []
            for k, c in enumerate(active.tolist()):
                if new[k] and new[k] != self.estimates[c]:
                    self.estimates[c] = new[k]
                    changed.append(c)
                else:
                    settled.append(k)
            polished = polish_estimates(
                self.estimates,
                active,
                votes,
                np.asarray(settled, dtype=np.int64),
                self.reads,
                self.counts,
            )
            for c, seq in polished.items():
                self.estimates[c] = seq
                changed.append(c)
            for c in changed:
                self.iterations[c] = it + 1
            active = np.asarray(sorted(changed), dtype=np.int64)
        if self.expected_length is not None:
            self._fit_length(int(self.expected_length))

    def _vote(self, active: np.ndarray) -> Votes:
        """Align every read of the ``active`` clusters to its estimate and count votes."""
        local = np.full(len(self.estimates), -1, dtype=np.int64)
        local[active] = np.arange(len(active))
        bounds = self.reads.bounds
        read_idx = np.concatenate(
            [np.arange(bounds[c], bounds[c + 1]) for c in active.tolist()]
        )
        read_cl = local[self.reads.cluster[read_idx]]
        estimates = Estimates.of([self.estimates[c] for c in active.tolist()])
        alignments = align_reads(estimates, self.reads.seqs, read_idx, read_cl)
        return count_votes(alignments, self.reads.seqs, self.reads.quals)

    def _record(self, active: np.ndarray, votes: Votes) -> None:
        """Learn the error counts of, and score, the ``active`` clusters from their votes."""
        sizes = self.reads.sizes
        self.counts.record(active, votes, big=sizes[active] >= 3)
        self.scores.record(active, votes, sizes)

    def _fit_length(self, target: int) -> None:
        """Bring near-miss estimates to the expected length (step 5)."""
        limit = max(2, math.ceil(0.02 * target))
        misfit = [
            c
            for c, seq in enumerate(self.estimates)
            if self.reads.sizes[c] >= 2 and 0 < abs(len(seq) - target) <= limit
        ]
        if not misfit:
            return
        active = np.asarray(misfit, dtype=np.int64)
        votes = self._vote(active)
        self._record(active, votes)
        new = votes.rebuild(*_decisions_of_length(votes, self.counts.run_log_p(), target))
        for k, c in enumerate(misfit):
            if new[k]:
                self.estimates[c] = new[k]


def _decisions_of_length(
    votes: Votes, log_p: np.ndarray, target: int
) -> tuple[np.ndarray, np.ndarray]:
    """The majority's decisions, changed so that every estimate has ``target`` bases.

    Too long: the positions where the gap came closest to winning are dropped.
    Too short: the best-supported rejected insertions are added.
    """
    est, ins = votes.estimates, votes.insertions
    winner, accepted = hold_disputed_runs(votes, log_p)
    per_cluster = np.bincount(ins.cluster[accepted], minlength=len(est.lengths))
    for k in range(len(est.lengths)):
        a, b = int(est.offsets[k]), int(est.offsets[k] + est.lengths[k])
        kept = a + np.flatnonzero(winner[a:b] != GAP)
        extra = len(kept) + int(per_cluster[k]) - target
        if extra > 0:
            counts = votes.counts[kept]
            margin = counts[np.arange(len(kept)), winner[kept]] - counts[:, GAP]
            drop = kept[np.argsort(margin, kind="stable")[:extra]]
            winner[drop] = GAP
        elif extra < 0:
            mine = np.flatnonzero((ins.cluster == k) & ~accepted)
            best = mine[np.argsort(-ins.total[mine], kind="stable")[:-extra]]
            accepted[best] = True
    return winner, accepted
