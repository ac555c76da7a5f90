"""Rounds 2, 3, ... of partitioned clustering: one read per cluster, partitioned afresh.

After round 1 (every read, searched in its own partition) the clusters are
strands, or pieces of strands that a cell boundary cut apart, in either
orientation. Each later round takes every cluster, by its centre (the mean
vector of its reads, :mod:`dnaembed.cluster.centres`) and by its
representative read reverse-complemented, assigns them to the cells of a
new coarse quantizer (another seed, so other boundaries), searches each one's
nearest centres within its cell, checks the pairs of representatives exactly
and links them with the same guard (see :mod:`dnaembed.cluster.partitioned`).

Once the rounds are over, the reads the rescue may examine (those of clusters still
small) get their nearest clusters' centres as read and reverse-complemented: the
rescue's embedding candidates (:meth:`RepresentativeRounds.list_neighbours`, kept in
:class:`~dnaembed.cluster.neighbour_lists.NeighbourLists`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.allocator import trim_memory
from dnaembed.arrays import largest_first
from dnaembed.cluster.candidates import CandidatePairs
from dnaembed.cluster.centres import cluster_centres
from dnaembed.cluster.neighbour_lists import NeighbourLists, nearest_of_lists
from dnaembed.cluster.partition import Partitioner, fit_partitioner, members_of_cells
from dnaembed.cluster.partition_tasks import ListTask, QueryTask, list_partition, query_partition
from dnaembed.cluster.threshold import Threshold
from dnaembed.io.spill import SpillArray
from dnaembed.log import logger

if TYPE_CHECKING:
    from dnaembed.cluster.graph import _GuardedLinker
    from dnaembed.cluster.partitioned import _Run


@dataclass
class _Queries:
    """A round's queries: unit and orientation; ``centre``: the row of the centre
    searched for (a cluster's, as read), or -1 for the unit's own vector.

    Their vectors are fetched task by task (:meth:`RepresentativeRounds._query_vectors`):
    all of them at once would be a second copy of a round's vectors while its tasks run.
    """

    unit: np.ndarray
    reverse: np.ndarray
    centre: np.ndarray

    @classmethod
    def join(cls, parts: list[tuple[np.ndarray, bool]], centres: np.ndarray) -> _Queries:
        """``parts``: (units, reverse); the first part's centres are ``centres``."""
        first = len(parts[0][0])
        return cls(
            np.concatenate([p[0] for p in parts]).astype(np.int64),
            np.concatenate([np.full(len(p[0]), p[1]) for p in parts]),
            np.concatenate([centres, np.full(sum(len(p[0]) for p in parts) - first, -1)]),
        )


class RepresentativeRounds:
    """Rounds 2.. over a run (``run``: the vectors, the units, the runner; see partitioned)."""

    def __init__(self, run: _Run, threshold: Threshold, *, both: bool) -> None:
        self.run, self.threshold, self.both = run, threshold, both
        self.lists = NeighbourLists(np.zeros(0, np.int64), run.neighbours, both)
        self._rc_rows = np.zeros(0, np.int64)
        self._rc_vectors = np.zeros((0, run.partitioner.dim), np.float16)
        self.layout = (0, 0.0)  # the last round's cells and copies per representative
        # The centres of the round's clusters, rows as its representatives (``_centred``);
        # spilled where the vectors are (round 2's tasks run beside them).
        self.centres = SpillArray((run.partitioner.dim,), np.float16).finish()
        self._centred = np.zeros(0, np.int64)

    def link(self, linker: _GuardedLinker, rounds: int, until: float = 0.0) -> None:
        """Rounds 2..``rounds``, stopping once a round (from the second on) merges fewer
        than ``until`` of the clusters, or the next is expected to (:func:`rounds_over`)."""
        run = self.run
        merged: list[int] = []  # merges of each round, from round 2 on
        for number in range(2, rounds + 1):
            reps, weights = linker.clusters()
            first = number == 2
            # Round 2 searches for every cluster: round 1 may have cut most strands into
            # pieces, when the median cluster says nothing of a strand's size.
            asked = np.ones(len(reps), dtype=bool) if first else pieces(weights)
            if first and self.both:
                start = run.stage.clock()
                self._embed_reverse(reps)
                run.stage.timed("embed", start)
            start = run.stage.clock()
            self._centre(linker, reps)
            lo, hi, parity, dist = self._round(reps, asked, number)
            run.stage.timed("search", start)
            start = run.stage.clock()
            merges = linker.merges
            linker.link(CandidatePairs(lo, hi, parity, np.zeros(len(lo), np.float32)), dist)
            run.stage.timed("link", start)
            run.stage.count("verified_pairs", len(lo))
            cells, copies = self.layout
            logger.info("round %d: %d clusters, %d of them searched for, %d pairs checked "
                        "within the cut, %d merged (%d cells, each representative in %.2f)",
                        number, len(reps), int(asked.sum()), len(lo), linker.merges - merges,
                        cells, copies)
            run.stage.stats[f"round{number}_merges"] = linker.merges - merges
            merged.append(linker.merges - merges)
            if rounds_over(merged, len(reps), until):
                if number < rounds and merged[-1] > until * len(reps):
                    logger.info("rounds: round %d would merge about %d clusters; stopping",
                                number + 1, expected_merges(merged))
                break

    def release_vectors(self) -> None:
        """The rounds are over: drop the centres and the reverse complements' vectors (the
        lists stay)."""
        self._rc_rows = self._centred = np.zeros(0, np.int64)
        self._rc_vectors = np.zeros((0, self.run.partitioner.dim), np.float16)
        self.centres.close()

    def list_neighbours(self, linker: _GuardedLinker, rows: np.ndarray) -> None:
        """The rescue's lists (:attr:`lists`): for ``rows``, the reads of clusters still
        small enough for the rescue once the rounds are over, their nearest clusters'
        centres as read and reverse-complemented.

        Why after the rounds and not with round 2's searches, from the clusters small
        after round 1: round 2 merges most of those, and listing their reads cost 30% of
        round 2's queries at 3 x 10^6 reads (186,817 reads, 4.8 times 10^6's), when ~22,000
        are left for the rescue. The reads being few and the centres many, each centre is
        in its nearest cell alone and each read is searched in every cell within the
        rounds' margin of it (a round copies its centres instead).
        """
        run, k = self.run, self.run.neighbours
        rows = np.asarray(rows, dtype=np.int64)
        self.lists = NeighbourLists(rows, k, self.both)
        if len(rows) == 0:
            return
        reps, _ = linker.clusters()
        if self.both:
            start = run.stage.clock()
            self._embed_reverse(rows)
            run.stage.timed("embed", start)
        start = run.stage.clock()
        self._centre(linker, reps)
        part = self._partitioner(len(reps), 0)
        members = members_of_cells(part.nearest(self.centres.view())[:, None], part.cells)
        self.centres.release()
        sides = [False, True] if self.both else [False]
        queries = _Queries(np.tile(rows, len(sides)), np.repeat(sides, len(rows)),
                           np.full(len(rows) * len(sides), -1))  # their own vectors
        query_cells = np.concatenate([part.assign(self._vectors(rows, reverse))
                                      for reverse in sides])
        copies = members_of_cells(query_cells, part.cells)
        indices, distances = self._list(queries, copies, members, reps)
        self.lists.put(queries.unit, queries.reverse, indices, distances)
        run.stage.timed("search", start)
        run.stage.stats.update(listed_reads=len(rows),
                               listed_neighbours=int((self.lists.indices >= 0).sum()))
        logger.info("rescue's lists: %d reads among %d clusters' centres (%d cells, each "
                    "read in %.2f)", len(rows), len(reps), part.cells,
                    sum(map(len, copies)) / len(queries.unit))

    def _list(self, queries: _Queries, copies: list[np.ndarray], members: list[np.ndarray],
              reps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each query's nearest members over the cells it is copied to (``copies``: each
        cell's query rows)."""
        run, k = self.run, self.run.neighbours
        searched = [(cell, rows) for cell, rows in enumerate(copies)
                    if len(rows) and len(members[cell])]

        def tasks():
            for cell, rows in searched:
                yield ListTask(reps[members[cell]], self.centres.take(members[cell]),
                               queries.unit[rows], queries.reverse[rows],
                               self._query_vectors(queries, rows), k)

        found = []
        for result in run.runner.map(list_partition, tasks(), desc="listing the rescue's "
                                     "neighbours", unit="partition"):
            found.append(result)
            run.stage.count("cpu_rounds", result.cpu_seconds)
        query_rows = np.concatenate([rows for _, rows in searched] or [np.zeros(0, np.int64)])
        return nearest_of_lists(query_rows, found, len(queries.unit), k)

    def _centre(self, linker, reps: np.ndarray) -> None:
        """The clusters' centres: computed for round 2; later rounds keep those of their
        representatives, every one of which was a representative in round 2 (a merged
        cluster keeps one of its sides'). Why not afresh: a round merges a few percent of
        the clusters, and the means of 10^6 vectors in 126,000 random clusters took 0.55 s
        of CPU, of 3 x 10^6 in 440,000 2.7 s."""
        run = self.run
        if len(self._centred) == 0:
            values = cluster_centres(run.vectors, linker, reps)
        else:
            at = np.searchsorted(self._centred, reps)
            if (self._centred[np.minimum(at, len(self._centred) - 1)] != reps).any():
                raise AssertionError("a representative that had no centre")
            values = self.centres.take(at, release=True)
        self.centres.close()
        spill_to = run.spill.new_file("centres.f16") if run.spill_to is not None else None
        self.centres = SpillArray((run.partitioner.dim,), np.float16, spill_to=spill_to)
        for start in range(0, len(values), 1 << 16):  # not one copy of them all as bytes
            self.centres.append(values[start : start + (1 << 16)])
        self.centres.finish()
        self._centred = reps

    def _embed_reverse(self, rows: np.ndarray) -> None:
        """Reverse complements of these units (those not embedded yet), in the search space;
        kept for later rounds and the rescue's lists."""
        rows = np.setdiff1d(rows, self._rc_rows)
        if len(rows) == 0:
            return
        blocks = [self._rc_vectors]
        for result in self.run.embed(rows, reverse=True, desc="embedding reverse complements",
                                     cells=False):
            blocks.append(result.vectors)
            self.run.stage.count("cpu_embed", result.cpu_seconds)
        rows = np.concatenate([self._rc_rows, rows])
        order = np.argsort(rows, kind="stable")
        self._rc_rows, self._rc_vectors = rows[order], np.concatenate(blocks)[order]

    def _reverse_vectors(self, units: np.ndarray) -> np.ndarray:
        return self._rc_vectors[np.searchsorted(self._rc_rows, units)]

    def _vectors(self, units: np.ndarray, reverse: bool) -> np.ndarray:
        """Units' vectors (search space, float16), as read or reverse-complemented."""
        return self._reverse_vectors(units) if reverse else self.run.vectors.take(units)

    def _query_vectors(self, queries: _Queries, rows: np.ndarray) -> np.ndarray:
        """The vectors of these query rows: a centre, or a unit's in its orientation."""
        unit, reverse, centre = queries.unit[rows], queries.reverse[rows], queries.centre[rows]
        out = np.empty((len(rows), self.run.partitioner.dim), np.float16)
        own = centre < 0
        out[~own] = self.centres.take(centre[~own])
        out[own & ~reverse] = self._vectors(unit[own & ~reverse], False)
        out[own & reverse] = self._vectors(unit[own & reverse], True)
        return out

    def _partitioner(self, count: int, number: int) -> Partitioner:
        """Cells for ``count`` representatives, of a seed of this round's own (larger from
        round 3 on: :data:`LATER_CELL_FACTOR`; ``number`` 0: the rescue's lists, in round
        2's size)."""
        run = self.run
        size = run.plan.rep_partition_size or run.plan.partition_size
        if number > 2:
            size *= LATER_CELL_FACTOR
        cells = max(1, -(-count // size))
        seed = int(np.random.default_rng([run.seed, 31, number]).integers(2**31 - 1))
        # Fitted in the search space already: no projection of its own.
        return fit_partitioner(run.sample_vectors, cells=cells, search_dim=0,
                               margin=run.plan.rep_margin, max_cells=run.plan.rep_max_cells,
                               seed=seed)

    def _round(self, reps: np.ndarray, asked: np.ndarray, number: int):
        """One round in the cells of a fresh partitioner: the clusters ``asked`` (a mask)
        searched for among all of them; checked pairs."""
        part = self._partitioner(len(reps), number)
        db_cells = part.assign(self.centres.view())
        self.centres.release()
        parts = [(reps[asked], False)]
        if self.both:
            parts.append((reps[asked], True))
        queries = _Queries.join(parts, np.flatnonzero(asked))
        home = np.concatenate([db_cells[asked, 0]] + [
            part.nearest(self._vectors(units, reverse)) for units, reverse in parts[1:]
        ]).astype(np.int64)
        members = members_of_cells(db_cells, part.cells)  # rows of reps and centres
        del db_cells
        # For the log: the cost of a round grows with the copies of each representative.
        self.layout = (part.cells, sum(map(len, members)) / max(len(reps), 1))
        # The tasks' threads are about to allocate: give back what earlier stages freed first.
        trim_memory()
        return self._search(queries, home, reps, members)

    def _search(self, queries: _Queries, home: np.ndarray, reps: np.ndarray,
                members: list[np.ndarray]):
        run = self.run
        order = np.lexsort((np.arange(len(home)), home))
        bounds = np.searchsorted(home[order], np.arange(len(members) + 1))
        # A cell costs its queries' searches among its members: the largest first.
        cells = largest_first(np.diff(bounds) * np.array([len(m) for m in members]))

        def tasks():
            for cell in cells.tolist():
                cell_rows = members[cell]
                rows = order[bounds[cell] : bounds[cell + 1]]
                if len(rows) == 0 or len(cell_rows) == 0:
                    continue
                cell_members = reps[cell_rows]
                seqs = run.units.seqs
                yield QueryTask(cell_members, self.centres.take(cell_rows),
                                seqs.block(cell_members), queries.unit[rows],
                                self._query_vectors(queries, rows),
                                seqs.block(queries.unit[rows]), queries.reverse[rows],
                                self.threshold, run.neighbours)

        out = {"lo": [], "hi": [], "parity": [], "dist": []}
        for result in run.runner.map(query_partition, tasks(), desc="searching representatives",
                                     unit="partition"):
            for key in out:
                out[key].append(getattr(result, key))
            run.stage.count("candidate_pairs", result.candidates)
            run.stage.count("cpu_rounds", result.cpu_seconds)
        joined = [np.concatenate(v) if v else np.zeros(0, np.int64) for v in out.values()]
        return distinct_pairs(*joined, n=len(run.units))


#: Rounds 3.. hold this many times round 2's representatives per cell. Why: they search
#: for few pieces (~15% of the clusters) among every representative, and larger cells
#: cut fewer strands (a representative's copies are capped at ``rep_max_cells``). Their
#: time halved although they compute about twice the distances (8,192 members per cell,
#: each in 7.2 cells, against 4,096 in 7.6), so it went to what each cell costs, not
#: to the search; which part was not profiled. At 3 x 10^6 reads
#: (docs/scaling-history.md) rounds 3..6 took 34 s
#: instead of 68 s and the run 382.5 s instead of 401.6 s, A_0.9 1.0000 against 0.9999.
#: Round 2 keeps its cells: it searches for every representative, and doubling its
#: cells' size cost it 43 s there.
LATER_CELL_FACTOR = 2

#: Rounds 3.. search for the representatives of clusters of at most this fraction of the
#: median cluster's reads (or of :data:`PIECE_MIN_READS`, if more), among all of them.
PIECE_FRACTION = 0.5
PIECE_MIN_READS = 2


def rounds_over(merged: list[int], clusters: int, until: float) -> bool:
    """Whether the rounds stop after the last of ``merged`` (each round's merges, from
    round 2 on; ``clusters`` at the start of the last): it merged at most ``until`` of
    them, or the next round is expected to.

    Why expect: rounds 3.. search for the same kind of pieces in fresh cells, so their
    merges fall by about one factor a round (3 x 10^6 nanopore reads: 5,182, 708, 156),
    and the next is about ``last * last / previous``. Stopping only after a round that
    merged too few runs that round for nothing; at 3 x 10^6 reads the fifth (156 merges,
    10-17 s of the tasks' CPU; the rescue then took all but one of its pieces). Round 2
    searches for every cluster and is no guide to the later ones' decay.
    """
    if len(merged) < 2:
        return False
    if merged[-1] <= until * clusters:
        return True
    return len(merged) >= 3 and expected_merges(merged) <= until * clusters


def expected_merges(merged: list[int]) -> float:
    """The next round's merges, expected from the last two rounds' (rounds 3.. only)."""
    return merged[-1] * merged[-1] / max(merged[-2], 1)


def pieces(weights: np.ndarray) -> np.ndarray:
    """Which clusters (by their reads, ``weights``) may be pieces of a larger strand.

    Why not every cluster (rounds 3..): a round merges a piece that one partition's
    boundary cut off into the rest of its strand, and after round 2 the piece is nearly
    always the small side. At 10^6 nanopore reads, every one of rounds 3 and 4's 480
    merges had a side of at most 5 reads (coverage 10). Searching for those
    alone, among all the representatives, costs a fraction of searching for all.
    """
    if len(weights) == 0:
        return np.zeros(0, dtype=bool)
    limit = max(PIECE_MIN_READS, PIECE_FRACTION * float(np.median(weights)))
    return weights <= limit


def distinct_pairs(lo: np.ndarray, hi: np.ndarray, parity: np.ndarray, dist: np.ndarray, *,
                   n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairs found more than once (from both ends, in two partitions) kept once, in key order."""
    pairs = PairCollector(n, int(dist.max()) if len(dist) else 0)
    pairs.add(lo, hi, parity, dist)
    return pairs.distinct()


class PairCollector:
    """Checked pairs gathered task by task, then kept once each (:meth:`distinct`).

    A pair found twice has one distance, so where the key and the distance (at most
    ``max_dist``) fit in 63 bits together, each pair is held as one number from the
    moment it arrives, and sorted in place: 8 bytes per pair, not ~30.
    """

    def __init__(self, n: int, max_dist: int) -> None:
        self.n = n
        self.shift = (max_dist + 1).bit_length()
        self.max_dist = max_dist
        self.packed = (2 * n * n) << self.shift < 2**63
        self.parts: list = []

    def add(self, lo: np.ndarray, hi: np.ndarray, parity: np.ndarray, dist: np.ndarray) -> None:
        """One task's checked pairs (distances at most ``max_dist``)."""
        if len(dist) and int(dist.max()) > self.max_dist:
            raise ValueError(f"distance {int(dist.max())} above the bound {self.max_dist}")
        if self.packed:
            key = (lo.astype(np.int64) * self.n + hi) * 2 + parity
            key <<= self.shift
            key |= dist.astype(np.int64)
            self.parts.append(key)
        else:
            self.parts.append((lo.astype(np.int32), hi.astype(np.int32), parity.astype(np.int8),
                               dist.astype(np.int32)))

    def distinct(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, parity, distance) of each pair once, in key order; the parts are freed."""
        parts, self.parts = self.parts, []
        n = self.n
        if self.packed:
            key = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            del parts
            key.sort()
            keep = np.ones(len(key), dtype=bool)
            keep[1:] = key[1:] != key[:-1]
            key = key[keep]
            d = (key & ((1 << self.shift) - 1)).astype(np.int32)
            key >>= self.shift
        else:
            empty = [np.zeros(0, np.int32)] * 4
            lo, hi, parity, dist = [np.concatenate(c) for c in zip(*parts)] if parts else empty
            key, first = np.unique((lo.astype(np.int64) * n + hi) * 2 + parity, return_index=True)
            d = dist[first].astype(np.int32)
        pair = key // 2
        return ((pair // n).astype(np.int32), (pair % n).astype(np.int32),
                (key % 2).astype(np.int8), d)
