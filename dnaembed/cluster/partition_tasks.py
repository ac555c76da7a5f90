"""The independent tasks of partitioned clustering: plain data in, plain data out.

Five kinds, each a module-level function of one dataclass (so that any
executor can pickle it to another process or machine and run it again after
a failure):

* :func:`embed_chunk`: a chunk of reads -> their vectors in the search space
  (float16) and their cells; or, for the partition sample, full vectors;
* :func:`sample_neighbours`: one partition's reads of the threshold sample ->
  their neighbours among all its members (vectors only: their distances are
  computed where the threshold is chosen);
* :func:`search_partition`: one partition -> the exact-checked candidate pairs
  of its home reads (neighbours searched exactly among all its members);
* :func:`query_partition`: one partition and reads from elsewhere (cluster
  representatives as read and reverse-complemented) -> their checked pairs;
* :func:`list_partition`: one partition's vectors and reads from elsewhere (the
  rescue's) -> their nearest members, unchecked.

Every task runs on one thread: faiss's distances depend on how the work is
split between threads, and each task must give the same bytes wherever it
runs. Parallelism is tasks side by side, on threads, processes or machines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.cluster.candidates import (
    CandidatePairs,
    candidate_pairs,
    distances_within_cuts,
)
from dnaembed.cluster.partition import Partitioner
from dnaembed.cluster.search import Neighbours, faiss_module
from dnaembed.cluster.threshold import Threshold
from dnaembed.encoding import reverse_complement
from dnaembed.io.bases import ReadBlock

if TYPE_CHECKING:
    from dnaembed.model.encoder import Encoder

#: Queries of a partition checked at a time (bounds a task's candidate pairs and strings).
QUERY_CHECK_BLOCK = 2_048


@dataclass
class EmbedTask:
    """Reads to embed; ``reverse``: embed their reverse complements.

    ``partitioner`` None: full vectors (float32), no cells (the partition sample).
    ``cells`` False: vectors in the search space only (the reverse complements of the
    rounds, which are assigned to each round's own cells): assigning a read costs the
    number of cells, which grows with the input (at 3 x 10^6 reads, 733 cells, the
    460,000 reverse complements took 8.5 s of CPU to embed without, 13.0 s with).
    """

    seqs: ReadBlock
    reverse: bool = False
    partitioner: Partitioner | None = None
    precision: str = "auto"
    batch_size: int | None = None
    cells: bool = True


@dataclass
class EmbedResult:
    """What :func:`embed_chunk` returns for a chunk of reads."""

    vectors: np.ndarray  # float16 (n, search dim), or float32 (n, model dim) for the sample
    cells: np.ndarray | None  # int32 (n, max cells), nearest first, -1 pad; None: not asked
    truncated: int  # reads longer than the model's window
    cpu_seconds: float = 0.0  # the task's own CPU time (for the per-read cost of each stage)


def embed_chunk(model: Encoder, task: EmbedTask) -> EmbedResult:
    """Embed one chunk (one thread; the model is the executor's shared object)."""
    from dnaembed.log import set_threads
    from dnaembed.model.inference import EmbedStats, embed_sequences

    started = time.thread_time()
    set_threads(1)
    seqs = task.seqs.strings()
    if task.reverse:
        seqs = [reverse_complement(s) for s in seqs]
    stats = EmbedStats()
    vectors = embed_sequences(model, seqs, batch_size=task.batch_size, precision=task.precision,
                              stats=stats)
    if task.partitioner is None:
        return EmbedResult(vectors, None, stats.truncated, time.thread_time() - started)
    projected = task.partitioner.project(vectors)
    cells = task.partitioner.assign(projected) if task.cells else None
    return EmbedResult(projected.astype(np.float16), cells, stats.truncated,
                       time.thread_time() - started)


@dataclass
class SampleTask:
    """One partition's members (unit ids, increasing) and their vectors; ``queries``: the
    rows of its home members in the threshold sample; ``neighbours``: candidates per read."""

    members: np.ndarray
    vectors: np.ndarray
    queries: np.ndarray
    neighbours: int


@dataclass
class PartitionTask:
    """One partition: its members (unit ids, increasing), their vectors and reads (``seqs``).

    ``home``: members whose nearest cell this is (their neighbours are searched
    here); ``cut``: pairs over its (length-scaled) cut are dropped;
    ``neighbours``: candidates per read.
    """

    members: np.ndarray
    vectors: np.ndarray
    seqs: ReadBlock
    home: np.ndarray
    cut: Threshold
    neighbours: int


@dataclass
class PartitionEdges:
    """Checked pairs (unit ids, ``lo < hi``) with their distances."""

    lo: np.ndarray
    hi: np.ndarray
    dist: np.ndarray
    candidates: int
    cpu_seconds: float = 0.0


def _index(vectors: np.ndarray):
    faiss = faiss_module()
    faiss.omp_set_num_threads(1)  # per calling thread: see the module notes
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexFlatL2(x.shape[1])
    index.add(x)
    return index


def _search(index, queries: np.ndarray, k: int) -> Neighbours:
    n = len(queries)
    k_eff = min(k, index.ntotal)
    dist = np.full((n, k), np.inf, dtype=np.float32)
    idx = np.full((n, k), -1, dtype=np.int64)
    if n and k_eff == k:  # faiss writes into the results: no second copy of them
        index.search(np.ascontiguousarray(queries, dtype=np.float32), k, D=dist, I=idx)
    elif n and k_eff:
        d, i = index.search(np.ascontiguousarray(queries, dtype=np.float32), k_eff)
        dist[:, :k_eff], idx[:, :k_eff] = d, i
    dist[idx < 0] = np.inf
    return Neighbours(dist, idx)


def _without_self(found: Neighbours, rows: np.ndarray, k: int) -> Neighbours:
    """Drop each query's own row (else its farthest candidate), as ``self_neighbours`` does."""
    n = len(rows)
    is_self = found.indices == rows[:, None]
    drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), k)
    keep = np.ones_like(is_self)
    keep[np.arange(n), drop] = False
    return Neighbours(found.distances[keep].reshape(n, k), found.indices[keep].reshape(n, k))


