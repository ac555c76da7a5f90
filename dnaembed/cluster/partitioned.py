"""The graph method, partitioned: bounded memory per task, tasks on any executor.

The same method as :class:`dnaembed.cluster.graph.GraphClusterer` (embedding
candidates, exact check, guarded Kruskal linking, both orientations through
the reverse complement of one read per cluster, the rescue), in steps whose
heavy work is independent tasks (:mod:`dnaembed.cluster.partition_tasks`):

1. embed a seeded sample; fit the search space and the coarse cells on it
   (:mod:`dnaembed.cluster.partition`);
2. embed every unit in fixed chunks: vectors (float16, in the search space,
   in memory or spilled) and cells;
3. the threshold, from the full distances of a sample's candidate pairs
   (the sample's reads searched first, each in its nearest cell:
   :mod:`dnaembed.cluster.threshold_sample`); then round
   1, per partition: exact neighbours of its home reads among its members,
   checked exactly against the threshold -> pairs;
4. one union-find over all pairs, guarded as today (in this process);
5. rounds 2, 3, ...: the representative of every cluster, as read and
   reverse-complemented, searched among the representatives, partitioned
   afresh by cells of another seed, checked and linked. No partitioning of
   this embedding keeps every pair together (its strands spread over many
   dimensions, so cell boundaries cut through some strands at any margin):
   a strand cut in two by one round's cells is joined by a later round's,
   whose boundaries lie elsewhere, as in the rounds of random partitions of
   Rashtchian et al. (NeurIPS 2017). Each round works on one read per
   cluster, a fraction of the reads, with a wider margin than round 1's
   (cheap there); from round 3 on, rounds stop once one merges fewer than
   ``rounds_until`` of the clusters or the next is expected to (their merges
   fall by about one factor a round), or after ``rounds``. Then the reads the
   rescue may examine get their nearest clusters' centres listed;
6. the split check (:mod:`dnaembed.cluster.split`) and the rescue
   (:mod:`dnaembed.cluster.rescue`), in this process.

Units far longer than the rest are set apart before step 1 and linked among
themselves at the end (:mod:`dnaembed.cluster.extreme`).

Tasks go through a ``runner`` (anything with ``map(fn, tasks, *, shared,
desc, unit)`` yielding results in task order: :mod:`dnaembed.execute`); the
algorithm never knows where they run. The chunks, the samples and the cells
depend on the input and the seed only, and each task gives the same bytes
wherever it runs, so the output does not depend on the executor, the number
of workers or threads.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.allocator import trim_memory
from dnaembed.arrays import largest_first
from dnaembed.cluster.candidates import CandidatePairs
from dnaembed.cluster.graph import _GuardedLinker
from dnaembed.cluster.labels import assemble
from dnaembed.cluster.link_tasks import link_in_tasks
from dnaembed.cluster.partition import (
    PARTITION_SIZE,
    Partitioner,
    fit_partitioner,
    members_of_cells,
)
from dnaembed.cluster.partition_tasks import EmbedTask, PartitionTask, embed_chunk, search_partition
from dnaembed.cluster.rescue_rule import CandidateSearch, rescue_settings
from dnaembed.cluster.rounds import PairCollector, RepresentativeRounds
from dnaembed.cluster.threshold import FULL_LENGTH_FRACTION, Threshold
from dnaembed.cluster.threshold_sample import sampled_threshold
from dnaembed.cluster.units import Units
from dnaembed.io.spill import SpillArray
from dnaembed.io.spill_dir import SpillDir
from dnaembed.log import logger

if TYPE_CHECKING:
    from dnaembed.execute import Runner
    from dnaembed.model.encoder import Encoder

#: Fewest reads per embedding chunk (below the plan's chunk size).
MIN_CHUNK = 1_024


@dataclass
class PartitionPlan:
    """How the work is split: reads per embedding chunk, partitions, what is spilled."""

    chunk_size: int = 16_384
    partition_size: int = PARTITION_SIZE
    #: Round 1's and later rounds' margins, in units of the sample's spread.
    #: Representatives per cell in round 2 (None: ``partition_size``); rounds 3.. hold
    #: :data:`~dnaembed.cluster.rounds.LATER_CELL_FACTOR` times as many.
    rep_partition_size: int | None = None
    margin: float = 0.5
    #: Rounds 2.. place clusters by their centres (:mod:`dnaembed.cluster.centres`), closer
    #: together than single reads: at 1.25 round 2 held each in fewer cells than
    #: representatives at 1.5 (6.60 against 7.10 at 10^6) and left the later rounds a
    #: third fewer merges.
    rep_margin: float = 1.25
    max_cells: int = 4
    #: Cells a centre is copied to in rounds 2.. (within ``rep_margin``). Why 6, not 8: a
    #: round costs its copies, and more of them as the cells multiply (round 2 at 3 x
    #: 10^6 reads: 5.74 copies against 7.45). One pair each (thirty-first session): the
    #: rounds' tasks 88.7 s of CPU against 104.8 at 3 x 10^6 under --memory 2G (205.7 s
    #: against 213.0), 22.0-22.6 against 25.6-26.5 at 10^6; the later rounds merge what
    #: round 2 leaves (1,469 merges in round 4 against 708, no round more); A_0.9
    #: 0.99997 against 0.99998 at 3 x 10^6, 0.99999 against 1.0000 at 10^6, the same on
    #: ldpc-exp7 (0.9751) and a nanopore-hard set (0.9988).
    rep_max_cells: int = 6
    search_dim: int = 64
    spill_vectors: bool = False
    #: Bytes of the spilled vectors' pages that may stay resident while the threshold's
    #: sample and round 1 read them (the budget's ``ROUND1_RESIDENT_PER_READ`` a read).
    resident_vectors: int = 0
    sample_size: int = 4_096
    rounds: int = 6
    #: Later rounds stop once one merges fewer than this fraction of the clusters, or the
    #: next is expected to (:func:`~dnaembed.cluster.rounds.rounds_over`).
    rounds_until: float = 0.001


@dataclass
class PartitionedResult:
    """Per unit: cluster, orientation; representatives; the threshold; timings and counts."""

    labels: np.ndarray
    orientation: np.ndarray
    representatives: np.ndarray
    threshold: Threshold | None
    timings: dict[str, float] = field(default_factory=dict)
    stats: dict[str, object] = field(default_factory=dict)


class _Stage:
    """Wall time per stage, this thread's CPU time per stage (what this process does
    itself, the tasks it waits for aside), and counts, for the log and the projection."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.stats: dict[str, object] = {"client_cpu": {}}

    @staticmethod
    def clock() -> tuple[float, float]:
        """The start of a stage, for :meth:`timed`."""
        return time.perf_counter(), time.thread_time()

    def timed(self, stage: str, start: tuple[float, float]) -> None:
        wall, cpu = start
        self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - wall
        own = self.stats["client_cpu"]
        own[stage] = own.get(stage, 0.0) + time.thread_time() - cpu

    def count(self, key: str, value: float) -> None:
        self.stats[key] = self.stats.get(key, 0) + value


