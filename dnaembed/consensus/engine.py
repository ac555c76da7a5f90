"""Strand reconstruction: one consensus sequence per cluster of noisy reads.

After clustering, each cluster holds noisy copies (insertions, deletions,
substitutions; either orientation; some truncated) of one stored strand.
:func:`consensus_strands` turns every cluster back into its most likely strand,
in the spirit of the bitwise-majority-alignment family of trace-reconstruction
algorithms used in DNA storage:

1. **Orientation.** When the caller gives each read's orientation (the clusters
   table's optional third column, or the clusterer's flags) it is used;
   otherwise every read is compared, as read and as its reverse complement,
   with a pivot (the read whose length is nearest the target length), then with
   the medoid, and turned to the closer. The output strand is in the
   orientation of the reads marked ``+`` when orientations are given, otherwise
   in the orientation most reads were read in (ties: the medoid's).
2. **Medoid.** The starting estimate is the read with the least total
   Levenshtein distance to the others, among reads whose length is within
   :func:`length_tolerance` of the target length (the expected length when
   given, else the cluster's 75th-percentile read length: truncation only
   shortens reads), so a truncated read never starts the estimate. Ties go to
   the read nearer the target length, then to the higher mean base quality,
   then to the first. Big clusters use a seeded sample (at most 32 candidates
   against at most 64 reads).
3. **Majority refinement.** Every read is aligned to the current estimate
   (globally; a read shorter than the estimate by more than the tolerance as an
   infix, clipped to its best-aligned stretch, so a truncated read, or one that
   lost a piece of its middle, votes only where it aligns). Reads whose edits
   exceed 30% of their aligned span do not vote. Votes: per estimate position a
   base or a gap, per gap between positions inserted bases; indels in a
   homopolymer run are first moved to the run's left end, so reads that lost
   "one A of AAAA" vote for the same position. A position takes the plurality
   (ties keep the estimate); an insertion needs a strict majority of the reads
   covering it. A change of a homopolymer run's length is held back when a
   run-length model learnt from the data (how often a run of length t is read
   t-2 .. t+2) prefers another length: a biased channel (nanopore) shortens runs
   far more often than it lengthens them, which a plain majority cannot know.
4. **Polishing.** When the majority changes nothing, every edit that at least a
   quarter of the covering reads ask for (a substitution, deletion or insertion
   the majority missed because pairwise alignments split one event's votes, or
   a run length held back) is tried, from the strand's end to its start, and
   kept when the reads become likelier: each edit of each read's alignment
   costs its negative log-probability under error rates learnt from all the
   clusters (substitutions, insertions, run-length changes), an error at a
   low-quality base (FASTQ) costs less, and each base of the strand costs
   log 4 (a uniform prior). Clusters of one read are never polished; of two
   only with base qualities (otherwise every edit ties).
   Steps 3-4 repeat until no estimate changes (at most ``max_iterations``);
   only the clusters that changed are aligned again. All clusters of a chunk
   are voted on together with numpy; alignments are C calls (python-Levenshtein,
   edlib); the polishing loop is Python.
5. **Expected length.** When given, an estimate that ends within 2% (at least 2
   bases) of it but not on it is brought to it: the weakest-supported positions
   are removed, or the best-supported rejected insertions added.
6. **Confidence.** From the votes on the final estimate: ``confidence`` is the
   fraction of positions that no single read could overturn (winner ahead of the
   runner-up by at least two reads and backed by a majority of the reads
   covering it), so a single-read cluster scores 0 and two agreeing reads score
   1; ``agreement`` is the mean fraction of covering reads that agree with the
   consensus base; ``mean_distance`` the mean edit distance of the reads to the
   consensus (a truncated read counted over the part it covers).

Rules: reads with an empty sequence are ignored (they carry no vote); a cluster
counts its non-empty reads; clusters below ``min_size`` reads are skipped.
``N`` in a read is no vote for any base. Work is split into chunks of
:data:`CHUNK_CLUSTERS` clusters, each learning its own error rates; chunks run
in worker processes with ``threads`` > 1. Same input and seed, same output,
whatever the number of processes.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import edlib
import Levenshtein
import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein as RFLevenshtein

from dnaembed.arrays import rank_in_groups
from dnaembed.encoding import decode_flat, encode_flat, offsets, reverse_complement, segment_ids
from dnaembed.errors import DnaembedError
from dnaembed.io.sequences import ReadSet
from dnaembed.log import available_cores, logger, progress_bar

#: Vote columns: A, C, G, T, N (codes 0..4), then "no base here".
_N = 4


_GAP = 5


_COLUMNS = 6


#: A read whose edit distance to the estimate exceeds this fraction of its span does not vote.
_OUTLIER = 0.3


#: At most this many bases are inserted into one gap of the estimate per iteration.
_MAX_INSERT = 8


#: Polishing tries an edit that at least this fraction of the covering reads asks for.
_CONTEST = 0.25


#: Homopolymer runs of this length or more share one row of the run-length model.
_MAX_RUN = 8


_LOG4 = math.log(4.0)


#: Phred values above this share one bin; quality adjustments are capped at +-_QUAL_CAP.
_MAX_QUAL = 60


_QUAL_CAP = 8.0


#: Weight (in reads) of the prior of each row of the run-length model.
_RUN_PRIOR_WEIGHT = 50.0


#: Polishing weighs an edit on at most this many of a cluster's reads (evenly spaced).
POLISH_READS = 48


#: Clusters per unit of work (and per learnt error model).
CHUNK_CLUSTERS = 2000


#: Medoid search on big clusters: candidates, and the reads each candidate is compared with.
MEDOID_CANDIDATES = 32


MEDOID_SAMPLE = 64


@dataclass
class ConsensusStrand:
    """One reconstructed strand and how much to trust it (see the module docstring)."""

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
) -> list[ConsensusStrand]:
    """One consensus strand per cluster of ``reads`` (algorithm: module docstring).

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
    is the same whatever the number.

    Strands come in the order of each cluster's first read in ``reads``.
    """
    if expected_length is not None and expected_length < 1:
        raise DnaembedError(f"expected length must be >= 1, got {expected_length}")
    if min_size < 1:
        raise DnaembedError(f"minimum cluster size must be >= 1, got {min_size}")
    if max_iterations < 0:
        raise DnaembedError(f"max iterations must be >= 0, got {max_iterations}")
    if isinstance(reads, ReadSet):
        ids, seqs = reads.ids, reads.seqs
        if quals is None:
            quals = reads.quals
    else:
        ids, seqs = None, list(reads)
    cluster_of, names = _cluster_index(ids, len(seqs), labels)
    flips = _orientation_flags(ids, len(seqs), orientation, cluster_of)
    if not names:
        return []

    # Empty reads carry no vote; clusters below min_size are skipped.
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    cluster_of = np.where(lengths > 0, cluster_of, -1)
    used = cluster_of >= 0
    sizes = np.bincount(cluster_of[used], minlength=len(names))
    keep_cluster = sizes >= min_size
    skipped = int(((sizes > 0) & ~keep_cluster).sum())
    if skipped:
        logger.info("%d cluster(s) below %d reads skipped", skipped, min_size)
    cluster_of = np.where(used & keep_cluster[np.maximum(cluster_of, 0)], cluster_of, -1)
    # Renumber the kept clusters densely, keeping first-appearance order.
    kept = np.flatnonzero(keep_cluster)
    new_index = np.full(len(names), -1, dtype=np.int64)
    new_index[kept] = np.arange(len(kept))
    members_cluster = new_index[cluster_of[cluster_of >= 0]]
    member_reads = np.flatnonzero(cluster_of >= 0)
    order = np.argsort(members_cluster, kind="stable")
    member_reads = member_reads[order]
    members_cluster = members_cluster[order]
    n_clusters = len(kept)
    if n_clusters == 0:
        return []

    group_seqs = [seqs[i] for i in member_reads.tolist()]
    group_quals = None
    if quals is not None:
        group_quals = [quals[i] for i in member_reads.tolist()]
        if any(len(q) != len(s) for q, s in zip(group_quals, group_seqs)):
            raise DnaembedError("base qualities must have the length of their reads")
    given = None if flips is None else flips[member_reads]

    # Fixed chunks of clusters, each with its own learnt error model: the output
    # does not depend on how many processes run them.
    bounds = np.concatenate([[0], np.cumsum(np.bincount(members_cluster, minlength=n_clusters))])
    tasks = []
    for c0 in range(0, n_clusters, CHUNK_CLUSTERS):
        c1 = min(c0 + CHUNK_CLUSTERS, n_clusters)
        a, b = int(bounds[c0]), int(bounds[c1])
        tasks.append(
            _Chunk(
                seqs=group_seqs[a:b],
                cluster=members_cluster[a:b] - c0,
                n_clusters=c1 - c0,
                first_cluster=c0,
                expected_length=expected_length,
                quals=None if group_quals is None else group_quals[a:b],
                given_flips=None if given is None else given[a:b],
                seed=seed,
                iterations=max_iterations if refine else 0,
            )
        )
    results = _run_chunks(tasks, threads)
    out = []
    for task, result in zip(tasks, results):
        for k in range(task.n_clusters):
            out.append(
                ConsensusStrand(
                    cluster_id=names[kept[task.first_cluster + k]],
                    sequence=result.sequences[k],
                    size=int(result.sizes[k]),
                    confidence=float(result.confidence[k]),
                    agreement=float(result.agreement[k]),
                    mean_distance=float(result.mean_distance[k]),
                    reversed_reads=int(result.reversed_reads[k]),
                    iterations=int(result.iterations[k]),
                    medoid=result.medoids[k],
                )
            )
    return out


def write_strands(
    path: str | os.PathLike, strands: Sequence[ConsensusStrand], *, medoid_only: bool = False
) -> None:
    """FASTA of the strands (atomic): name = cluster id, description = size and confidence.

    ``medoid_only``: write each cluster's medoid (the baseline) instead.
    """
    from dnaembed.io.sequences import write_sequences

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


@dataclass
class _Chunk:
    """Consensus work for a run of clusters, and what comes back (pickled to workers)."""

    seqs: list[str]
    cluster: np.ndarray
    n_clusters: int
    first_cluster: int
    expected_length: int | None
    quals: list[str] | None
    given_flips: np.ndarray | None
    seed: int
    iterations: int


@dataclass
class _ChunkResult:
    sequences: list[str]
    medoids: list[str]
    sizes: np.ndarray
    confidence: np.ndarray
    agreement: np.ndarray
    mean_distance: np.ndarray
    reversed_reads: np.ndarray
    iterations: np.ndarray


def _run_chunk(task: _Chunk) -> _ChunkResult:
    engine = _Engine(
        task.seqs,
        task.cluster,
        task.n_clusters,
        expected_length=task.expected_length,
        quals=task.quals,
        given_flips=task.given_flips,
        seed=task.seed,
        first_cluster=task.first_cluster,
    )
    engine.run(task.iterations)
    return _ChunkResult(
        sequences=[engine.final_sequence(c) for c in range(task.n_clusters)],
        medoids=[engine.final_medoid(c) for c in range(task.n_clusters)],
        sizes=engine.sizes,
        confidence=engine.confidence,
        agreement=engine.agreement,
        mean_distance=engine.mean_distance,
        reversed_reads=engine.reversed_reads,
        iterations=engine.iterations,
    )


def _start_method() -> str:
    """Fork where it is safe (fast, and works from scripts without a __main__ guard);
    spawn once torch or faiss is loaded, whose threads a fork would break."""
    import sys

    risky = any(name in sys.modules for name in ("torch", "faiss"))
    if risky or "fork" not in multiprocessing.get_all_start_methods():
        return "spawn"
    return "fork"


def _run_chunks(tasks: list[_Chunk], threads: int) -> list[_ChunkResult]:
    """Run the chunks here, or in ``threads`` worker processes when there are several."""
    if threads <= 0:
        threads = available_cores()
    bar = progress_bar(total=sum(t.n_clusters for t in tasks), unit="cluster", desc="consensus")
    try:
        if threads == 1 or len(tasks) == 1:
            results = []
            for task in tasks:
                results.append(_run_chunk(task))
                bar.update(task.n_clusters)
            return results
        context = multiprocessing.get_context(_start_method())
        with ProcessPoolExecutor(min(threads, len(tasks)), mp_context=context) as pool:
            results = []
            for task, result in zip(tasks, pool.map(_run_chunk, tasks)):
                results.append(result)
                bar.update(task.n_clusters)
            return results
    finally:
        bar.close()


def _cluster_index(
    ids: list[str] | None, n: int, labels
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


def _orientation_flags(ids, n: int, orientation, cluster_of: np.ndarray) -> np.ndarray | None:
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


def _quality_values(quals: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Phred values (capped at _MAX_QUAL) as one flat array, and the lengths."""
    lengths = np.fromiter((len(q) for q in quals), dtype=np.int64, count=len(quals))
    raw = np.frombuffer("".join(quals).encode("ascii"), dtype=np.uint8).astype(np.int64)
    return np.clip(raw - 33, 0, _MAX_QUAL), lengths


