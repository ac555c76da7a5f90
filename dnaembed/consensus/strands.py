"""The reconstructed strand (:class:`ConsensusStrand`), its length window, and its writers."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dnaembed.errors import DnaembedError, InputError


@dataclass
class ConsensusStrand:
    """One reconstructed strand and how much to trust it (see :mod:`dnaembed.consensus.engine`)."""

    cluster_id: str
    sequence: str
    #: Non-empty reads of the cluster that voted.
    size: int
    #: Fraction of positions that no single read could overturn (0 for one read).
    confidence: float
    #: Mean fraction of the reads covering a position that agree with its base.
    agreement: float
    #: Mean edit distance of the reads to the consensus (over the part each covers).
    mean_distance: float
    #: Reads that were reverse-complemented to bring them to the strand's orientation.
    reversed_reads: int
    #: Refinement rounds run (0: the medoid was kept as it was).
    iterations: int
    #: The starting estimate (the medoid read, in the strand's orientation).
    medoid: str

    def description(self) -> str:
        """The FASTA description: ``size=... confidence=... agreement=... distance=...``."""
        return (
            f"size={self.size} confidence={self.confidence:.3f} "
            f"agreement={self.agreement:.3f} distance={self.mean_distance:.2f}"
        )


def length_tolerance(length: int) -> int:
    """Reads shorter than the estimate by more than this are aligned as infixes.

    Also the window around the target length in which medoid candidates are
    taken. 3% of the length (at least 3): wide enough for the net indel drift of
    a full read at ~12% errors, narrow enough to tell a truncated read.
    """
    return max(3, math.ceil(0.03 * length))


def fasta_name_problem(cluster_id: str) -> str | None:
    """Why ``cluster_id`` cannot name a strand's FASTA record, or None: a name ends at the
    first whitespace, and FASTA names are ASCII (as read ids are)."""
    if any(c.isspace() for c in cluster_id):
        return "holds whitespace (a FASTA name ends at the first space)"
    if not cluster_id.isascii():
        return "is not ASCII (FASTA names are)"
    return None


def check_cluster_ids(labels: Mapping[str, str], name: str) -> None:
    """Refuse a cluster id that cannot be a strand's FASTA name (:func:`fasta_name_problem`).

    A strand is named by its cluster id: a table from another tool with ids like
    ``Cluster 13`` gave every strand the name ``Cluster`` (strands.tsv, which holds the
    whole id, no longer matched), and an id outside ASCII failed in the FASTA writer as
    an internal error. ``name``: how the table is named in the message.
    """
    for rid, cluster in labels.items():
        problem = fasta_name_problem(cluster)
        if problem:
            raise InputError(f"{name}: read {rid}: cluster id {cluster!r} {problem}, but it "
                             "names the cluster's strand in the FASTA output")


def write_strands(
    path: str | os.PathLike, strands: Sequence[ConsensusStrand], *, medoid_only: bool = False
) -> None:
    """FASTA of the strands (atomic): name = cluster id, description = size and confidence.

    ``medoid_only``: write each cluster's medoid (the baseline) instead. A cluster id
    with whitespace is an error (see :func:`check_cluster_ids`).
    """
    from dnaembed.io.sequences import write_sequences

    for strand in strands:
        problem = fasta_name_problem(str(strand.cluster_id))
        if problem:
            raise DnaembedError(f"cluster id {strand.cluster_id!r} {problem}: it cannot "
                                "name a strand")
    names = [f"{s.cluster_id} {s.description()}" for s in strands]
    write_sequences(path, names, [s.medoid if medoid_only else s.sequence for s in strands])


def write_strand_report(
    path: str | os.PathLike,
    strands: Sequence[ConsensusStrand],
    *,
    header: str | None = None,
    medoid_only: bool = False,
) -> None:
    """One TSV row per strand: cluster id, size, confidence, agreement, distance, length, ..."""
    from dnaembed.io.tables import write_tsv

    columns = ["cluster_id", "size", "confidence", "agreement", "distance", "length",
               "reversed_reads", "iterations"]
    rows = [
        (s.cluster_id, s.size, f"{s.confidence:.4f}", f"{s.agreement:.4f}",
         f"{s.mean_distance:.3f}", len(s.medoid if medoid_only else s.sequence),
         s.reversed_reads, s.iterations)
        for s in strands
    ]
    write_tsv(path, columns, rows, header=header)