def cluster_units(
    units: Units,
    model: Encoder,
    runner: Runner,
    *,
    plan: PartitionPlan,
    spill: SpillDir | None = None,
    neighbours: int = 16,
    max_dist: int | None = None,
    guard: bool = True,
    guard_factor: float = 1.5,
    rescue: bool = True,
    rescue_max_size: int = 2,
    split: bool = True,
    both: bool = True,
    seed: int = 0,
    precision: str = "auto",
    batch_size: int | None = None,
    threads: int = 0,
) -> PartitionedResult:
    """Cluster the units with the partitioned graph method (see the module notes).

    Units far longer than the rest are set apart first, so that they change no other
    unit's cluster (:mod:`dnaembed.cluster.extreme`). ``threads``: this process's own
    threads, for the steps it runs itself while the tasks wait (0: every available core).
    """
    from dnaembed.cluster.extreme import far_longer, join_set_apart

    options = dict(plan=plan, spill=spill, neighbours=neighbours, max_dist=max_dist,
                   guard=guard, guard_factor=guard_factor, rescue=rescue,
                   rescue_max_size=rescue_max_size, split=split, both=both, seed=seed,
                   precision=precision, batch_size=batch_size, threads=threads)
    apart = far_longer(units.lengths)
    if not apart.any():
        return _cluster_all(units, model, runner, **options)
    found = _cluster_all(units.subset(np.flatnonzero(~apart)), model, runner, **options)
    labels, orient, reps = join_set_apart(
        units.seqs, units.lengths, units.weights, apart, found.labels, found.orientation,
        found.representatives, found.threshold, both=both)
    found.stats["set_apart"] = int(apart.sum())
    return PartitionedResult(labels, orient, reps, found.threshold, found.timings, found.stats)


