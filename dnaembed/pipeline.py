"""Reads in, clusters (and strands) out: the chains behind ``dnaembed cluster`` and ``run``.

:func:`clustered_files` is the graph method from files, partitioned
(:mod:`dnaembed.cluster.partitioned`): it streams one or several input files
into a read store (spilled to disk when the memory budget says so), collapses
identical reads by hashing, and clusters the distinct ones in tasks that an
executor runs (in this process, or on Dask: :mod:`dnaembed.execute`).
:func:`cluster_reads` is the in-memory form for any method: reads in a list,
one of the estimators of :mod:`dnaembed.cluster`. Both expand the result back
to every input read (its output files: :mod:`dnaembed.io.clusters`). Empty
reads are never clustered: each is a singleton.
:func:`strands_from_files` adds the consensus step: reads in, stored strands out.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from dnaembed.cluster import Clusterer, make_clusterer
from dnaembed.cluster.dedupe import UniqueReads, unique_reads
from dnaembed.cluster.result import ClusterResult
from dnaembed.consensus import ConsensusStrand
from dnaembed.encoding import reverse_complement
from dnaembed.errors import DnaembedError
from dnaembed.io.readstore import ReadStore
from dnaembed.log import logger

if TYPE_CHECKING:
    from dnaembed.execute import Runner
    from dnaembed.model.encoder import Encoder

STRANDS = ("both", "plus")


def cluster_reads(
    reads: Sequence[str],
    model: Encoder | None = None,
    *,
    method: str = "graph",
    strand: str = "both",
    params: dict[str, object] | None = None,
    clusterer: Clusterer | None = None,
    embeddings: tuple[np.ndarray, np.ndarray | None] | None = None,
    batch_size: int | None = None,
    precision: str = "auto",
) -> ClusterResult:
    """Cluster validated reads (upper-case ACGTN) with an encoder ``model``.

    ``method`` and ``params`` choose the estimator (see :func:`make_clusterer`),
    or pass a ready ``clusterer``. ``strand``: 'both' clusters a read with its
    strand whichever way it was sequenced; 'plus' takes reads as oriented.
    ``embeddings``: precomputed (forward, reverse-or-None) vectors of every
    read, instead of ``model``. ``precision``: inference arithmetic, see
    :func:`dnaembed.model.inference.embed_sequences` ('auto': bfloat16 where the hardware
    has it).
    """
    if strand not in STRANDS:
        raise DnaembedError(f"unknown strand mode {strand!r} (use both or plus)")
    both = strand == "both"
    est = clusterer if clusterer is not None else make_clusterer(method, **(params or {}))
    timings: dict[str, float] = {}
    n = len(reads)

    start = time.perf_counter()
    unique = unique_reads(reads, both)
    seqs = [reads[i] for i in unique.first.tolist()]
    nonempty = np.flatnonzero([len(s) > 0 for s in seqs])
    work_seqs = [seqs[i] for i in nonempty.tolist()]
    timings["dedupe"] = time.perf_counter() - start
    logger.info(
        "%d reads, %d distinct%s", n, len(unique), " (either orientation)" if both else ""
    )

    start = time.perf_counter()
    forward, reverse = _embeddings(model, work_seqs, unique.first[nonempty], n, both,
                                   embeddings, batch_size, precision)
    timings["embed"] = time.perf_counter() - start

    est.fit(forward, work_seqs, reverse=reverse, sample_weight=unique.counts[nonempty])
    for stage, seconds in est.timings_.items():
        timings[stage] = timings.get(stage, 0.0) + seconds

    result = _expand(unique, nonempty, est.labels_, est.orientation_, est.representatives_,
                     strand, est.method, getattr(est, "threshold_", None), timings)
    result.stats = dict(est.stats_, **result.stats)
    return result


def _embeddings(model, work_seqs: list[str], rows: np.ndarray, n: int, both: bool,
                embeddings, batch_size: int | None, precision: str):
    """The forward vectors of the distinct reads, and their reverse (an array, a function
    embedding rows on demand, or None with ``strand='plus'``)."""
    from dnaembed.model.inference import EmbedStats, embed_sequences

    if embeddings is not None:
        fwd_all, rev_all = embeddings
        if len(fwd_all) != n or (both and (rev_all is None or len(rev_all) != n)):
            raise DnaembedError("precomputed embeddings must have one row per read (both "
                                "orientations when strand is 'both')")
        return np.asarray(fwd_all)[rows], (np.asarray(rev_all)[rows] if both else None)
    if model is None:
        raise DnaembedError("cluster_reads needs a model or precomputed embeddings")
    stats = EmbedStats()
    forward = embed_sequences(model, work_seqs, batch_size=batch_size, precision=precision,
                              stats=stats)

    def reverse(rows: np.ndarray) -> np.ndarray:
        # On demand: the graph method needs one reverse complement per cluster only.
        rc = [reverse_complement(work_seqs[i]) for i in rows.tolist()]
        return embed_sequences(model, rc, batch_size=batch_size, precision=precision)

    if stats.truncated:
        window = model.config.window
        logger.warning(
            "%d distinct reads are longer than the model's window of %d: embedded by their "
            "first %d bases (the exact distance check uses whole reads)",
            stats.truncated, window, window,
        )
    return forward, (reverse if both else None)


def _expand(unique: UniqueReads, nonempty: np.ndarray, labels: np.ndarray,
            orientation: np.ndarray, representatives: np.ndarray, strand: str, method: str,
            threshold, timings: dict[str, float]) -> ClusterResult:
    """Distinct sequences -> every read; empty reads become singletons after the rest."""
    n_unique = len(unique)
    u_labels = np.empty(n_unique, dtype=np.int64)
    u_orient = np.zeros(n_unique, dtype=np.int8)
    u_labels[nonempty] = labels
    u_orient[nonempty] = orientation
    is_empty = np.ones(n_unique, dtype=bool)
    is_empty[nonempty] = False
    empty = np.flatnonzero(is_empty)  # a mask, not setdiff1d: no sort of every read
    u_labels[empty] = len(representatives) + np.arange(len(empty))
    rows = unique.first[nonempty]
    reps = np.concatenate([rows[representatives], unique.first[empty]]).astype(np.int64)
    labels = u_labels[unique.inverse]
    orientation = (u_orient[unique.inverse] ^ unique.flipped).astype(np.int8)
    if strand != "both":
        orientation[:] = 0
    stats = {"reads": len(unique.inverse), "distinct": n_unique, "empty": len(empty)}
    logger.debug("%d clusters", len(reps))
    return ClusterResult(labels, orientation, reps, strand, method, threshold, timings, stats)


@contextlib.contextmanager
def clustered_files(
    paths: Sequence[str | os.PathLike],
    model: Encoder,
    runner: Runner,
    *,
    strand: str = "both",
    params: dict[str, object] | None = None,
    memory: int | None = None,
    tmpdir: str | os.PathLike | None = None,
    seed: int = 0,
    precision: str = "auto",
    batch_size: int | None = None,
    keep_quals: bool = False,
    threads: int = 0,
) -> Iterator[tuple[ClusterResult, ReadStore]]:
    """Cluster the reads of ``paths`` (one run) with the partitioned graph method.

    ``runner``: an executor of :mod:`dnaembed.execute` (where the tasks run);
    ``params``: the graph method's (``max_dist``, ``neighbours``, ``guard``,
    ``guard_factor``, ``rescue``, ``rescue_max_size``) and the partitioning's
    (:class:`dnaembed.cluster.partitioned.PartitionPlan` fields); ``memory``:
    bytes per process, the budget the work is split to fit (None: no limit);
    ``tmpdir``: where data that does not fit goes (removed at the end, also on
    failure); ``threads``: this process's own, for the steps it runs while the tasks
    wait (0: every available core). Yields the result and the read store (ids and
    sequences for the output files), valid until the block ends.
    """
    from dnaembed.cluster.budget import plan_work
    from dnaembed.cluster.partitioned import cluster_units
    from dnaembed.io.spill_dir import SpillDir

    if strand not in STRANDS:
        raise DnaembedError(f"unknown strand mode {strand!r} (use both or plus)")
    both = strand == "both"
    params = dict(params or {})
    timings: dict[str, float] = {}
    cpu_start = time.process_time()
    with SpillDir(tmpdir) as spill:
        store, unique, nonempty, units = _read_units(
            paths, spill, plan_work(memory, runner, params=params).reads_in_memory, both,
            keep_quals, timings)
        try:
            work = plan_work(memory, runner, units=len(units), model=model, params=params)
            logger.info("%s", work.describe())
            _spill_reads(store, work.reads_in_memory)
            graph = {k: params[k] for k in ("max_dist", "neighbours", "guard", "guard_factor",
                                            "rescue", "rescue_max_size", "split") if k in params}
            found = cluster_units(units, model, runner, plan=work.plan, spill=spill, both=both,
                                  seed=seed, precision=precision, batch_size=batch_size,
                                  threads=threads, **graph)
            found.stats["cpu_client"] = time.process_time() - cpu_start
            _log_found(found, model.config.window, runner)
            timings.update(found.timings)
            result = _expand(unique, nonempty, found.labels, found.orientation,
                             found.representatives, strand, "graph", found.threshold, timings)
            result.stats = dict(found.stats, **result.stats)
            yield result, store
        finally:
            store.close()


def _log_found(found, window: int, runner) -> None:
    """What the partitioned run did that the summary line does not say."""
    if found.stats.get("truncated"):
        logger.warning(
            "%d distinct reads are longer than the model's window of %d: embedded by "
            "their first %d bases (the exact distance check uses whole reads)",
            found.stats["truncated"], window, window)
    cpu = {k: found.stats.get(f"cpu_{k}", 0.0) for k in ("embed", "search", "rounds")}
    logger.info("task CPU time: %s; this process: %.1fs (with the tasks it ran itself)",
                ", ".join(f"{k} {v:.1f}s" for k, v in cpu.items()),
                found.stats.get("cpu_client", 0.0))
    traffic = getattr(runner, "traffic", None)
    if traffic is not None and traffic.cpu:
        logger.info("task CPU time by kind: %s", traffic.describe_cpu())
    own = found.stats.get("client_cpu", {})
    if own:
        logger.info("this thread's CPU time by stage (the tasks aside): %s",
                    ", ".join(f"{k} {v:.1f}s" for k, v in own.items()))


def _spill_reads(store, limit: int | None) -> None:
    """Reads kept in memory while streaming (when their number was not known) beyond what
    the plan leaves them, to the tmpdir now."""
    if limit is None:
        return
    spilled = store.spill_beyond(limit)
    if spilled:
        logger.info("%s spilled to the tmpdir (the plan leaves the reads %s MB in memory)",
                    " and ".join(spilled), f"{limit / (1 << 20):,.0f}")


def _read_units(paths, spill, spill_after: int | None, both: bool, keep_quals: bool,
                timings: dict[str, float]):
    """Stream the files into a store; the distinct non-empty reads (units) of it.

    Under a memory budget (``spill_after`` given) the sequences are kept at two bits per
    base, so that more of them stay in memory."""
    from dnaembed.cluster.dedupe_hashes import sequence_hashes, unique_by_hashes
    from dnaembed.cluster.units import Units, UnitSequences
    from dnaembed.io.readstore import stream_reads

    start = time.perf_counter()
    hashes: list[tuple[np.ndarray, np.ndarray | None]] = []
    store = stream_reads(paths, spill=spill, keep_quals=keep_quals, spill_after=spill_after,
                         two_bit=spill_after is not None,
                         on_block=lambda seqs: hashes.append(sequence_hashes(seqs, both)))
    timings["read"] = time.perf_counter() - start
    start = time.perf_counter()
    empty = np.zeros(0, np.int64)
    forward = np.concatenate([h[0] for h in hashes]) if hashes else empty
    reverse = (np.concatenate([h[1] for h in hashes]) if hashes else empty) if both else None
    hashes.clear()
    unique = unique_by_hashes(forward, reverse, store.lengths, store.seqs.take)
    nonempty = np.flatnonzero(store.lengths[unique.first] > 0)
    rows = unique.first[nonempty]
    units = Units(UnitSequences(store.seqs, rows), store.lengths[rows].astype(np.int64),
                  unique.counts[nonempty])
    timings["dedupe"] = time.perf_counter() - start
    logger.info("%d reads in %d file%s, %d distinct%s%s", len(store), len(paths),
                "s" if len(paths) != 1 else "", len(unique),
                " (either orientation)" if both else "",
                "; reads spilled to the tmpdir" if store.seqs.spilled else "")
    return store, unique, nonempty, units


@contextlib.contextmanager
def strands_from_files(
    paths: Sequence[str | os.PathLike],
    model: Encoder,
    runner: Runner,
    *,
    strand: str = "both",
    params: dict[str, object] | None = None,
    expected_length: int | None = None,
    min_size: int = 1,
    memory: int | None = None,
    tmpdir: str | os.PathLike | None = None,
    seed: int = 0,
    threads: int = 0,
    precision: str = "auto",
    batch_size: int | None = None,
) -> Iterator[tuple[ClusterResult, list[ConsensusStrand], ReadStore]]:
    """The chain behind ``dnaembed run``: :func:`clustered_files`, then one strand per cluster.

    The clustering gives each read's orientation; the consensus
    (:func:`dnaembed.consensus.consensus_strands`) takes the reads of a cluster
    in that orientation, with their qualities, so no orientation is inferred twice.
    Its chunks of clusters run on the same executor when that is Dask, else in
    ``threads`` local processes. The strands come in cluster id order.
    """
    from dnaembed.consensus import consensus_strands

    with clustered_files(paths, model, runner, strand=strand, params=params, memory=memory,
                         tmpdir=tmpdir, seed=seed, precision=precision, batch_size=batch_size,
                         keep_quals=True, threads=threads) as (result, store):
        start = time.perf_counter()
        strands = consensus_strands(
            store.read_set(), result.labels, expected_length=expected_length, min_size=min_size,
            orientation=result.orientation.astype(bool) if strand == "both" else "forward",
            seed=seed, threads=threads,
            # On Dask, on the same workers; here, in local processes (the consensus is
            # Python that threads would not run side by side).
            runner=runner if getattr(runner, "kind", "inline") == "dask" else None,
        )
        result.timings["consensus"] = time.perf_counter() - start
        strands.sort(key=lambda s: int(s.cluster_id))  # in cluster id order, as clusters.tsv
        yield result, strands, store
