"""The k-mer search of :class:`~dnaembed.cluster.kmers.KmerIndex` as tasks on a runner.

A search passes over the targets twice: once to count how many targets hold each of
the queries' k-mers (the cut on shared k-mers needs every target's), once to vote.
Both passes split by ranges of the targets: the counts of disjoint ranges add up, and
the top targets of a union of ranges are the top of each range's top
(:meth:`~dnaembed.cluster.kmers.TopTargets.merge_top`). So each range is a task, in
each pass, and the result is the one-pass search's whatever runs the tasks. Ranges
hold :data:`RANGE_TARGETS` targets (cut between groups), not one per worker: the tasks
depend on the targets alone.

Why: the rescue searches every cluster's central reads, which grow with the input;
in one process the search was a serial stage of the partitioned pipeline (at 10^6
reads ~10 s, while the workers waited).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.cluster.kmers import KmerIndex, TopTargets
from dnaembed.execute import runs_here
from dnaembed.io.spill import pack_strings, strings_of, unpack_strings

#: Targets per task (a range of the targets, cut between groups).
RANGE_TARGETS = 32_768


@dataclass
class KmerRangeTask:
    """One range of the targets (packed, with their group numbers from 0, or None) and the
    queries; ``common``: the codes of the k-mers left out (the vote pass), or None (the
    counting pass)."""

    data: np.ndarray
    lengths: np.ndarray
    groups: np.ndarray | None
    query_data: np.ndarray
    query_lengths: np.ndarray
    k: int
    both: bool
    top: int
    common: np.ndarray | None = None

    def index(self) -> KmerIndex:
        return KmerIndex(unpack_strings(self.data, self.lengths), both=self.both, k=self.k,
                         groups=self.groups)

    def queries(self) -> list[str]:
        return unpack_strings(self.query_data, self.query_lengths)


@dataclass
class RangeCounts:
    codes: np.ndarray  # k-mers (canonical with ``both``) held by a target of the range
    counts: np.ndarray  # targets (groups) of the range holding each


def count_range(task: KmerRangeTask) -> RangeCounts:
    """The counting pass over one range: how many of its targets hold each query k-mer."""
    index = task.index()
    held = index.held_by(index.wanted(task.queries()))
    codes = np.flatnonzero(held)
    return RangeCounts(codes, held[codes])


def vote_range(task: KmerRangeTask) -> TopTargets:
    """The vote pass over one range: each query's top targets in it (numbered from 0)."""
    index = task.index()
    common = np.zeros(4**task.k, dtype=bool)
    common[task.common] = True
    return index.top_targets(task.queries(), task.top, common)


def search_in_tasks(index: KmerIndex, queries: Sequence[str], top: int, runner, *,
                    min_votes: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`KmerIndex.candidates`, its two passes as tasks on ``runner`` (see the notes);
    sets ``index.cut`` as the search in one pass does. A runner whose tasks would share
    this process (:func:`dnaembed.execute.runs_here`) gets the one-pass search, which
    keeps the first pass's k-mers for the second instead of computing them again and
    builds the queries' tables once for all its threads (:meth:`KmerIndex.candidates`)."""
    queries = list(queries)
    if runs_here(runner):
        return index.candidates(queries, top, min_votes=min_votes, runner=runner)
    best = TopTargets(len(queries), top)
    if len(queries) == 0 or len(index.targets) == 0:
        return best.result(min_votes)
    ranges = list(index.ranges(RANGE_TARGETS))
    query_data, query_lengths = pack_strings(queries)
    packed: list[tuple[np.ndarray, np.ndarray]] = []  # each range's targets, for both passes

    def tasks(common: np.ndarray | None):
        for i, (start, end) in enumerate(ranges):
            if i == len(packed):
                packed.append(pack_strings(strings_of(index.targets, np.arange(start, end))))
            groups = None
            if index.groups is not None:
                groups = index.groups[start:end] - index.groups[start]
            yield KmerRangeTask(*packed[i], groups, query_data, query_lengths, index.k,
                                index.both, top, common)

    wanted = index.wanted(queries)
    held_by = np.zeros(4**index.k, dtype=np.int32)
    for counts in runner.map(count_range, tasks(None), desc="counting k-mers", unit="range"):
        held_by[counts.codes] += counts.counts
    common = np.flatnonzero(index.common_of(held_by, wanted))
    del held_by, wanted
    votes = runner.map(vote_range, tasks(common), desc="k-mer votes", unit="range")
    for (start, end), found in zip(ranges, votes):
        first = start if index.groups is None else int(index.groups[start])
        m = end - start if index.groups is None else int(index.groups[end - 1]) + 1 - first
        best.merge_top(found, first, m)
    return best.result(min_votes)
