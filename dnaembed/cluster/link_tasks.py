"""Round 1's linking as tasks: each connected component of the checked pairs apart.

The guarded linker (:class:`~dnaembed.cluster.graph._GuardedLinker`) takes the pairs
shortest first and decides each from the two clusters it would join: their roots,
sizes, weights and representatives, and the guard between the representatives. Both
clusters lie within one connected component of the pairs' graph, so a component's
decisions depend on its own pairs alone, in their order. Linked apart, in tasks,
components end as in one pass: the same roots, parities, sizes, weights,
representatives, merges and refusals, which is the state later rounds go on from.

Components go to tasks in the order of their first read, whole, until a task holds
:data:`PAIRS_PER_TASK` pairs: the tasks depend on the pairs alone. Why: at 10^6 reads
round 1's linking is ~11 s of Python in this process, while the workers wait. The
linking holds the interpreter lock, so a runner whose tasks share this process
(:func:`dnaembed.execute.runs_here`) links here in one pass instead: the
same result, without the cost of splitting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.cluster.candidates import CandidatePairs
from dnaembed.cluster.graph import _GuardedLinker
from dnaembed.cluster.threshold import Threshold
from dnaembed.encoding import reverse_complement
from dnaembed.execute import Runner, runs_here
from dnaembed.io.bases import ReadBlock

if TYPE_CHECKING:
    from dnaembed.cluster.units import UnitSequences

#: Pairs per task (a task takes whole components until it holds this many).
PAIRS_PER_TASK = 262_144


@dataclass
class LinkTask:
    """Whole components: their reads (unit ids, increasing), sequences, degrees and weights;
    their pairs (numbered within ``reads``), parities and checked distances; the guard."""

    reads: np.ndarray
    seqs: ReadBlock
    degree: np.ndarray
    weights: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    parity: np.ndarray
    dist: np.ndarray
    threshold: Threshold
    factor: float
    guard: bool


@dataclass
class LinkResult:
    """The task's reads (unit ids); per read, numbered within the task: its root and parity
    (relative to it), and the state of the roots' entries (representative, its parity,
    weight, size); the counts; the refused representative pairs ``(a, b, parity)``."""

    reads: np.ndarray
    root: np.ndarray
    parity: np.ndarray
    rep: np.ndarray
    rep_parity: np.ndarray
    weight: np.ndarray
    size: np.ndarray
    merges: int
    refusals: int
    refused: np.ndarray


class _ReverseComplements:
    """The reverse complement of a read when the guard asks for it (representatives only)."""

    def __init__(self, seqs: list[str]) -> None:
        self.seqs = seqs

    def __getitem__(self, i: int) -> str:
        return reverse_complement(self.seqs[i])


def link_components(task: LinkTask) -> LinkResult:
    """Link the task's pairs in Kruskal order, guarded (as the linker does in one pass)."""
    seqs = task.seqs.strings()
    linker = _GuardedLinker(seqs, _ReverseComplements(seqs), task.degree, task.weights,
                            task.threshold, task.factor, task.guard)
    pairs = CandidatePairs(task.lo, task.hi, task.parity, np.zeros(len(task.lo), np.float32))
    linker.link(pairs, task.dist)
    root, parity = linker.uf.labels()
    refused = np.array(sorted(linker.refused), dtype=np.int64).reshape(-1, 3)

    def of(values, dtype):
        return np.frombuffer(values, dtype=dtype).copy()

    return LinkResult(task.reads, root, parity, of(linker.rep, np.int32),
                      of(linker.rep_parity, np.int8), of(linker.weight, np.float64),
                      of(linker.uf.size, np.int32), linker.merges, linker.refusals, refused)


