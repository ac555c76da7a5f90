"""Cluster tables out: every read's cluster (TSV), one representative read per cluster (FASTA).

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

    def sizes(self) -> np.ndarray: ...


def write_clusters(
    path: str | os.PathLike,
    ids: Sequence[str],
    result: ClusterLabels,
    *,
    header: str | None = None,
    orientation: bool = False,
) -> None:
    """``read_id<TAB>cluster_id`` for every read, in input order (optionally orientation)."""
    columns = ["read_id", "cluster_id"] + (["orientation"] if orientation else [])
    labels = result.labels.tolist()
    if orientation:
        signs = ["-" if o else "+" for o in result.orientation.tolist()]
        rows = zip(ids, labels, signs)
    else:
        rows = zip(ids, labels)
    write_tsv(path, columns, rows, header=header)


def write_centers(
    path: str | os.PathLike, ids: Sequence[str], seqs: Sequence[str], result: ClusterLabels
) -> None:
    """One representative read per cluster (FASTA): name = cluster id, then read id and size."""
    sizes = result.sizes().tolist()
    reps = result.representatives.tolist()
    names = [f"{c} read={ids[r]} size={sizes[c]}" for c, r in enumerate(reps)]
    write_sequences(path, names, [seqs[r] for r in reps])
