"""The k-mer search of :class:`~dnaembed.cluster.kmers.KmerIndex` as tasks on a runner.

A search passes over the targets twice: once to count how many targets hold each of
the queries' k-mers (the cut on shared k-mers needs every target's), once to vote.
Both passes split by ranges of the targets: the counts of disjoint ranges add up, and
the top targets of a union of ranges are the top of each range's top
(:meth:`~dnaembed.cluster.kmers.TopTargets.merge_top`). So each range is a task, in
each pass, and the result is the one-pass search's whatever runs the tasks. The
counting pass takes the set of the queries' k-mers (one bit per possible k-mer); the
vote pass splits the queries too, into blocks of
:data:`~dnaembed.cluster.kmers.QUERY_BLOCK` as the one-pass search does, a task per
block and range. Ranges hold :data:`RANGE_TARGETS` targets, or
:data:`TARGETS_PER_QUERY` per query of a block where that is more (cut between
groups), not one per worker: the tasks depend on the targets and queries alone.

Why: the rescue searches every cluster's central reads, which grow with the input, once
per block of queries; here, that is a serial stage while the workers wait (at 10^6 reads
~10 s, before the one-pass search kept its k-mers for its votes). Why ranges that grow
with the queries: each vote task builds its block's table of k-mers and codes the
range's targets, so with ranges of a fixed size the tables alone would cost queries x
targets / range, growing with the square of the input; a range of a few targets per
query keeps them a small share of the votes (at 10^6 reads, 7,000 queries: a table 0.10
s, a range's vote task 0.59 s, one thread), and sends the queries to fewer tasks.

Where the queries are one block, the tasks split the targets only, and code each of them
in both passes, where the one-pass search codes it once and keeps its k-mers for the
votes. At 10^6 reads the rescue's two searches (7,026 queries, then 7) took 10.7 s of
the workers' CPU as tasks, and 4.7 + 1.1 s on one thread here in one pass, the choice of
candidates included. So such a search runs in one pass on this process's threads
(:func:`searched_here`), unless the workers have more than twice as many: with two
workers and two threads here the rescue took 7.0 s against 10.4, with one and one 9.9 s
against 15.3 (the same output).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.cluster import kmers
from dnaembed.cluster.kmers import KmerIndex, TopTargets
from dnaembed.execute import Runner, runs_here
from dnaembed.execute.inline import InlineExecutor
from dnaembed.io.strings import pack_strings, strings_of, unpack_strings
from dnaembed.log import available_cores

#: Targets per task at least (a range of the targets, cut between groups).
RANGE_TARGETS = 32_768
#: Targets per task at least, per query of a block (see the module notes).
TARGETS_PER_QUERY = 4
#: The tasks' CPU against the one-pass search's where the queries are one block (each
#: target coded in both passes; see the module notes): the workers must have more than
#: this many times this process's threads for the tasks to finish first.
TASKS_CPU_FACTOR = 2


@dataclass
class KmerRangeTask:
    """One range of the targets (packed, with their group numbers from 0, or None) and the
    queries' k-mers: for the counting pass, which of them the queries hold (``wanted``,
    one bit per possible k-mer, :func:`numpy.packbits`); for the vote pass, a block of
    the queries (packed) and ``common``, the codes of the k-mers left out."""

    data: np.ndarray
    lengths: np.ndarray
    groups: np.ndarray | None
    k: int
    both: bool
    top: int
    wanted: np.ndarray | None = None
    query_data: np.ndarray | None = None
    query_lengths: np.ndarray | None = None
    common: np.ndarray | None = None

    def index(self) -> KmerIndex:
        """The range's targets, indexed."""
        return KmerIndex(unpack_strings(self.data, self.lengths), both=self.both, k=self.k,
                         groups=self.groups)

    def queries(self) -> list[str]:
        """The block of queries (the vote pass's)."""
        return unpack_strings(self.query_data, self.query_lengths)


@dataclass
class RangeCounts:
    """What :func:`count_range` returns: the query k-mers a target of the range holds, and
    how many targets hold each."""

    codes: np.ndarray  # k-mers (canonical with ``both``) held by a target of the range
    counts: np.ndarray  # targets (groups) of the range holding each


def count_range(task: KmerRangeTask) -> RangeCounts:
    """The counting pass over one range: how many of its targets hold each query k-mer."""
    wanted = np.unpackbits(task.wanted, count=4**task.k).view(bool)
    held = task.index().held_by(wanted)
    codes = np.flatnonzero(held)
    return RangeCounts(codes, held[codes])


