"""Reads in, clusters (and strands) out: the chain behind ``dnaembed cluster`` and ``run``.

:func:`cluster_reads` collapses identical reads, embeds the distinct ones (and
their reverse complements when both orientations are clustered), runs one of
the estimators of :mod:`dnaembed.cluster`, and expands the result back to every
input read (its output files: :mod:`dnaembed.io.clusters`). Empty reads are never
clustered: each is a singleton.
:func:`reads_to_strands` adds the consensus step: reads in, stored strands out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from dnaembed.cluster import Clusterer, make_clusterer
from dnaembed.cluster.dedupe import unique_reads
from dnaembed.cluster.result import ClusterResult
from dnaembed.consensus import ConsensusStrand
from dnaembed.encoding import reverse_complement
from dnaembed.errors import DnaembedError
from dnaembed.io.sequences import ReadSet
from dnaembed.log import logger

STRANDS = ("both", "plus")


def cluster_reads(
    reads: Sequence[str],
    model=None,
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
    from dnaembed.model.inference import EmbedStats, embed_sequences

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
    rows = unique.first[nonempty]
    if embeddings is not None:
        fwd_all, rev_all = embeddings
        if len(fwd_all) != n or (both and (rev_all is None or len(rev_all) != n)):
            raise DnaembedError("precomputed embeddings must have one row per read (both "
                                "orientations when strand is 'both')")
        forward = np.asarray(fwd_all)[rows]
        reverse = np.asarray(rev_all)[rows] if both else None
    else:
        if model is None:
            raise DnaembedError("cluster_reads needs a model or precomputed embeddings")
        stats = EmbedStats()
        forward = embed_sequences(model, work_seqs, batch_size=batch_size, precision=precision,
                                  stats=stats)

        def reverse(rows: np.ndarray) -> np.ndarray:
            # On demand: the graph method needs one reverse complement per cluster only.
            rc = [reverse_complement(work_seqs[i]) for i in rows.tolist()]
            return embed_sequences(model, rc, batch_size=batch_size, precision=precision)

        reverse = reverse if both else None
        if stats.truncated:
            window = model.config.window
            logger.warning(
                "%d distinct reads are longer than the model's window of %d: embedded by their "
                "first %d bases (the exact distance check uses whole reads)",
                stats.truncated, window, window,
            )
    timings["embed"] = time.perf_counter() - start

    est.fit(forward, work_seqs, reverse=reverse, sample_weight=unique.counts[nonempty])
    for stage, seconds in est.timings_.items():
        timings[stage] = timings.get(stage, 0.0) + seconds

    # Expand: distinct sequences -> reads; empty reads become singletons after the rest.
    n_unique = len(unique)
    u_labels = np.empty(n_unique, dtype=np.int64)
    u_orient = np.zeros(n_unique, dtype=np.int8)
    u_labels[nonempty] = est.labels_
    u_orient[nonempty] = est.orientation_
    empty = np.setdiff1d(np.arange(n_unique), nonempty)
    u_labels[empty] = est.n_clusters_ + np.arange(len(empty))
    reps = np.concatenate([rows[est.representatives_], unique.first[empty]]).astype(np.int64)
    labels = u_labels[unique.inverse]
    orientation = (u_orient[unique.inverse] ^ unique.flipped).astype(np.int8)
    if not both:
        orientation[:] = 0
    stats_out = dict(est.stats_, reads=n, distinct=len(unique), empty=len(empty))
    logger.debug("%d clusters", len(reps))
    return ClusterResult(
        labels, orientation, reps, strand, est.method, getattr(est, "threshold_", None),
        timings, stats_out,
    )


def reads_to_strands(
    reads: ReadSet,
    model,
    *,
    strand: str = "both",
    params: dict[str, object] | None = None,
    expected_length: int | None = None,
    min_size: int = 1,
    seed: int = 0,
    threads: int = 0,
    batch_size: int | None = None,
    precision: str = "auto",
) -> tuple[ClusterResult, list[ConsensusStrand]]:
    """The whole chain behind ``dnaembed run``: cluster the reads, then one strand per cluster.

    The clustering (graph method, ``params`` as in :func:`cluster_reads`) gives
    each read's orientation; the consensus (:func:`dnaembed.consensus.consensus_strands`)
    takes the reads of a cluster in that orientation, so no orientation is inferred twice.
    The strands come in cluster id order.
    """
    from dnaembed.consensus import consensus_strands

    result = cluster_reads(
        reads.seqs, model, strand=strand, params={**(params or {}), "seed": seed,
                                                   "threads": threads},
        batch_size=batch_size, precision=precision,
    )
    start = time.perf_counter()
    strands = consensus_strands(
        reads, result.labels, expected_length=expected_length, min_size=min_size,
        orientation=result.orientation.astype(bool) if strand == "both" else "forward",
        seed=seed, threads=threads,
    )
    result.timings["consensus"] = time.perf_counter() - start
    strands.sort(key=lambda s: int(s.cluster_id))  # in cluster id order, as clusters.tsv
    return result, strands
