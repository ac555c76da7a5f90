"""The inputs brought to one form: reads grouped by cluster, orientations, base qualities.

:func:`group_reads` turns what :func:`~dnaembed.consensus.consensus_strands`
accepts (a :class:`ReadSet` or plain sequences; labels by read id or per read;
orientations by name, by read id or per read) into :class:`GroupedReads`: the
reads of the kept clusters, grouped by cluster in first-read order.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.encoding import segment_ids
from dnaembed.errors import DnaembedError
from dnaembed.io.sequences import ReadSet
from dnaembed.log import logger

#: Phred values above this share one bin.
MAX_QUAL = 60


@dataclass(frozen=True)
class GroupedReads:
    """The non-empty reads of the kept clusters, grouped by cluster (first-read order)."""

    seqs: list[str]
    #: Base qualities (FASTQ strings) parallel to ``seqs``, or None.
    quals: list[str] | None
    #: Per read: True = reverse-complement it (given orientations), or None = infer.
    flips: np.ndarray | None
    #: Cluster number of each read, non-decreasing.
    cluster: np.ndarray
    #: Cluster names, by cluster number.
    names: list[str]


def group_reads(
    reads: ReadSet | Sequence[str],
    labels: Mapping[str, Hashable] | Sequence[Hashable] | np.ndarray,
    *,
    orientation: str | Mapping[str, object] | Sequence[object] | np.ndarray | None,
    quals: Sequence[str] | None,
    min_size: int,
) -> GroupedReads | None:
    """The reads of each cluster of at least ``min_size`` non-empty reads; None if none."""
    if isinstance(reads, ReadSet):
        ids, seqs = reads.ids, reads.seqs
        if quals is None:
            quals = reads.quals
    else:
        ids, seqs = None, list(reads)
    cluster_of, names = cluster_index(ids, len(seqs), labels)
    flips = orientation_flags(ids, len(seqs), orientation, cluster_of)
    if not names:
        return None
    member_reads, members_cluster, kept = _kept_members(seqs, cluster_of, len(names), min_size)
    if len(kept) == 0:
        return None
    group_seqs = [seqs[i] for i in member_reads.tolist()]
    group_quals = None
    if quals is not None:
        group_quals = [quals[i] for i in member_reads.tolist()]
        if any(len(q) != len(s) for q, s in zip(group_quals, group_seqs)):
            raise DnaembedError("base qualities must have the length of their reads")
    return GroupedReads(
        seqs=group_seqs,
        quals=group_quals,
        flips=None if flips is None else flips[member_reads],
        cluster=members_cluster,
        names=[names[k] for k in kept.tolist()],
    )


def _kept_members(
    seqs: list[str], cluster_of: np.ndarray, n_names: int, min_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reads of the kept clusters grouped by cluster, their dense cluster numbers, the kept."""
    # Empty reads carry no vote; clusters below min_size are skipped.
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    cluster_of = np.where(lengths > 0, cluster_of, -1)
    used = cluster_of >= 0
    sizes = np.bincount(cluster_of[used], minlength=n_names)
    keep_cluster = sizes >= min_size
    skipped = int(((sizes > 0) & ~keep_cluster).sum())
    if skipped:
        logger.info("%d cluster(s) below %d reads skipped", skipped, min_size)
    cluster_of = np.where(used & keep_cluster[np.maximum(cluster_of, 0)], cluster_of, -1)
    # Renumber the kept clusters densely, keeping first-appearance order.
    kept = np.flatnonzero(keep_cluster)
    new_index = np.full(n_names, -1, dtype=np.int64)
    new_index[kept] = np.arange(len(kept))
    members_cluster = new_index[cluster_of[cluster_of >= 0]]
    member_reads = np.flatnonzero(cluster_of >= 0)
    order = np.argsort(members_cluster, kind="stable")
    return member_reads[order], members_cluster[order], kept