def _nearest_members(vectors: np.ndarray, rows: np.ndarray, neighbours: int) -> Neighbours:
    """The ``neighbours`` nearest other members (rows) of the members ``rows``, exactly."""
    k = min(neighbours, max(len(vectors) - 1, 1))
    return _without_self(_search(_index(vectors), vectors[rows], k + 1), rows, k)


def _checked(seqs, rc, pairs: CandidatePairs, lengths: np.ndarray, cut: Threshold
             ) -> tuple[CandidatePairs, np.ndarray]:
    """The pairs within the cut and their distances (as :meth:`GraphClusterer._check`)."""
    cuts = cut.cuts(np.maximum(lengths[pairs.lo], lengths[pairs.hi]))
    possible = (np.abs(lengths[pairs.lo] - lengths[pairs.hi]) <= cuts) & (
        np.minimum(lengths[pairs.lo], lengths[pairs.hi]) > 0)
    pairs, cuts = pairs.subset(possible), cuts[possible]
    dist = distances_within_cuts(seqs, rc, pairs, cuts, workers=1)
    close = dist <= cuts
    return pairs.subset(close), dist[close]


@dataclass
class SampleNeighbours:
    """The sample's reads of a partition (unit ids) and their nearest other members (unit
    ids, -1 for none)."""

    reads: np.ndarray
    neighbours: Neighbours
    cpu_seconds: float = 0.0


def sample_neighbours(task: SampleTask) -> SampleNeighbours:
    """The sample reads' nearest other members: the same search as :func:`search_partition`
    makes for them, so that a sample read's candidate pairs are those round 1 checks."""
    started = time.thread_time()
    found = _nearest_members(task.vectors, task.queries, task.neighbours)
    ids = task.members.astype(np.int64)  # unit ids: pairs of them are keyed in int64
    found.indices = np.where(found.indices >= 0, ids[np.maximum(found.indices, 0)], -1)
    return SampleNeighbours(ids[task.queries], found, time.thread_time() - started)


def search_partition(task: PartitionTask) -> PartitionEdges:
    """Candidates of the home reads among all members, checked exactly (see the module notes)."""
    started = time.thread_time()
    seqs = task.seqs.strings()
    lengths = task.seqs.lengths.astype(np.int64)
    home = np.flatnonzero(task.home)
    pairs = candidate_pairs(_nearest_members(task.vectors, home, task.neighbours), rows=home)
    edges, dist = _checked(seqs, None, pairs, lengths, task.cut)
    ids = task.members
    return PartitionEdges(ids[edges.lo], ids[edges.hi], dist.astype(np.int32), len(pairs),
                          time.thread_time() - started)


@dataclass
class QueryTask:
    """Reads from elsewhere searched among one partition's members.

    ``members``: unit ids, with their vectors and reads (``seqs``); ``queries``: unit
    ids; ``query_vectors``: the vectors searched, oriented (a reverse-complement
    query's are the reverse complement's); ``query_seqs``: the queries' reads as
    read; ``reverse``: the query is a reverse complement (searched and checked
    as such; its pairs have parity 1; it keeps itself among its candidates, as a
    forward query does not).
    """

    members: np.ndarray
    vectors: np.ndarray
    seqs: ReadBlock
    queries: np.ndarray
    query_vectors: np.ndarray
    query_seqs: ReadBlock
    reverse: np.ndarray
    cut: Threshold
    neighbours: int


@dataclass
class QueryResult:
    """What :func:`query_partition` returns: the pairs it checked exactly, and how many
    candidates it had."""

    lo: np.ndarray  # checked pairs (unit ids, lo < hi) and their parity and distance
    hi: np.ndarray
    parity: np.ndarray
    dist: np.ndarray
    candidates: int
    cpu_seconds: float = 0.0


