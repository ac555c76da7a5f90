"""Cluster tables out: every read's cluster (TSV, or another tool's format), and one
representative read per cluster (FASTA).

The writers take any result with the attributes of
:class:`dnaembed.cluster.result.ClusterResult` (labels, orientation,
representatives, sizes), so that this module depends on no stage.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from dnaembed.io.sequences import write_sequences
from dnaembed.io.tables import write_tsv


class ClusterLabels(Protocol):
    """What the writers read of a clustering result."""

    labels: np.ndarray
    orientation: np.ndarray
    representatives: np.ndarray

    def sizes(self) -> np.ndarray:
        """Reads per cluster."""
        ...


def write_clusters(
    path: str | os.PathLike,
    ids: Sequence[str],
    result: ClusterLabels,
    *,
    header: str | None = None,
    orientation: bool = False,
    fmt: str = "tsv",
    seqs: Sequence[str] | None = None,
) -> None:
    """Every read's cluster: ``read_id<TAB>cluster_id`` in input order (optionally orientation).

    ``fmt``: ``tsv`` (that table, after ``header``), or ``uc``, ``clstr``,
    ``mmseqs`` (:mod:`dnaembed.io.formats`; they need the reads' ``seqs``).
    """
    if fmt != "tsv":
        from dnaembed.io.formats import write_cluster_format

        if seqs is None:
            raise ValueError(f"the {fmt} format needs the reads' sequences")
        write_cluster_format(path, fmt, ids, seqs, result)
        return
    columns = ["read_id", "cluster_id"] + (["orientation"] if orientation else [])
    labels = result.labels.tolist()
    if orientation:
        signs = ["-" if o else "+" for o in result.orientation.tolist()]
        rows = zip(ids, labels, signs)
    else:
        rows = zip(ids, labels)
    write_tsv(path, columns, rows, header=header)


def center_names(ids: Sequence[str], result: ClusterLabels, *, size_labels: bool = False
                 ) -> list[str]:
    """The FASTA name of each cluster's representative.

    ``CLUSTER read=READ size=N`` by default; with ``size_labels`` usearch-style
    ``READ;size=N;cluster=CLUSTER;`` (what ``vsearch --sizein`` reads, as vsearch's own
    ``--centroids --sizeout`` labels the centroid by its read).
    """
    sizes = result.sizes().tolist()
    reps = result.representatives.tolist()
    if size_labels:
        return [f"{ids[r]};size={sizes[c]};cluster={c};" for c, r in enumerate(reps)]
    return [f"{c} read={ids[r]} size={sizes[c]}" for c, r in enumerate(reps)]


def write_centers(
    path: str | os.PathLike, ids: Sequence[str], seqs: Sequence[str], result: ClusterLabels,
    *, size_labels: bool = False,
) -> None:
    """One representative read per cluster (FASTA), named by :func:`center_names`."""
    names = center_names(ids, result, size_labels=size_labels)
    write_sequences(path, names, [seqs[r] for r in result.representatives.tolist()])