def vote_range(task: KmerRangeTask) -> TopTargets:
    """The vote pass over one range, for one block of queries: each query's top targets
    in the range (numbered from 0)."""
    common = np.zeros(4**task.k, dtype=bool)
    common[task.common] = True
    return task.index().top_targets(task.queries(), task.top, common)


def range_size(queries: int) -> int:
    """Targets per range for a search of ``queries`` queries (see the module notes)."""
    return max(RANGE_TARGETS, TARGETS_PER_QUERY * min(queries, kmers.QUERY_BLOCK))


def searched_here(runner: Runner | None, queries: int, threads: int) -> bool:
    """Whether a search of ``queries`` queries runs in one pass on this process's
    ``threads`` threads (0: every available core) rather than as tasks on ``runner``: where
    the runner's tasks share this process, or the queries are one block and the runner's
    workers have at most :data:`TASKS_CPU_FACTOR` times the threads (see the notes)."""
    if runs_here(runner):
        return True
    here = threads if threads > 0 else available_cores()
    return queries <= kmers.QUERY_BLOCK and runner.workers <= TASKS_CPU_FACTOR * here


def search_in_tasks(index: KmerIndex, queries: Sequence[str], top: int, runner: Runner | None,
                    *, min_votes: int = 1, threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`KmerIndex.candidates`, its two passes as tasks on ``runner`` (see the notes);
    sets ``index.cut`` as the search in one pass does. Where :func:`searched_here` says so,
    the one-pass search instead, on the runner if its tasks share this process, else on
    ``threads`` threads here: it keeps the first pass's k-mers for the second instead of
    computing them again and builds the queries' tables once for all its threads
    (:meth:`KmerIndex.candidates`)."""
    queries = list(queries)
    if runs_here(runner):
        return index.candidates(queries, top, min_votes=min_votes, runner=runner)
    if searched_here(runner, len(queries), threads):
        with InlineExecutor(threads) as here:
            return index.candidates(queries, top, min_votes=min_votes, runner=here)
    if len(queries) == 0 or len(index.targets) == 0:
        return TopTargets(len(queries), top).result(min_votes)
    ranges = list(index.ranges(range_size(len(queries))))
    packed: list[tuple[np.ndarray, np.ndarray]] = []  # each range's targets, for both passes

    def targets(i: int) -> tuple:
        """Range ``i``'s packed targets and group numbers (from 0)."""
        start, end = ranges[i]
        if i == len(packed):
            packed.append(pack_strings(strings_of(index.targets, np.arange(start, end))))
        groups = None if index.groups is None else index.groups[start:end] - index.groups[start]
        return (*packed[i], groups, index.k, index.both, top)

    wanted = index.wanted(queries)
    bits = np.packbits(wanted)
    held_by = np.zeros(4**index.k, dtype=np.int32)
    counting = (KmerRangeTask(*targets(i), wanted=bits) for i in range(len(ranges)))
    for counts in runner.map(count_range, counting, desc="counting k-mers", unit="range"):
        held_by[counts.codes] += counts.counts
    common = np.flatnonzero(index.common_of(held_by, wanted))
    del held_by, wanted, bits
    return _votes(index, queries, top, ranges, targets, common, runner).result(min_votes)


def _votes(index: KmerIndex, queries: list[str], top: int, ranges: list[tuple[int, int]],
           targets, common: np.ndarray, runner) -> TopTargets:
    """The vote pass: a task per range and block of queries (``targets(i)``: the fields of
    range ``i``'s tasks), each block's tops merged range after range."""
    starts = range(0, len(queries), kmers.QUERY_BLOCK)
    blocks = [pack_strings(queries[s : s + kmers.QUERY_BLOCK]) for s in starts]
    voting = (KmerRangeTask(*targets(i), query_data=data, query_lengths=lengths,
                            common=common)
              for i in range(len(ranges)) for data, lengths in blocks)
    order = [(start, end, b) for start, end in ranges for b in range(len(blocks))]
    best = [TopTargets(len(lengths), top) for _, lengths in blocks]
    found = runner.map(vote_range, voting, desc="k-mer votes", unit="task")
    for (start, end, b), block_top in zip(order, found, strict=True):
        first = start if index.groups is None else int(index.groups[start])
        m = end - start if index.groups is None else int(index.groups[end - 1]) + 1 - first
        best[b].merge_top(block_top, first, m)
    out = TopTargets(len(queries), top)
    for start, block in zip(starts, best):
        out.put(slice(start, start + len(block.votes)), block)
    return out
