"""Units of work: chunks of clusters (:class:`ChunkTask`) and their results (:class:`ChunkResult`).

Chunks are fixed runs of :data:`CHUNK_CLUSTERS` clusters, each learning its own
error model, so the output does not depend on how many processes run them.
Tasks and results are plain data: they pickle to worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnaembed.consensus.inputs import GroupedReads

#: Clusters per unit of work (and per learnt error model).
CHUNK_CLUSTERS = 2000


@dataclass
class ChunkTask:
    """Consensus work for a run of clusters (pickled to workers)."""

    seqs: list[str]
    #: Cluster of each read, numbered from 0 within the chunk (non-decreasing).
    cluster: np.ndarray
    n_clusters: int
    #: Number of the chunk's first cluster in the whole input (seeds per cluster).
    first_cluster: int
    expected_length: int | None
    quals: list[str] | None
    given_flips: np.ndarray | None
    seed: int
    #: Refinement rounds at most (0: the medoids).
    iterations: int


@dataclass
class ChunkResult:
    """Per cluster of a chunk: the strand, the medoid and the scores."""

    sequences: list[str]
    medoids: list[str]
    sizes: np.ndarray
    confidence: np.ndarray
    agreement: np.ndarray
    mean_distance: np.ndarray
    reversed_reads: np.ndarray
    iterations: np.ndarray


@dataclass(frozen=True)
class ChunkReads:
    """A chunk's reads in the orientation its strands are worked in, grouped by cluster."""

    seqs: list[str]
    #: Base qualities, reversed where the read was reverse-complemented; or None.
    quals: list[str] | None
    #: Cluster of each read (non-decreasing).
    cluster: np.ndarray
    #: Cluster ``c`` holds reads ``bounds[c]`` to ``bounds[c + 1]`` (exclusive).
    bounds: list[int]
    #: Reads per cluster.
    sizes: np.ndarray


def split_into_chunks(
    grouped: GroupedReads, *, expected_length: int | None, seed: int, iterations: int
) -> list[ChunkTask]:
    """The clusters of ``grouped`` in runs of :data:`CHUNK_CLUSTERS`, in cluster order."""
    n_clusters = len(grouped.names)
    sizes = np.bincount(grouped.cluster, minlength=n_clusters)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    tasks = []
    for c0 in range(0, n_clusters, CHUNK_CLUSTERS):
        c1 = min(c0 + CHUNK_CLUSTERS, n_clusters)
        a, b = int(bounds[c0]), int(bounds[c1])
        tasks.append(
            ChunkTask(
                seqs=grouped.seqs[a:b],
                cluster=grouped.cluster[a:b] - c0,
                n_clusters=c1 - c0,
                first_cluster=c0,
                expected_length=expected_length,
                quals=None if grouped.quals is None else grouped.quals[a:b],
                given_flips=None if grouped.flips is None else grouped.flips[a:b],
                seed=seed,
                iterations=iterations,
            )
        )
    return tasks