def query_partition(task: QueryTask) -> QueryResult:
    """Each query's nearest members, checked exactly (see :class:`QueryTask`).

    One search for all the queries (its distances depend on how faiss splits the
    work, so it is not split here), then the candidates checked for
    :data:`QUERY_CHECK_BLOCK` queries at a time: each query's pairs are its own, and
    the temporaries of a block are a fraction of the whole task's.
    """
    started = time.thread_time()
    found = _search(_index(task.vectors), task.query_vectors, task.neighbours + 1)
    query_seqs = task.query_seqs.strings()
    for i in np.flatnonzero(task.reverse).tolist():
        query_seqs[i] = reverse_complement(query_seqs[i])
    member_seqs = task.seqs.strings()
    parts = [_query_block(task, found, slice(start, start + QUERY_CHECK_BLOCK), query_seqs,
                          member_seqs)
             for start in range(0, len(task.queries), QUERY_CHECK_BLOCK)]
    if not parts:
        parts = [_query_block(task, found, slice(0, 0), query_seqs, member_seqs)]
    lo, hi, parity, d = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return QueryResult(lo, hi, parity, d, sum(p[4] for p in parts),
                       time.thread_time() - started)


def _query_block(task: QueryTask, found: Neighbours, rows: slice, query_seqs: list[str],
                 member_seqs: list[str]):
    """The queries ``rows`` of a task: their checked pairs."""
    indices = found.indices[rows]
    unit = np.where(indices >= 0, task.members[np.maximum(indices, 0)], -1)
    unit, dist = _without_own(unit, found.distances[rows], task.queries[rows],
                              task.reverse[rows])
    return _check_queries(task, rows, unit, dist, query_seqs, member_seqs)


def _without_own(unit: np.ndarray, dist: np.ndarray, queries: np.ndarray,
                 reverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of each query's k + 1 nearest members (unit ids), k: a forward query that is itself
    a member loses itself (else its farthest candidate, as self_neighbours does); a
    reverse-complement query keeps its k nearest."""
    k = unit.shape[1] - 1
    own = unit == queries[:, None]
    drop = np.where(own.any(axis=1) & ~reverse, own.argmax(axis=1), k)
    keep = np.ones_like(own)
    keep[np.arange(len(unit)), drop] = False
    return unit[keep].reshape(-1, k), dist[keep].reshape(-1, k)


def _check_queries(task: QueryTask, rows: slice, unit: np.ndarray, dist: np.ndarray,
                   query_seqs: list[str], member_seqs: list[str]):
    """Exact distances of the checked queries ``rows`` to their candidates, within the cut."""
    queries, reverse = task.queries[rows], task.reverse[rows]
    q = len(queries)
    # Local numbering: queries 0..q-1, then the members. Each query's sequence is already
    # oriented, so a pair compares it (``rc_seqs[lo]`` or ``seqs[lo]``: the same list)
    # with the member as read (``seqs[hi]``).
    member_pos = np.searchsorted(task.members, np.maximum(unit, 0))
    local = Neighbours(dist, np.where(unit >= 0, q + member_pos, -1))
    parts = []
    for parity in (0, 1):
        at = np.flatnonzero(reverse == bool(parity))
        nb = Neighbours(local.distances[at], local.indices[at])
        parts.append(candidate_pairs(nb if parity == 0 else None, nb if parity else None,
                                     rows=at))
    pairs = CandidatePairs(*(np.concatenate([getattr(p, f) for p in parts])
                             for f in ("lo", "hi", "parity", "embedded")))
    seqs = query_seqs[rows] + member_seqs
    lengths = np.concatenate([task.query_seqs.lengths[rows], task.seqs.lengths]).astype(np.int64)
    edges, d = _checked(seqs, seqs, pairs, lengths, task.cut)
    query_unit = queries[edges.lo]
    member_unit = task.members[edges.hi - q]
    keep = query_unit != member_unit
    lo = np.minimum(query_unit, member_unit)[keep]
    hi = np.maximum(query_unit, member_unit)[keep]
    return lo, hi, edges.parity[keep], d[keep].astype(np.int32), len(pairs)


@dataclass
class ListTask:
    """Reads from elsewhere whose nearest members of one partition are listed, unchecked.

    ``members``: unit ids; ``vectors``: theirs; ``queries``: the reads' unit ids,
    ``reverse``: reverse-complemented or not, ``query_vectors``: theirs, so oriented;
    ``neighbours``: how many to list (a forward query is not listed as its own neighbour).
    """

    members: np.ndarray
    vectors: np.ndarray
    queries: np.ndarray
    reverse: np.ndarray
    query_vectors: np.ndarray
    neighbours: int


@dataclass
class ListResult:
    """What :func:`list_partition` returns: each query's nearest members."""

    indices: np.ndarray  # (queries, neighbours) unit ids, -1 for none
    distances: np.ndarray  # float32, +inf for none
    cpu_seconds: float = 0.0


def list_partition(task: ListTask) -> ListResult:
    """Each query's ``neighbours`` nearest members (unit ids), exactly."""
    started = time.thread_time()
    found = _search(_index(task.vectors), task.query_vectors, task.neighbours + 1)
    unit = np.where(found.indices >= 0, task.members[np.maximum(found.indices, 0)], -1)
    unit, dist = _without_own(unit, found.distances, task.queries, task.reverse)
    return ListResult(unit, dist, time.thread_time() - started)