def _cluster_all(units: Units, model, runner, *, plan: PartitionPlan, spill: SpillDir | None,
                 neighbours: int, max_dist: int | None, guard: bool, guard_factor: float,
                 rescue: bool, rescue_max_size: int, split: bool, both: bool, seed: int,
                 precision: str, batch_size: int | None, threads: int) -> PartitionedResult:
    """:func:`cluster_units` on units of typical lengths."""
    n = len(units)
    if n <= 1:
        return PartitionedResult(np.zeros(n, np.int64), np.zeros(n, np.int8),
                                 np.zeros(n, np.int64), None)
    run = _Run(units, model, runner, plan, spill, neighbours, seed, precision, batch_size,
               threads)
    try:
        run.embed_all()
        trim_memory()
        threshold, edges, dist = run.first_round(max_dist)
        trim_memory()
        w = units.weights.astype(np.float64)
        degree = (w - 1) + np.bincount(edges.lo, weights=w[edges.hi], minlength=n) + np.bincount(
            edges.hi, weights=w[edges.lo], minlength=n)
        start = run.stage.clock()
        linker = _GuardedLinker(units.seqs, units.seqs.reversed(), degree, units.weights,
                                threshold, guard_factor, guard)
        link_in_tasks(linker, edges, dist, runner, units.seqs, threshold=threshold,
                      factor=guard_factor, guard=guard)
        del edges, dist  # round 1's pairs are linked: nothing reads them again
        run.stage.timed("link", start)
        rescuing = rescue and n > 2
        # A noisy sample's rescue takes larger pieces and searches k-mers more widely.
        rescue_max_size, search = rescue_settings(threshold.error_rate, rescue_max_size)
        rounds = RepresentativeRounds(run, threshold, both=both)
        rounds.link(linker, plan.rounds, plan.rounds_until)
        if rescuing:
            rounds.list_neighbours(linker, _rescue_superset(linker, units, rescue_max_size))
        groups, parity = linker.uf.labels()
        run.stage.stats.update(merges=linker.merges, guard_refusals=linker.refusals)
        # The split and the rescue need neither the vectors nor the linker: free them first.
        del linker
        rounds.release_vectors()
        run.close()
        trim_memory()
        if split:
            groups = _split(units, groups, parity, degree, threshold, run.stage, run.threads)
        result = _finish(units, groups, parity, degree, threshold, rounds.lists,
                         search if rescuing else None, rescue_max_size, both, seed, run.stage,
                         runner, run.threads)
    finally:
        run.close()
    return result