def cluster_index(ids: list[str] | None, n: int,
                  labels: Mapping[str, Hashable] | Sequence[Hashable] | np.ndarray
                  ) -> tuple[np.ndarray, list[str]]:
    """Cluster number per read (-1: none) and the cluster names, in first-read order."""
    if isinstance(labels, Mapping):
        if ids is None:
            raise DnaembedError("labels keyed by read id need reads with ids (a ReadSet)")
        per_read = [labels.get(rid) for rid in ids]
    else:
        per_read = list(labels.tolist() if isinstance(labels, np.ndarray) else labels)
        if len(per_read) != n:
            raise DnaembedError(f"{len(per_read)} labels for {n} reads: need one per read")
    index: dict[Hashable, int] = {}
    names: list[str] = []
    cluster_of = np.full(n, -1, dtype=np.int64)
    for i, label in enumerate(per_read):
        if label is None or (isinstance(label, int | np.integer) and label < 0):
            continue
        c = index.get(label)
        if c is None:
            c = index[label] = len(names)
            names.append(str(label))
        cluster_of[i] = c
    return cluster_of, names


def orientation_flags(ids: list[str] | None, n: int,
                      orientation: str | Mapping[str, object] | Sequence[object] | np.ndarray
                      | None, cluster_of: np.ndarray) -> np.ndarray | None:
    """Per read True = reverse-complement it; None = infer."""
    if orientation is None or (isinstance(orientation, str) and orientation == "infer"):
        return None
    if isinstance(orientation, str):
        if orientation == "forward":
            return np.zeros(n, dtype=bool)
        raise DnaembedError(
            f"orientation must be 'infer', 'forward' or per-read values, got {orientation!r}"
        )
    if isinstance(orientation, Mapping):
        if ids is None:
            raise DnaembedError("orientations keyed by read id need reads with ids (a ReadSet)")
        values = []
        for rid, c in zip(ids, cluster_of.tolist()):
            if rid in orientation:
                values.append(orientation[rid])
            elif c >= 0:
                raise DnaembedError(f"read {rid}: clustered but has no orientation")
            else:
                values.append("+")
    else:
        values = list(orientation.tolist() if isinstance(orientation, np.ndarray) else orientation)
        if len(values) != n:
            raise DnaembedError(f"{len(values)} orientations for {n} reads: need one per read")
    arr = np.asarray(values)
    if arr.dtype.kind in "biu":
        # Booleans or 0/1 (e.g. ClusterResult.orientation): 1 = reverse complement.
        return arr.astype(bool)
    flips = np.zeros(n, dtype=bool)
    for i, v in enumerate(values):
        if isinstance(v, bool | np.bool_):
            flips[i] = bool(v)
        elif v in ("+", "-"):
            flips[i] = v == "-"
        else:
            raise DnaembedError(f"orientation of read {i + 1}: expected '+' or '-', got {v!r}")
    return flips


def quality_values(quals: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Phred values (capped at :data:`MAX_QUAL`) as one flat array, and the lengths."""
    lengths = np.fromiter((len(q) for q in quals), dtype=np.int64, count=len(quals))
    raw = np.frombuffer("".join(quals).encode("ascii"), dtype=np.uint8).astype(np.int64)
    return np.clip(raw - 33, 0, MAX_QUAL), lengths


def quality_summary(
    quals: list[str] | None, cluster: np.ndarray, n_clusters: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Mean base quality per read, and per cluster how many bases of each quality it has.

    ``(None, None)`` without qualities. The histogram (clusters x quality) is what
    the polishing cost model weighs an error's quality against.
    """
    if quals is None or not len(quals):
        return None, None
    values, qlens = quality_values(quals)
    qseg = segment_ids(qlens)
    mean_quality = np.bincount(qseg, weights=values, minlength=len(quals)) / np.maximum(qlens, 1)
    histogram = np.bincount(
        cluster[qseg] * (MAX_QUAL + 1) + values, minlength=n_clusters * (MAX_QUAL + 1)
    ).reshape(n_clusters, MAX_QUAL + 1)
    return mean_quality, histogram