class _Engine:
    """Orientation, medoids and refinement for clusters whose reads are grouped.

    ``seqs[i]`` belongs to cluster ``cluster[i]`` (non-decreasing).
    """

    def __init__(
        self,
        seqs: list[str],
        cluster: np.ndarray,
        n_clusters: int,
        *,
        expected_length: int | None,
        quals: list[str] | None,
        given_flips: np.ndarray | None,
        seed: int,
        first_cluster: int = 0,
    ) -> None:
        self.n = n_clusters
        self.first_cluster = first_cluster
        self.cluster = cluster
        self.sizes = np.bincount(cluster, minlength=n_clusters)
        self.bounds = np.concatenate([[0], np.cumsum(self.sizes)]).tolist()
        self.lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        self.expected_length = expected_length
        self.mean_quality = None
        # Per cluster: how many bases of each quality its reads have (for the cost model).
        self.qual_all = None
        if quals is not None and len(quals):
            values, qlens = _quality_values(quals)
            qseg = segment_ids(qlens)
            self.mean_quality = np.bincount(qseg, weights=values, minlength=len(quals)) / (
                np.maximum(qlens, 1)
            )
            self.qual_all = np.bincount(
                cluster[qseg] * (_MAX_QUAL + 1) + values, minlength=n_clusters * (_MAX_QUAL + 1)
            ).reshape(n_clusters, _MAX_QUAL + 1)
        self.seed = seed
        self.targets = self._target_lengths()
        self.raw = seqs
        if given_flips is not None:
            self.flips = given_flips.copy()
            self.seqs = [reverse_complement(s) if f else s for s, f in zip(seqs, given_flips)]
            self.medoids = [self._medoid(c) for c in range(n_clusters)]
            self.output_flip = np.zeros(n_clusters, dtype=bool)
        else:
            self.flips = np.zeros(len(seqs), dtype=bool)
            self.seqs = list(seqs)
            self.medoids = []
            self.output_flip = np.zeros(n_clusters, dtype=bool)
            for c in range(n_clusters):
                self.medoids.append(self._orient_and_medoid(c))
        # Reads turned relative to the orientation the strand is written in.
        turned = self.flips ^ self.output_flip[cluster]
        self.reversed_reads = np.bincount(cluster, weights=turned, minlength=n_clusters)
        self.quals = (
            None
            if quals is None
            else [q[::-1] if f else q for q, f in zip(quals, self.flips.tolist())]
        )
        self.estimates = [self.seqs[m] for m in self.medoids]
        self.confidence = np.zeros(n_clusters)
        self.agreement = np.zeros(n_clusters)
        self.mean_distance = np.zeros(n_clusters)
        self.iterations = np.zeros(n_clusters, dtype=np.int64)
        self.run_counts = np.zeros((n_clusters, _MAX_RUN, 5), dtype=np.int64)
        # Per cluster: substitutions, insertions of a base unlike its neighbours, positions read.
        self.error_counts = np.zeros((n_clusters, 3), dtype=np.int64)
        # Per cluster: qualities of the read bases that are substitutions or insertions.
        self.qual_err = np.zeros((n_clusters, _MAX_QUAL + 1), dtype=np.int64)

    # ------------------------------------------------------------ start

    def _target_lengths(self) -> np.ndarray:
        if self.expected_length is not None:
            return np.full(self.n, self.expected_length, dtype=np.int64)
        out = np.empty(self.n, dtype=np.int64)
        for c in range(self.n):
            a, b = self.bounds[c], self.bounds[c + 1]
            # Truncation only shortens reads: aim above the median.
            out[c] = int(round(np.percentile(self.lengths[a:b], 75)))
        return out

    def _candidates(self, c: int) -> np.ndarray:
        """Reads of cluster ``c`` eligible as medoid: length near the target (else all)."""
        a, b = self.bounds[c], self.bounds[c + 1]
        lengths = self.lengths[a:b]
        target = self.targets[c]
        near = np.flatnonzero(np.abs(lengths - target) <= length_tolerance(int(target)))
        return a + (near if len(near) else np.arange(b - a))

    def _rng(self, c: int) -> np.random.Generator:
        # Per-cluster stream: a cluster's result never depends on the other clusters.
        return np.random.default_rng([self.seed, self.first_cluster + c])

    def _orient_and_medoid(self, c: int) -> int:
        a, b = self.bounds[c], self.bounds[c + 1]
        if b - a == 1:
            return a
        cands = self._candidates(c)
        target = self.targets[c]
        pivot = int(cands[np.argmin(np.abs(self.lengths[cands] - target))])
        self._orient_to(a, b, self.raw[pivot])
        medoid = self._medoid(c)
        # Orient again to the medoid, unless every read already agreed with the pivot.
        if medoid != pivot and self.flips[a:b].any():
            self._orient_to(a, b, self.seqs[medoid])
        # Output in the orientation most reads were read in (ties: the medoid's).
        flipped = int(self.flips[a:b].sum())
        ref_flipped = bool(self.flips[medoid])
        majority_flipped = flipped * 2 > (b - a) or (flipped * 2 == (b - a) and ref_flipped)
        # Express everything relative to the majority's orientation.
        if majority_flipped:
            self.output_flip[c] = True
        return medoid

    def _orient_to(self, a: int, b: int, reference: str) -> None:
        """Turn each read of [a, b) to whichever of its orientations is nearer ``reference``."""
        raw = self.raw[a:b]
        rcs = [reverse_complement(s) for s in raw]
        dist = process.cdist([reference], raw + rcs, scorer=RFLevenshtein.distance)[0]
        flip = dist[len(raw) :] < dist[: len(raw)]
        self.flips[a:b] = flip
        for j, f in enumerate(flip.tolist()):
            self.seqs[a + j] = rcs[j] if f else raw[j]

    def _medoid(self, c: int) -> int:
        a, b = self.bounds[c], self.bounds[c + 1]
        n = b - a
        if n == 1:
            return a
        cands = self._candidates(c)
        rng = None
        if len(cands) > MEDOID_CANDIDATES:
            rng = self._rng(c)
            cands = np.sort(rng.choice(cands, MEDOID_CANDIDATES, replace=False))
        others = np.arange(a, b)
        if n > MEDOID_SAMPLE:
            rng = rng or self._rng(c)
            others = np.sort(rng.choice(others, MEDOID_SAMPLE, replace=False))
        if len(cands) == 1:
            return int(cands[0])
        if n == 2:
            totals = np.zeros(len(cands))
        else:
            dist = process.cdist(
                [self.seqs[i] for i in cands.tolist()],
                [self.seqs[i] for i in others.tolist()],
                scorer=RFLevenshtein.distance,
                dtype=np.int32,
            )
            totals = dist.sum(axis=1)
        off_target = np.abs(self.lengths[cands] - self.targets[c])
        quality = (
            -self.mean_quality[cands] if self.mean_quality is not None else np.zeros(len(cands))
        )
        best = np.lexsort((cands, quality, off_target, totals))[0]
        return int(cands[best])

    # ------------------------------------------------------------ refinement

    def run(self, max_iterations: int) -> None:
        """Refine until no estimate changes; the last voting pass sets the statistics.

        Each round: align and vote; clusters whose majority decision changes the
        estimate take it; the others are polished (see :meth:`_polish`). Only
        clusters that changed are aligned again.
        """
        active = np.arange(self.n)
        for it in range(max_iterations + 1):
            if len(active) == 0:
                break
            votes = self._vote(active)
            self._record_statistics(active, votes)
            if it == max_iterations:
                break
            new = votes.rebuild(*votes.hold_disputed_runs(self._run_log_p()))
            changed = []
            settled = []
            for k, c in enumerate(active.tolist()):
                if new[k] and new[k] != self.estimates[c]:
                    self.estimates[c] = new[k]
                    changed.append(c)
                else:
                    settled.append(k)
            changed += self._polish(active, votes, np.asarray(settled, dtype=np.int64))
            for c in changed:
                self.iterations[c] = it + 1
            active = np.asarray(sorted(changed), dtype=np.int64)
        if self.expected_length is not None:
            self._fit_length()

    def _polish(self, active: np.ndarray, votes: _Votes, settled: np.ndarray) -> list[int]:
        """Try the contested edits of settled estimates; keep those that make the reads likelier.

        Pairwise alignments describe one event in different ways (a read that lost
        one C of CCCCC next to a missing A aligns it as C->A), which splits the
        votes for the true edit below a majority; and a biased channel shortens
        homopolymer runs more often than it lengthens them, which a majority
        cannot know. Every edit that at least ``_CONTEST`` of the covering reads
        (and two reads) ask for is tried, from the end of the strand to its
        start, and kept when the reads' total alignment cost goes down, each
        edit of an alignment costing its negative log-probability under error
        rates learnt from all the clusters (:class:`_CostModel`). Clusters of
        fewer than three reads are not polished: every edit would tie.
        """
        if len(settled) == 0:
            return []
        # With base qualities two reads no longer tie: the lower-quality base gives.
        smallest = 2 if self.quals is not None else 3
        cands = votes.contested(settled, min_reads=self.sizes[active] >= smallest)
        if not cands:
            return []
        model = self._cost_model()
        changed = []
        for k, edits in cands.items():
            c = int(active[k])
            voters = votes.reads_of(k)
            if len(voters) > POLISH_READS:
                # Enough to weigh an edit; keeps a 400-read cluster from costing 40 small ones.
                voters = voters[:: math.ceil(len(voters) / POLISH_READS)]
            reads = model.prepare(voters, self.seqs, self.quals)
            seq = self.estimates[c]
            best = model.total(seq, reads)
            for index, kind, base in edits:
                trial = _apply_edit(seq, index, kind, base)
                cost = model.total(trial, reads, limit=best)
                if cost < best - 1e-9:
                    seq, best = trial, cost
            if seq != self.estimates[c]:
                self.estimates[c] = seq
                changed.append(c)
        return changed

    def _vote(self, active: np.ndarray) -> _Votes:
        """Align every read of the ``active`` clusters to its estimate and count votes."""
        n_active = len(active)
        local = np.full(self.n, -1, dtype=np.int64)
        local[active] = np.arange(n_active)
        est = [self.estimates[c] for c in active.tolist()]
        ecodes, elens = encode_flat(est)
        eoff = offsets(elens)
        soff = eoff + np.arange(n_active)  # every estimate has len + 1 gaps (slots)
        read_idx = np.concatenate(
            [np.arange(self.bounds[c], self.bounds[c + 1]) for c in active.tolist()]
        )
        read_cl = local[self.cluster[read_idx]]
        ops: list = []
        n_ops = np.zeros(len(read_idx), dtype=np.int64)
        span_start = np.zeros(len(read_idx), dtype=np.int64)
        span_end = np.zeros(len(read_idx), dtype=np.int64)
        infix = np.zeros(len(read_idx), dtype=bool)
        seqs = self.seqs
        elens_list = elens.tolist()
        editops = Levenshtein.editops
        for k, (r, cl) in enumerate(zip(read_idx.tolist(), read_cl.tolist())):
            read = seqs[r]
            e = est[cl]
            length = elens_list[cl]
            if len(read) < length - length_tolerance(length):
                # A truncated read votes only where it aligns (infix alignment).
                s, t = edlib.align(read, e, mode="HW", task="locations")["locations"][0]
                lo, hi, found = _clip(editops(e[s : t + 1], read), t - s + 1)
                span_start[k] = s + lo
                span_end[k] = s + hi
                infix[k] = True
            else:
                found = editops(e, read)
                span_end[k] = length - 1
            n_ops[k] = len(found)
            ops.extend(found)
        return _Votes.count(
            ecodes, elens, eoff, soff, read_idx, read_cl, span_start, span_end, infix, n_ops, ops,
            self,
        )

    def _run_log_p(self) -> np.ndarray:
        """log P(read shows a run of true length t as t + d), learnt from the reads.

        Counted over every cluster of three or more reads against its current
        estimate; each run length is smoothed towards the one below it (and the
        shortest towards a symmetric prior), so rare long runs borrow strength.
        """
        counts = self.run_counts.sum(axis=0).astype(np.float64)
        prior = np.array([0.5, 2.0, 95.0, 2.0, 0.5]) / 100.0
        out = np.empty((_MAX_RUN, 5))
        for t in range(_MAX_RUN):
            p = (counts[t] + _RUN_PRIOR_WEIGHT * prior) / (counts[t].sum() + _RUN_PRIOR_WEIGHT)
            out[t] = np.log(p)
            prior = p
        return out

    def _cost_model(self) -> _CostModel:
        """Edit costs (negative log-probabilities) learnt from every cluster's current votes."""
        subs, inserts, positions = self.error_counts.sum(axis=0).astype(np.float64)
        weight = 100.0 * _RUN_PRIOR_WEIGHT
        p_sub = (subs + 0.01 * weight) / (positions + weight)
        p_ins = (inserts + 0.01 * weight) / (positions + weight)
        log_p = self._run_log_p()
        run = -(log_p - log_p[:, 2:3])  # cost of showing a run d longer than it is
        quality = None
        if self.qual_all is not None:
            # An error at a base of quality q costs log P(q | error) - log P(q | correct)
            # less: errors at low-quality bases are cheap (the only quality used).
            err = self.qual_err.sum(axis=0).astype(np.float64)
            ok = np.maximum(self.qual_all[self.sizes >= 3].sum(axis=0) - err, 0)
            p_err = (err + 1.0) / (err.sum() + len(err))
            p_ok = (ok + 1.0) / (ok.sum() + len(ok))
            quality = np.clip(np.log(p_ok) - np.log(p_err), -_QUAL_CAP, _QUAL_CAP).tolist()
        return _CostModel(-math.log(p_sub), -math.log(p_ins), run.tolist(), quality)

    def _record_statistics(self, active: np.ndarray, votes: _Votes) -> None:
        counts, cover = votes.counts, votes.cover
        big = (self.sizes[active] >= 3)[:, None]
        self.run_counts[active] = votes.run_table_counts(len(active)) * big[:, :, None]
        self.error_counts[active] = votes.error_counts * big
        if votes.qual_err is not None:
            self.qual_err[active] = votes.qual_err * big
        # The consensus base is the estimate's (a called run may keep a base the majority lost).
        winner = votes.ecodes
        pos = np.arange(len(winner))
        top = counts[pos, winner]
        rest = counts.copy()
        rest[pos, winner] = -1
        runner = rest.max(axis=1)
        secure = ((top - runner) >= 2) & (2 * top > cover)
        agree = top / np.maximum(cover, 1)
        seg = votes.seg
        lens = np.maximum(votes.elens, 1)
        n_active = len(active)
        self.confidence[active] = np.bincount(seg, weights=secure, minlength=n_active) / lens
        self.agreement[active] = np.bincount(seg, weights=agree, minlength=n_active) / lens
        dist = np.bincount(votes.read_cl, weights=votes.n_ops, minlength=n_active)
        self.mean_distance[active] = dist / np.maximum(self.sizes[active], 1)

    def _fit_length(self) -> None:
        """Bring near-miss estimates to the expected length (module docstring, step 4)."""
        target = int(self.expected_length)
        limit = max(2, math.ceil(0.02 * target))
        misfit = [
            c
            for c in range(self.n)
            if self.sizes[c] >= 2 and 0 < abs(len(self.estimates[c]) - target) <= limit
        ]
        if not misfit:
            return
        active = np.asarray(misfit, dtype=np.int64)
        votes = self._vote(active)
        self._record_statistics(active, votes)
        winner, accepted = votes.hold_disputed_runs(self._run_log_p())
        per_cluster = np.bincount(votes.ins_cluster[accepted], minlength=len(misfit))
        for k in range(len(misfit)):
            a, b = int(votes.eoff[k]), int(votes.eoff[k] + votes.elens[k])
            kept = a + np.flatnonzero(winner[a:b] != _GAP)
            extra = len(kept) + int(per_cluster[k]) - target
            if extra > 0:
                # Drop the positions where the gap came closest to winning.
                counts = votes.counts[kept]
                margin = counts[np.arange(len(kept)), winner[kept]] - counts[:, _GAP]
                drop = kept[np.argsort(margin, kind="stable")[:extra]]
                winner[drop] = _GAP
            elif extra < 0:
                mine = np.flatnonzero((votes.ins_cluster == k) & ~accepted)
                best = mine[np.argsort(-votes.ins_total[mine], kind="stable")[:-extra]]
                accepted[best] = True
        new = votes.rebuild(winner, accepted)
        for k, c in enumerate(misfit):
            if new[k]:
                self.estimates[c] = new[k]

    # ------------------------------------------------------------ output

    def final_sequence(self, c: int) -> str:
        s = self.estimates[c]
        return reverse_complement(s) if self.output_flip[c] else s

    def final_medoid(self, c: int) -> str:
        s = self.seqs[self.medoids[c]]
        return reverse_complement(s) if self.output_flip[c] else s