def link_in_tasks(linker: _GuardedLinker, edges: CandidatePairs, dist: np.ndarray,
                  runner: Runner | None, seqs: UnitSequences, *, threshold: Threshold,
                  factor: float, guard: bool) -> None:
    """``linker.link(edges, dist)`` with its components linked in tasks on ``runner`` (see
    the module notes); ``linker`` (fresh: no pair linked yet) takes their results."""
    if runs_here(runner) or len(edges) == 0:
        linker.link(edges, dist)
        return
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(linker.weight)
    graph = coo_matrix((np.ones(len(edges), np.int8), (edges.lo, edges.hi)), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    # Labels follow each component's first read: tasks in that order, whole components.
    by_component = np.argsort(component[edges.lo], kind="stable")
    edge_component = component[edges.lo][by_component]
    cuts = _task_cuts(edge_component)
    reads, read_cuts, local = _task_reads(component, edge_component, cuts)
    degree = np.frombuffer(linker.deg, dtype=np.float64)
    weights = np.frombuffer(linker.weight, dtype=np.float64)

    def tasks():
        for task, (start, stop) in enumerate(zip(cuts[:-1], cuts[1:])):
            # In the pairs' own order, sorted by (lo, hi) as they come: the task's Kruskal
            # order is then one radix sort of the distances (graph.kruskal_order).
            pick = np.sort(by_component[start:stop])
            own = reads[read_cuts[task] : read_cuts[task + 1]]
            yield LinkTask(own, seqs.block(own), degree[own], weights[own],
                           local[edges.lo[pick]], local[edges.hi[pick]],
                           edges.parity[pick], dist[pick], threshold, factor, guard)

    for result in runner.map(link_components, tasks(), desc="linking", unit="task"):
        _absorb(linker, result)


def _task_cuts(edge_component: np.ndarray) -> np.ndarray:
    """Bounds of the tasks in the pairs sorted by component: whole components, about
    :data:`PAIRS_PER_TASK` pairs each."""
    starts = np.flatnonzero(np.r_[True, edge_component[1:] != edge_component[:-1]])
    cuts, last = [0], 0
    for start in starts.tolist():
        if start - last >= PAIRS_PER_TASK:
            cuts.append(start)
            last = start
    return np.array([*cuts, len(edge_component)], dtype=np.int64)


def _task_reads(component: np.ndarray, edge_component: np.ndarray, cuts: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each task's reads, increasing (those of its components; a read in no pair is in
    no task): ``reads[read_cuts[t] : read_cuts[t + 1]]`` for task ``t``; and ``local``,
    each read's place among its task's reads.

    One sort of the reads by task for all the tasks, where a union and two binary searches
    per task took 0.92 s of CPU against 0.17 (2.7 x 10^6 pairs among 10^6 reads in
    components of 10, 11 tasks), in the client while the tasks run.
    """
    task_of = np.full(int(component.max()) + 1, -1, dtype=np.int64)
    task_of[edge_component] = np.repeat(np.arange(len(cuts) - 1), np.diff(cuts))
    read_task = task_of[component]
    in_pairs = np.flatnonzero(read_task >= 0)
    reads = in_pairs[np.argsort(read_task[in_pairs], kind="stable")]  # by task, then read
    read_cuts = np.zeros(len(cuts), dtype=np.int64)
    np.cumsum(np.bincount(read_task[in_pairs], minlength=len(cuts) - 1), out=read_cuts[1:])
    local = np.zeros(len(component), dtype=np.int64)
    local[reads] = np.arange(len(reads)) - np.repeat(read_cuts[:-1], np.diff(read_cuts))
    return reads, read_cuts, local


def _absorb(linker: _GuardedLinker, result: LinkResult) -> None:
    """Write a task's components into the linker's state (its reads are nobody else's)."""
    reads = result.reads
    parent = np.frombuffer(linker.uf.parent, dtype=np.int32)
    parity = np.frombuffer(linker.uf.parity, dtype=np.int8)
    parent[reads] = reads[result.root]
    parity[reads] = result.parity
    roots = np.flatnonzero(result.root == np.arange(len(reads)))
    at = reads[roots]
    np.frombuffer(linker.rep, dtype=np.int32)[at] = reads[result.rep[roots]]
    np.frombuffer(linker.rep_parity, dtype=np.int8)[at] = result.rep_parity[roots]
    np.frombuffer(linker.weight, dtype=np.float64)[at] = result.weight[roots]
    np.frombuffer(linker.uf.size, dtype=np.int32)[at] = result.size[roots]
    linker.merges += result.merges
    linker.refusals += result.refusals
    for a, b, rel in result.refused.tolist():
        linker.refused.add((int(reads[a]), int(reads[b]), rel))