class _Run:
    """The state of one partitioned run: the vectors, cells and partitioner; the runner."""

    def __init__(self, units, model, runner, plan, spill, neighbours, seed, precision,
                 batch_size, threads: int) -> None:
        from dnaembed.log import available_cores

        self.units, self.model, self.runner, self.plan = units, model, runner, plan
        self.threads = threads if threads > 0 else available_cores()
        self.neighbours, self.seed = neighbours, seed
        self.precision, self.batch_size = precision, batch_size
        self.stage = _Stage()
        self.spill = spill
        self.spill_to = (spill.new_file("vectors.f16") if plan.spill_vectors and spill is not None
                         else None)
        self.vectors = SpillArray((0,), np.float16)
        self.home: np.ndarray | None = None  # each unit's nearest cell
        self.partitioner: Partitioner | None = None
        self.sample_vectors: np.ndarray | None = None
        self.members: list[np.ndarray] = []
        # Small inputs in several chunks too, so that they embed on several threads; the
        # chunks depend on the number of reads only.
        self.chunk_size = max(MIN_CHUNK, min(plan.chunk_size, len(units) // 16))

    def close(self) -> None:
        self.vectors.close()

    def embed(self, units: np.ndarray, *, reverse: bool, desc: str, full: bool = False,
              cells: bool = True) -> Iterator:
        """Embed units in fixed chunks (which depend on ``units`` only); ``full``: the model's
        vectors, else projected into the search space, with their cells unless ``cells``
        is False."""
        size = self.chunk_size
        partitioner = None if full else self.partitioner

        def tasks():
            for start in range(0, len(units), size):
                yield EmbedTask(self.units.seqs.block(units[start : start + size]), reverse,
                                partitioner, self.precision, self.batch_size, cells)

        yield from self.runner.map(embed_chunk, tasks(), shared=self.model, desc=desc,
                                   unit="chunk")

    def embed_all(self) -> None:
        """Steps 1 and 2: the sample, the partitioner, then every unit's vector and cells.

        The sample's own vectors are projected here and kept; the other units are
        embedded in chunks, and the two merged in unit order.
        """
        n, plan = len(self.units), self.plan
        start = self.stage.clock()
        cells = max(1, -(-n // plan.partition_size))
        rng = np.random.default_rng([self.seed, 21])
        sample = np.sort(rng.choice(n, min(n, max(plan.sample_size, 64 * cells)), replace=False))
        full, truncated = [], 0
        for result in self.embed(sample, reverse=False, desc="embedding a sample", full=True):
            full.append(result.vectors)
            truncated += result.truncated
            self.stage.count("cpu_embed", result.cpu_seconds)
        full = np.concatenate(full)
        self.partitioner = fit_partitioner(full, cells=cells, search_dim=plan.search_dim,
                                           margin=plan.margin, max_cells=plan.max_cells,
                                           seed=self.seed)
        self.sample_vectors = self.partitioner.project(full)
        del full
        self.stage.timed("partition", start)
        start = self.stage.clock()
        self.vectors = SpillArray((self.partitioner.dim,), np.float16, spill_to=self.spill_to)
        cell_blocks, truncated = self._embed_rest(sample, truncated)
        cells = np.concatenate(cell_blocks)
        del cell_blocks
        self.members = members_of_cells(cells, self.partitioner.cells)
        self.home = cells[:, 0].copy()
        del cells
        self.stage.timed("embed", start)
        copies = sum(map(len, self.members)) / n
        self.stage.stats.update(partitions=self.partitioner.cells,
                                partition_size=plan.partition_size,
                                copies_per_read=round(copies, 3),
                                search_dim=self.partitioner.dim, truncated=truncated)
        logger.info("%d distinct reads in %d partitions (each read in %.2f on average; "
                    "search in %d dimensions)", n, self.partitioner.cells, copies,
                    self.partitioner.dim)

    def _embed_rest(self, sample: np.ndarray, truncated: int) -> tuple[list, int]:
        """Embed the units outside the sample; write every unit's vector in unit order."""
        n, dim, width = len(self.units), self.partitioner.dim, self.plan.max_cells
        sample_cells = self.partitioner.assign(self.sample_vectors)
        outside = np.ones(n, dtype=bool)
        outside[sample] = False
        rest = np.flatnonzero(outside)
        size = self.chunk_size
        results = self.embed(rest, reverse=False, desc="embedding")
        cell_blocks, done = [], 0  # every unit below ``done`` is written
        for stop in [*range(size, len(rest), size), None]:
            result = next(results) if len(rest) else None
            upto = n if stop is None else int(rest[stop - 1]) + 1
            block = np.arange(done, upto)
            at = np.minimum(np.searchsorted(sample, block), max(len(sample) - 1, 0))
            in_sample = sample[at] == block if len(sample) else np.zeros(len(block), bool)
            vectors = np.empty((len(block), dim), np.float16)
            cells = np.empty((len(block), width), np.int32)
            vectors[in_sample], cells[in_sample] = self.sample_vectors[at[in_sample]], \
                sample_cells[at[in_sample]]
            if result is not None:
                vectors[~in_sample], cells[~in_sample] = result.vectors, result.cells
                truncated += result.truncated
                self.stage.count("cpu_embed", result.cpu_seconds)
            self.vectors.append(vectors)
            cell_blocks.append(cells)
            done = upto
        self.vectors.finish()
        return cell_blocks, truncated

    def first_round(self, max_dist: int | None) -> tuple[Threshold, CandidatePairs, np.ndarray]:
        """Step 3: the threshold from a sample's full distances; then every partition's
        pairs within it."""
        start = self.stage.clock()
        with self.vectors.resident_up_to(self.plan.resident_vectors):
            threshold, histogram = sampled_threshold(self, max_dist)
            self.stage.stats["distance_histogram"] = histogram
            noisy = threshold.source == "fallback" and len(self.units) > 50
            (logger.warning if noisy else logger.info)("%s", threshold.describe())
            lo, hi, dist = self._search_partitions(threshold)
        self.stage.timed("search", start)
        self.stage.count("verified_pairs", len(lo))
        zeros = np.zeros(len(lo), np.int8)
        return threshold, CandidatePairs(lo, hi, zeros, zeros.astype(np.float32)), dist

    def _search_partitions(self, cut: Threshold):
        """Round 1: every partition's home reads' pairs within ``cut`` (unit ids, distinct)."""

        # A partition costs its home reads' searches among its members: the largest first.
        homes = np.bincount(self.home, minlength=len(self.members))
        order = largest_first(np.array([len(m) for m in self.members]) * homes)

        def tasks():
            for cell in order.tolist():
                members = self.members[cell]
                home = self.home[members] == cell
                yield PartitionTask(members, self.vectors.take(members),
                                    self.units.seqs.block(members), home, cut, self.neighbours)

        # Every partition's pairs are held until all are in: packed as they arrive.
        longest = int(self.units.lengths.max(initial=0))
        pairs = PairCollector(len(self.units), int(cut.cuts(np.array([longest]))[0]))
        for result in self.runner.map(search_partition, tasks(), desc="searching partitions",
                                      unit="partition"):
            pairs.add(result.lo, result.hi, np.zeros(len(result.lo), np.int8), result.dist)
            self.stage.count("candidate_pairs", result.candidates)
            self.stage.count("cpu_search", result.cpu_seconds)
        lo, hi, _, dist = pairs.distinct()
        return lo, hi, dist


def _split(units: Units, groups: np.ndarray, parity: np.ndarray, degree: np.ndarray,
           threshold: Threshold, stage: _Stage, threads: int) -> np.ndarray:
    """Step 5b: clusters whose reads form two groups are split (:mod:`.split`), here, on
    ``threads`` threads."""
    from dnaembed.cluster.split import split_clusters

    start = stage.clock()
    groups, counts = split_clusters(units.seqs, units.seqs.reversed(), groups, parity, degree,
                                    units.weights, threshold, lengths=units.lengths,
                                    workers=threads)
    stage.stats.update(counts)
    stage.timed("split", start)
    return groups


def _rescue_superset(linker: _GuardedLinker, units: Units, max_size: int) -> np.ndarray:
    """Every unit the rescue may examine, as the rounds leave the clusters (see the
    rescue's notes): a read of a cluster of at most ``max_size`` reads (pass 1, and the
    reads it leaves behind), or of one without a read of full length (pass 2). The split
    after the rounds can make more (:class:`~dnaembed.cluster.neighbour_lists.NeighbourLists`).
    """
    groups, _ = linker.uf.labels()
    full = units.lengths >= FULL_LENGTH_FRACTION * units.median_length
    size = np.bincount(groups, weights=units.weights, minlength=len(units))
    has_full = np.bincount(groups, weights=full, minlength=len(units)) > 0
    return np.flatnonzero((size[groups] <= max_size) | ~has_full[groups])


def _finish(units: Units, groups, parity, degree, threshold, lists,
            rescue: CandidateSearch | None, max_size: int, both: bool, seed: int,
            stage: _Stage, runner, threads: int) -> PartitionedResult:
    """Labels from the linked groups, representatives of full length, then the rescue
    (``rescue``: its k-mer search; None: no rescue), its searches and alignments on the
    runner, or on ``threads`` threads here where that is cheaper."""
    full_length = FULL_LENGTH_FRACTION * units.median_length
    centrality = np.asarray(degree, dtype=np.float64)
    lift = float(np.abs(centrality).max(initial=0.0)) * 2 + 1
    centrality = centrality + lift * (units.lengths >= full_length)
    labels, orient, reps = assemble(groups, parity, centrality, units.weights)
    if rescue is not None:
        from dnaembed.cluster.rescue import rescue_reads

        start = stage.clock()
        labels, orient, reps, rescued = rescue_reads(
            units.seqs, units.seqs.reversed() if both else None, labels, orient, centrality,
            units.weights, lists, rate=threshold.rescue_rate, max_size=max_size,
            full_length=full_length, seed=seed, lengths=units.lengths, search=rescue,
            runner=runner, threads=threads)
        stage.stats["rescued"] = rescued
        stage.timed("rescue", start)
    return PartitionedResult(labels, orient, reps, threshold, stage.timings, stage.stats)
