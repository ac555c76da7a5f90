"""The stage's entry point, :func:`consensus_strands`: inputs in, one strand per cluster out.

Rules: reads with an empty sequence are ignored (they carry no vote); a cluster
counts its non-empty reads; clusters below ``min_size`` reads are skipped.
``N`` in a read is no vote for any base. Work is split into chunks of
:data:`~dnaembed.consensus.chunks.CHUNK_CLUSTERS` clusters, each learning its
own error rates (:mod:`.engine` reconstructs one chunk); chunks run in worker
processes (:func:`dnaembed.execute.processes.map_in_processes`) with
``threads`` > 1. Same input and seed, same output, whatever the number of
processes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from dnaembed.consensus.chunks import ChunkResult, ChunkTask, split_into_chunks
from dnaembed.consensus.engine import reconstruct_chunk
from dnaembed.consensus.inputs import group_reads
from dnaembed.consensus.strands import ConsensusStrand
from dnaembed.errors import DnaembedError
from dnaembed.execute import Runner
from dnaembed.execute.processes import map_in_processes
from dnaembed.io.sequences import ReadSet


def consensus_strands(
    reads: ReadSet | Sequence[str],
    labels: Mapping[str, Hashable] | Sequence[Hashable] | np.ndarray,
    *,
    expected_length: int | None = None,
    min_size: int = 1,
    orientation: str | Mapping[str, object] | Sequence[object] | np.ndarray | None = None,
    refine: bool = True,
    max_iterations: int = 10,
    quals: Sequence[str] | None = None,
    seed: int = 0,
    threads: int = 1,
    runner: Runner | None = None,
) -> list[ConsensusStrand]:
    """One consensus strand per cluster of ``reads`` (algorithm: :mod:`dnaembed.consensus.engine`).

    ``labels`` gives each read's cluster: a mapping read id -> cluster id (needs a
    :class:`ReadSet`; reads absent from it are ignored), or a sequence parallel to
    ``reads`` (``None``, and negative integers, mean "in no cluster").
    ``orientation``: ``None``/``"infer"`` to infer it, ``"forward"`` to take the
    reads as they are, or per read (mapping by id, or parallel sequence) ``"+"``/
    ``"-"`` or a bool (True: the read is a reverse complement). ``refine=False``
    returns the medoids (the baseline). Base qualities (``quals``, or the
    ReadSet's) break ties between medoid candidates and weigh substitutions and
    insertions when polishing. ``threads`` > 1 runs chunks of
    ``CHUNK_CLUSTERS`` clusters in that many processes (0: all cores); the result
    is the same whatever the number. ``runner``: an executor of
    :mod:`dnaembed.execute` (a Dask cluster) to run the chunks on instead.

    Strands come in the order of each cluster's first read in ``reads``.
    """
    if expected_length is not None and expected_length < 1:
        raise DnaembedError(f"expected length must be >= 1, got {expected_length}")
    if min_size < 1:
        raise DnaembedError(f"minimum cluster size must be >= 1, got {min_size}")
    if max_iterations < 0:
        raise DnaembedError(f"max iterations must be >= 0, got {max_iterations}")
    grouped = group_reads(reads, labels, orientation=orientation, quals=quals, min_size=min_size)
    if grouped is None:
        return []
    tasks = split_into_chunks(
        grouped,
        expected_length=expected_length,
        seed=seed,
        iterations=max_iterations if refine else 0,
    )
    results = _run_chunks(tasks, threads, runner)
    return [
        strand
        for task, result in zip(tasks, results)
        for strand in _strands(task, result, grouped.names)
    ]


def _run_chunks(tasks: list[ChunkTask], threads: int, runner) -> list[ChunkResult]:
    """The chunks on ``runner`` (an executor) when given, else in ``threads`` processes."""
    if runner is not None:
        return list(runner.map(reconstruct_chunk, tasks, desc="consensus", unit="chunk"))
    return map_in_processes(reconstruct_chunk, tasks, processes=threads,
                            weights=[t.n_clusters for t in tasks], desc="consensus",
                            unit="cluster")


def _strands(task: ChunkTask, result: ChunkResult, names: list[str]) -> list[ConsensusStrand]:
    """The strands of one chunk, named by cluster."""
    return [
        ConsensusStrand(
            cluster_id=names[task.first_cluster + k],
            sequence=result.sequences[k],
            size=int(result.sizes[k]),
            confidence=float(result.confidence[k]),
            agreement=float(result.agreement[k]),
            mean_distance=float(result.mean_distance[k]),
            reversed_reads=int(result.reversed_reads[k]),
            iterations=int(result.iterations[k]),
            medoid=result.medoids[k],
        )
        for k in range(task.n_clusters)
    ]
