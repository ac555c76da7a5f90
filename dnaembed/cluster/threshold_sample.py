"""The threshold of partitioned clustering, from a sample searched as round 1 searches it.

:data:`SAMPLE_READS` reads are drawn from all; each is
searched in its nearest cell among that cell's members, as round 1 will search it; the
full distances of their candidate pairs choose the cut as the graph method chooses it
(:func:`dnaembed.cluster.threshold.sample_threshold`). Step 3 of
:mod:`dnaembed.cluster.partitioned`, before round 1, so that round 1 checks its pairs
against the threshold itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.cluster.candidates import CandidatePairs, candidate_pairs, levenshtein_pairs
from dnaembed.cluster.partition_tasks import SampleTask, sample_neighbours
from dnaembed.cluster.search import faiss_module
from dnaembed.cluster.threshold import Threshold, sample_threshold
from dnaembed.execute import runs_here
from dnaembed.execute.inline import InlineExecutor

if TYPE_CHECKING:
    from dnaembed.cluster.partitioned import _Run

#: Reads drawn for the threshold's sample, and their candidate pairs whose full distances
#: choose it (at most). Why this many: the cut extrapolates the same-strand tail from its
#: 10% and 1% points, and the 1% point of 20,000 pairs moved with the seed; more pairs of
#: the same 4,000 reads did not help (their pairs are correlated), more reads did.
#: ldpc-exp7, seeds 0-3, cells of 2,048 reads: cuts 18, 21, 22, 19 from 4,000 reads'
#: 20,000 pairs; 20, 22, 21, 20 from 16,000 reads' 20,000; 21, 21, 21, 22 from their
#: 64,000; 21, 21, 21, 21 from all (~200,000). The in-memory estimators keep a smaller
#: sample (:data:`~dnaembed.cluster.base.THRESHOLD_SAMPLE_READS`).
SAMPLE_READS = 16_000
SAMPLE_PAIRS = 250_000


def sampled_threshold(run: _Run, user_value: int | None) -> tuple[Threshold, np.ndarray]:
    """The cut for ``run`` (a partitioned run: its units, cells, vectors and runner), and
    the histogram of the distances it used (for the summary and its plot)."""
    units = run.units
    return _choose_threshold(_sample_pairs(run), units.lengths, units.median_length, run.seed,
                             user_value)


def _sample_pairs(run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sample's candidate pairs (unit ids) and their full distances.

    The searches get the cells' vectors only: tasks on the runner where they share this
    process, else here, on this process's threads (the run's ``threads``: the workers
    wait for the threshold). Sent to workers elsewhere, each task would carry a whole
    partition's vectors for a few queries (366 MB at 10^6 reads for 0.5 s of search).
    The distances are computed here (250,000 pairs at 10^6: 0.9 s of CPU). Drawn from a
    few cells instead, the sample missed the rarer reads of a real run: its threshold
    came out lower and A_0.9 with it (docs/scaling.md).
    """
    n = len(run.units)
    sample = np.zeros(n, dtype=bool)
    rng = np.random.default_rng([run.seed, 7])
    sample[rng.choice(n, min(n, SAMPLE_READS), replace=False)] = True
    cells = np.unique(run.home[sample])

    def tasks():
        for cell in cells.tolist():
            members = run.members[cell]
            queries = np.flatnonzero(sample[members] & (run.home[members] == cell))
            yield SampleTask(members, run.vectors.take(members), queries, run.neighbours)

    with _runner_here(run) as runner:
        found = list(runner.map(sample_neighbours, tasks(), desc="searching a sample",
                                unit="partition"))
    for result in found:
        run.stage.count("cpu_search", result.cpu_seconds)
    pairs = _distinct_pairs_of(found, n)
    lengths = run.units.lengths
    pairs = pairs.subset((lengths[pairs.lo] > 0) & (lengths[pairs.hi] > 0))
    dist = levenshtein_pairs(run.units.seqs, None, pairs, workers=run.threads)
    return pairs.lo, pairs.hi, dist.astype(np.int32)


@contextlib.contextmanager
def _runner_here(run) -> Iterator:
    """The run's runner where its tasks share this process; else one on ``run.threads``
    threads here, with this thread's faiss threads put back as they were after (a task
    sets them for the thread it runs on, this one among them; the rounds' k-means fits
    use them)."""
    if runs_here(run.runner):
        yield run.runner
        return
    faiss = faiss_module()
    before = faiss.omp_get_max_threads()
    try:
        with InlineExecutor(run.threads) as here:
            yield here
    finally:
        faiss.omp_set_num_threads(before)


def _distinct_pairs_of(found: list, n: int) -> CandidatePairs:
    """The candidate pairs of the sample's neighbour lists, each once, in key order (a pair
    of two sample reads may come from two cells)."""
    parts = [candidate_pairs(r.neighbours, rows=r.reads) for r in found]
    lo = np.concatenate([p.lo for p in parts] + [np.zeros(0, np.int64)])
    hi = np.concatenate([p.hi for p in parts] + [np.zeros(0, np.int64)])
    key = np.unique(lo * n + hi)
    none = np.zeros(len(key), np.int8)
    return CandidatePairs(key // n, key % n, none, none.astype(np.float32))


def _choose_threshold(sample: tuple, lengths: np.ndarray, median: float, seed: int,
                      user_value: int | None) -> tuple[Threshold, np.ndarray]:
    """The cut from the sample's full distances, as :meth:`Clusterer._threshold` does, and
    the histogram of the distances it used (for the summary and its plot)."""
    lo, hi, dist = sample
    if len(dist) > SAMPLE_PAIRS:
        pick = np.sort(np.random.default_rng([seed, 8]).choice(len(dist), SAMPLE_PAIRS,
                                                               replace=False))
        lo, hi, dist = lo[pick], hi[pick], dist[pick]
    est, use = sample_threshold(dist, np.minimum(lengths[lo], lengths[hi]),
                                np.maximum(lengths[lo], lengths[hi]), median, user_value)
    return est, np.bincount(dist[use])