@dataclass
class _Votes:
    """Votes of the reads of some clusters on their estimates (flat over the clusters).

    Positions are numbered over the concatenated estimates (``eoff[k]`` is where
    active cluster ``k`` starts); gaps ("slots", one before each position and
    one after the last) over the concatenated ``len + 1`` slots (``soff``).
    """

    ecodes: np.ndarray
    elens: np.ndarray
    eoff: np.ndarray
    soff: np.ndarray
    seg: np.ndarray
    counts: np.ndarray  # (positions, 6): A C G T N gap
    cover: np.ndarray  # reads covering each position
    slot_cover: np.ndarray  # reads covering each gap
    winner: np.ndarray  # the column each position takes
    read_idx: np.ndarray
    read_cl: np.ndarray
    infix: np.ndarray  # read aligned as an infix (truncated)
    n_ops: np.ndarray  # edit distance of each read to the estimate (over its span)
    voting: np.ndarray  # reads that align well enough to vote
    # Candidate insertions (one row per slot and rank): where, which base, how many reads.
    ins_slot: np.ndarray
    ins_rank: np.ndarray
    ins_base: np.ndarray
    ins_total: np.ndarray
    ins_cluster: np.ndarray
    accepted: np.ndarray
    # Homopolymer runs of the estimates: first position, length, and per run the
    # number of covering reads whose copy of the run is 2 shorter ... 2 longer.
    run_start: np.ndarray
    run_len: np.ndarray
    run_hist: np.ndarray
    error_counts: np.ndarray  # per cluster: substitutions, unlike-neighbour insertions, positions
    qual_err: np.ndarray | None  # per cluster: qualities of substituted and inserted read bases

    @classmethod
    def count(
        cls, ecodes, elens, eoff, soff, read_idx, read_cl, span_start, span_end, infix, n_ops,
        ops, engine: _Engine,
    ) -> _Votes:
        n_active = len(elens)
        n_pos = len(ecodes)
        n_slots = n_pos + n_active
        seg = segment_ids(elens)
        pos = np.arange(n_pos, dtype=np.int64)

        # Reads that align badly even over their own span (a large internal deletion,
        # a chimera, a stray read) do not vote.
        voting = n_ops <= _OUTLIER * (span_end - span_start + 1)

        # Coverage: each read covers its aligned span of positions and the gaps around them.
        first = (eoff[read_cl] + span_start)[voting]
        last = (eoff[read_cl] + span_end)[voting]
        cover = np.cumsum(
            np.bincount(first, minlength=n_pos + 1) - np.bincount(last + 1, minlength=n_pos + 1)
        )[:n_pos]
        sfirst = (soff[read_cl] + span_start)[voting]
        slast = (soff[read_cl] + span_end + 1)[voting]
        slot_cover = np.cumsum(
            np.bincount(sfirst, minlength=n_slots + 1)
            - np.bincount(slast + 1, minlength=n_slots + 1)
        )[:n_slots]
        counts = np.zeros((n_pos, _COLUMNS), dtype=np.int64)
        counts[pos, ecodes] = cover

        # Homopolymer runs (estimates are never empty, so every cluster has one).
        new_run = np.ones(n_pos, dtype=bool)
        new_run[1:] = (ecodes[1:] != ecodes[:-1]) | (seg[1:] != seg[:-1])
        run_of = np.cumsum(new_run) - 1
        run_start = np.flatnonzero(new_run)
        run_len = np.diff(np.append(run_start, n_pos))
        start_of = run_start[run_of]

        empty = np.zeros(0, dtype=np.int64)
        ins_key, ins_b = empty, empty
        run_key, run_step = empty, empty
        subs = other_ins = np.zeros(n_active, dtype=np.int64)
        qual_err = None if engine.quals is None else np.zeros((n_active, _MAX_QUAL + 1), np.int64)
        if ops:
            tags, sp, dp = zip(*ops)
            tag = np.array(tags).view(np.uint32).reshape(len(tags), -1)[:, 0]
            sp = np.asarray(sp, dtype=np.int64)
            dp = np.asarray(dp, dtype=np.int64)
            op_read = np.repeat(np.arange(len(read_idx)), n_ops)
            keep = voting[op_read]
            tag, sp, dp, op_read = tag[keep], sp[keep], dp[keep], op_read[keep]
            sp += span_start[op_read]
            op_cl = read_cl[op_read]
            read_codes = _read_values(engine.seqs, read_idx[op_read], dp, _encode_bases)
            if engine.quals is not None:
                bad = tag != ord("d")
                q = _read_values(engine.quals, read_idx[op_read[bad]], dp[bad], _encode_quals)
                qual_err = np.bincount(
                    op_cl[bad] * (_MAX_QUAL + 1) + q,
                    minlength=n_active * (_MAX_QUAL + 1),
                ).reshape(n_active, _MAX_QUAL + 1)
            is_sub = tag == ord("r")
            is_del = tag == ord("d")
            is_ins = tag == ord("i")

            # Deletions move to the left end of their homopolymer run; a read that lost
            # two bases of a run votes for the run's first two positions.
            dpos = eoff[op_cl[is_del]] + sp[is_del]
            del_read = op_read[is_del]
            dpos = start_of[dpos] + rank_in_groups(del_read * (n_pos + 1) + start_of[dpos])
            dpos = np.minimum(dpos, n_pos - 1)
            spos = eoff[op_cl[is_sub]] + sp[is_sub]
            lost = np.bincount(np.concatenate([spos, dpos]), minlength=n_pos)
            counts[pos, ecodes] -= lost
            gained = np.concatenate([spos * _COLUMNS + read_codes[is_sub], dpos * _COLUMNS + _GAP])
            counts += np.bincount(gained, minlength=n_pos * _COLUMNS).reshape(n_pos, _COLUMNS)

            # Insertions: an inserted base next to a run of itself moves to the run's left end.
            icl = op_cl[is_ins]
            k = sp[is_ins]
            b = read_codes[is_ins]
            length = elens[icl]
            here = eoff[icl] + np.minimum(k, length - 1)
            prev = eoff[icl] + np.maximum(k - 1, 0)
            here_same = (k < length) & (ecodes[here] == b)
            prev_same = ~here_same & (k > 0) & (ecodes[prev] == b)
            k = np.where(
                here_same,
                start_of[here] - eoff[icl],
                np.where(prev_same, start_of[prev] - eoff[icl], k),
            )
            slot = soff[icl] + k
            ins_read = op_read[is_ins]
            rank = rank_in_groups(ins_read * (n_slots + 1) + slot)
            fits = rank < _MAX_INSERT
            ins_key = (slot * _MAX_INSERT + rank)[fits]
            ins_b = b[fits]

            # Each read's change of each run's length: -1 per deleted base, +1 per
            # inserted copy of the run's base next to it.
            same = here_same | prev_same
            ins_run = run_of[np.where(here_same, here, prev)[same]]
            n_runs = len(run_start)
            run_key = np.concatenate(
                [del_read * n_runs + run_of[dpos], ins_read[same] * n_runs + ins_run]
            )
            run_step = np.concatenate([np.full(len(dpos), -1), np.ones(len(ins_run), np.int64)])
            subs = np.bincount(op_cl[is_sub], minlength=n_active)
            other_ins = np.bincount(icl[~same], minlength=n_active)

        # Position decision: plurality; ties keep the estimate; N only wins when alone.
        score = counts * 2
        score[pos, ecodes] += 1
        informative = counts[:, :4].sum(axis=1) + counts[:, _GAP] > 0
        score[:, _N] = np.where(informative, -1, score[:, _N])
        winner = np.argmax(score, axis=1)

        # Insertion decision: strict majority of the reads covering the gap.
        keys, inverse = np.unique(ins_key, return_inverse=True)
        total = np.bincount(inverse, minlength=len(keys))
        by_base = np.bincount(inverse * 5 + ins_b, minlength=len(keys) * 5).reshape(-1, 5)
        known = by_base[:, :4].sum(axis=1) > 0
        base = np.where(known, np.argmax(by_base[:, :4], axis=1), _N)
        slot_of = keys // _MAX_INSERT
        slot_seg = segment_ids(elens + 1)
        ins_cluster = slot_seg[slot_of] if len(keys) else empty
        accepted = 2 * total > slot_cover[slot_of] if len(keys) else np.zeros(0, dtype=bool)

        # Run-length histograms: reads covering the whole run, by net change -2..+2.
        run_cover = np.minimum(cover[run_start], cover[run_start + run_len - 1])
        run_hist = np.zeros((len(run_start), 5), dtype=np.int64)
        if len(run_key):
            pairs, inv = np.unique(run_key, return_inverse=True)
            net = np.clip(np.bincount(inv, weights=run_step).astype(np.int64), -2, 2)
            runs = pairs % len(run_start)
            moved = net != 0
            np.add.at(run_hist, (runs[moved], net[moved] + 2), 1)
        run_hist[:, 2] = np.maximum(run_cover - run_hist.sum(axis=1), 0)
        return cls(
            ecodes=ecodes,
            elens=elens,
            eoff=eoff,
            soff=soff,
            seg=seg,
            counts=counts,
            cover=cover,
            slot_cover=slot_cover,
            winner=winner,
            read_idx=read_idx,
            read_cl=read_cl,
            infix=infix,
            n_ops=n_ops,
            voting=voting,
            ins_slot=slot_of,
            ins_rank=keys % _MAX_INSERT,
            ins_base=base,
            ins_total=total,
            ins_cluster=ins_cluster,
            accepted=accepted,
            run_start=run_start,
            run_len=run_len,
            run_hist=run_hist,
            error_counts=np.stack(
                [subs, other_ins, np.bincount(seg, weights=cover, minlength=n_active)], axis=1
            ).astype(np.int64),
            qual_err=qual_err,
        )

    # ------------------------------------------------------------ homopolymer runs

    def run_table_counts(self, n_active: int) -> np.ndarray:
        """Per active cluster, run-length change counts by run length 1.._MAX_RUN: (n, R, 5)."""
        row = np.minimum(self.run_len, _MAX_RUN) - 1
        cl = self.seg[self.run_start]
        flat = (cl * _MAX_RUN + row)[:, None] * 5 + np.arange(5)
        out = np.bincount(
            flat.ravel(), weights=self.run_hist.ravel(), minlength=n_active * _MAX_RUN * 5
        )
        return out.reshape(n_active, _MAX_RUN, 5).astype(np.int64)

    def hold_disputed_runs(self, log_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Winner and accepted insertions, less the run-length changes the model disputes.

        ``log_p[t - 1, d + 2]``: log-probability that a read shows a run of true
        length t (capped at _MAX_RUN) as t + d. Where the majority's decisions
        change a run's length (by one) to a length that explains the reads'
        copies of the run less well than another of L - 1, L, L + 1, the run is
        left as it is, for :meth:`_Engine._polish` to weigh. A biased channel
        (nanopore) shortens runs far more often than it lengthens them, which a
        plain majority cannot know.
        """
        winner = self.winner.copy()
        accepted = self.accepted.copy()
        base = self.ecodes[self.run_start]
        length = self.run_len
        run_cl = self.seg[self.run_start]
        run_slot = self.soff[run_cl] + self.run_start - self.eoff[run_cl]
        scores = []
        for shift in (-1, 0, 1):
            row = np.clip(length + shift, 1, _MAX_RUN) - 1
            score = np.zeros(len(length))
            for d in range(-2, 3):
                # Reads that showed L + d show t + (d - shift) for a true length t = L + shift.
                score += self.run_hist[:, d + 2] * log_p[row, np.clip(d - shift, -2, 2) + 2]
            scores.append(score)
        scores[0] = np.where(length >= 2, scores[0], -np.inf)
        stacked = np.stack(scores, axis=1)

        # What the majority did to each run: bases dropped, copies of its base inserted.
        dropped = np.bincount(
            np.repeat(np.arange(len(length)), length), weights=winner == _GAP,
            minlength=len(length),
        ).astype(np.int64)
        where = np.minimum(np.searchsorted(run_slot, self.ins_slot), len(run_slot) - 1)
        same_base = (run_slot[where] == self.ins_slot) & (self.ins_base == base[where])
        added = np.bincount(where[same_base & accepted], minlength=len(length))
        majority = np.clip(added - dropped, -1, 1)
        call = np.argmax(stacked, axis=1) - 1
        rows = np.arange(len(length))
        gain = stacked[rows, call + 1] - stacked[rows, majority + 1]
        # Only where both are lengths the model weighs (the majority may remove a
        # single-base run outright, or change a run by two; those stand).
        override = (call != majority) & (gain > 0) & (base < 4)
        override &= (np.abs(added - dropped) <= 1) & np.isfinite(stacked[rows, majority + 1])
        runs = np.flatnonzero(override)
        if len(runs) == 0:
            return winner, accepted

        # Leave those runs as they are: undo the majority's decisions on them.
        in_run = np.repeat(override, length)
        winner[in_run & (winner == _GAP)] = self.ecodes[in_run & (winner == _GAP)]
        accepted[same_base & override[where]] = False
        return winner, accepted

    # ------------------------------------------------------------ polishing

    def reads_of(self, k: int) -> list[tuple[int, bool]]:
        """(read index, aligned as infix) of the voting reads of active cluster ``k``."""
        lo, hi = np.searchsorted(self.read_cl, [k, k + 1])
        return [
            (r, inf)
            for r, inf, v in zip(
                self.read_idx[lo:hi].tolist(),
                self.infix[lo:hi].tolist(),
                self.voting[lo:hi].tolist(),
            )
            if v
        ]

    def contested(
        self, which: np.ndarray, min_reads: np.ndarray
    ) -> dict[int, list[tuple[int, str, int]]]:
        """Edits that a large minority asks for, per active cluster in ``which``.

        ``(index, kind, base)`` with kind ``sub``/``del`` at estimate position
        ``index`` or ``ins`` before it; sorted from the end of the strand to its
        start so that applying one leaves the indexes of the next valid.
        """
        wanted = np.zeros(len(self.elens), dtype=bool)
        wanted[which] = True
        wanted &= min_reads
        # Alternatives to the estimate's own base (the majority's choice may be one
        # the run-length check held back).
        pos = np.arange(len(self.ecodes))
        rest = self.counts.copy()
        rest[pos, self.ecodes] = -1
        rest[:, _N] = -1
        need = np.maximum(1, np.ceil(_CONTEST * self.cover))[:, None]
        p_hit, col_hit = np.nonzero(wanted[self.seg][:, None] & (rest >= need))
        out: dict[int, list[tuple[int, int, str, int]]] = {}
        for p, cl, col in zip(p_hit.tolist(), self.seg[p_hit].tolist(), col_hit.tolist()):
            index = p - int(self.eoff[cl])
            kind = "del" if col == _GAP else "sub"
            out.setdefault(cl, []).append((index, 1, kind, col))
        if len(self.ins_slot):
            slot_need = np.maximum(1, np.ceil(_CONTEST * self.slot_cover[self.ins_slot]))
            ok = (
                (self.ins_rank == 0)
                & (self.ins_base < 4)
                & (self.ins_total >= slot_need)
                & wanted[self.ins_cluster]
            )
            for q, cl, base in zip(
                self.ins_slot[ok].tolist(),
                self.ins_cluster[ok].tolist(),
                self.ins_base[ok].tolist(),
            ):
                out.setdefault(cl, []).append((q - int(self.soff[cl]), 0, "ins", base))
        return {
            cl: [(i, kind, base) for i, _, kind, base in sorted(edits, reverse=True)]
            for cl, edits in out.items()
        }

    def rebuild(self, winner: np.ndarray, accepted: np.ndarray) -> list[str]:
        """The estimates after applying per-position ``winner`` and ``accepted`` insertions."""
        n_pos = len(self.ecodes)
        pos = np.arange(n_pos, dtype=np.int64)
        keep = winner != _GAP
        # Order key: gap j of a cluster (its insertions by rank) comes before position j.
        pos_key = ((self.soff[self.seg] + pos - self.eoff[self.seg]) * 2 + 1) * _MAX_INSERT
        ins_key = self.ins_slot * 2 * _MAX_INSERT + self.ins_rank
        keys = np.concatenate([pos_key[keep], ins_key[accepted]])
        codes = np.concatenate([winner[keep], self.ins_base[accepted]]).astype(np.uint8)
        clusters = np.concatenate([self.seg[keep], self.ins_cluster[accepted]])
        order = np.argsort(keys, kind="stable")
        lengths = np.bincount(clusters, minlength=len(self.elens))
        return decode_flat(codes[order], lengths)


def _clip(ops: list, length: int, penalty: int = 3) -> tuple[int, int, list]:
    """The best-aligned stretch of an infix alignment: ``(first, last, ops)`` (local coords).

    Real short reads are not all clean truncations: some miss a piece of the
    middle, and their infix alignment ends in a stretch of errors. Each aligned
    position scores +1 and each edit ``-penalty``; the highest-scoring stretch
    (Kadane) is kept, its edits renumbered from its first position. An
    alignment with no positive stretch is returned whole (the outlier rule
    then decides).
    """
    best = cur = 0
    best_lo, best_hi, best_ops = 0, length - 1, (0, len(ops))
    cur_lo = prev = first_op = 0
    found = False
    for idx, (tag, i, _j) in enumerate(ops):
        cur += i - prev
        if cur > best:
            best, best_lo, best_hi, best_ops, found = cur, cur_lo, i - 1, (first_op, idx), True
        step = 0 if tag == "insert" else 1
        cur -= penalty
        if cur <= 0:
            cur, cur_lo, first_op = 0, i + step, idx + 1
        prev = i + step
    cur += length - prev
    if cur > best:
        best_lo, best_hi, best_ops, found = cur_lo, length - 1, (first_op, len(ops)), True
    if not found or (best_lo == 0 and best_hi == length - 1):
        return 0, length - 1, ops
    return best_lo, best_hi, [(t, i - best_lo, j) for t, i, j in ops[best_ops[0] : best_ops[1]]]


def _apply_edit(seq: str, index: int, kind: str, base: int) -> str:
    letter = "ACGTN"[base] if base < 5 else ""
    if kind == "ins":
        return seq[:index] + letter + seq[index:]
    if kind == "del":
        return seq[:index] + seq[index + 1 :]
    return seq[:index] + letter + seq[index + 1 :]


@dataclass(frozen=True)
class _CostModel:
    """Costs of alignment edits: negative log-probabilities of the channel's events.

    ``sub``: a substitution; ``ins``: an inserted base unlike its neighbours;
    ``run[t - 1][d + 2]``: a homopolymer run of length t (capped) read d longer
    (a deleted base costs ``run[t - 1][1]``, an inserted copy ``run[t - 1][3]``).
    """

    sub: float
    ins: float
    run: list[list[float]]
    #: Added to the cost of a substitution or insertion at a read base of quality q.
    quality: list[float] | None = None

    def prepare(
        self, reads: list[tuple[int, bool]], seqs: list[str], quals: list[str] | None
    ) -> list[tuple[str, list[float] | None, bool]]:
        """Per read: its sequence, the quality adjustment of each of its bases, infix or not."""
        out = []
        for r, infix in reads:
            adjust = None
            if quals is not None and self.quality is not None:
                table = self.quality
                adjust = [table[min(max(v - 33, 0), _MAX_QUAL)] for v in quals[r].encode()]
            out.append((seqs[r], adjust, infix))
        return out

    def total(
        self, seq: str, reads: list[tuple[str, list[float] | None, bool]], limit: float = math.inf
    ) -> float:
        """Summed cost of the reads' alignments to ``seq`` (global, or infix), see :meth:`prepare`.

        Alignments are the unit-cost optimal ones, re-weighted; stops once ``limit``
        is passed.
        """
        # MAP, not ML: a priori every base is one of four, so each base costs log 4
        # (without it, a longer run that "explains" a few extra copies wins too often).
        total = _LOG4 * len(seq)
        editops = Levenshtein.editops
        for read, adjust, infix in reads:
            if infix:
                s, t = edlib.align(read, seq, mode="HW", task="locations")["locations"][0]
                total += self._cost(editops(seq[s : t + 1], read), seq, read, adjust, s)
            else:
                total += self._cost(editops(seq, read), seq, read, adjust, 0)
            if total >= limit:
                return total
        return total

    def _cost(self, ops, seq: str, read: str, adjust: list[float] | None, shift: int) -> float:
        cost = 0.0
        n = len(seq)
        run = self.run
        for tag, i, j in ops:
            i += shift
            if tag == "delete":
                cost += run[_run_length(seq, i) - 1][1]
                continue
            if tag == "replace":
                cost += self.sub
            else:
                b = read[j]
                if i < n and seq[i] == b:
                    cost += run[_run_length(seq, i) - 1][3]
                elif i > 0 and seq[i - 1] == b:
                    cost += run[_run_length(seq, i - 1) - 1][3]
                else:
                    cost += self.ins
            if adjust is not None:
                cost += adjust[j]
        return cost


def _run_length(seq: str, i: int) -> int:
    """Length (capped at _MAX_RUN) of the homopolymer run of ``seq`` that holds position ``i``."""
    base = seq[i]
    n = len(seq)
    if (i == 0 or seq[i - 1] != base) and (i + 1 == n or seq[i + 1] != base):
        return 1
    lo = i
    while lo > 0 and seq[lo - 1] == base:
        lo -= 1
    hi = i + 1
    while hi < n and seq[hi] == base:
        hi += 1
    return min(hi - lo, _MAX_RUN)


def _encode_bases(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return encode_flat(strings)


def _encode_quals(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return _quality_values(strings)


def _read_values(strings: list[str], reads: np.ndarray, at: np.ndarray, encode) -> np.ndarray:
    """Value (base code or quality) at position ``at`` of read ``reads``, one per entry."""
    if len(reads) == 0:
        return np.zeros(0, dtype=np.int64)
    unique, inverse = np.unique(reads, return_inverse=True)
    values, lengths = encode([strings[r] for r in unique.tolist()])
    # A deletion at the end of a read points one past it; its base is never used.
    at = np.minimum(at, lengths[inverse] - 1)
    return values[offsets(lengths)[inverse] + at].astype(np.int64)
