"""The rescue's alignments as tasks on a runner: profiles of candidate clusters, then scores.

The rescue (:mod:`dnaembed.cluster.rescue`) chooses each read's candidate clusters in
this process (the choice draws from a seeded generator, in read order), and decides
here too; what lies between, the consensus of every candidate cluster and the
alignments of every read against its candidates' consensus, is independent work per
cluster and per read. It goes to the runner in tasks of a fixed size
(:data:`PROFILES_PER_TASK` clusters, :data:`READS_PER_TASK` reads), so the tasks depend
on the reads alone and the result on nothing that runs them. At 10^6 reads it was
~7 s of the ~17 s rescue, in this process while the workers waited. The alignments
hold the interpreter lock, so a runner whose tasks would share this process
(:func:`dnaembed.execute.runs_here`) gets them here, in one pass, profiles built
on demand: the same result, without packing them into tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.cluster.profiles import ClusterProfiles, profile_of
from dnaembed.execute import Runner, runs_here
from dnaembed.io.strings import pack_strings, strings_of, unpack_strings

#: Candidate clusters whose consensus one task builds.
PROFILES_PER_TASK = 2_048
#: Reads one task aligns against their candidates.
READS_PER_TASK = 512


@dataclass
class StringGroups:
    """Lists of strings as arrays: all strings packed, and how many belong to each list."""

    data: np.ndarray
    lengths: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, lists: Sequence[Sequence[str]]) -> StringGroups:
        """``lists`` packed: their strings back to back, and how many each list holds."""
        data, lengths = pack_strings([s for strings in lists for s in strings])
        return cls(data, lengths, np.fromiter(map(len, lists), np.int64, len(lists)))

    def lists(self) -> list[list[str]]:
        """The lists of strings back (:meth:`of`'s argument, as lists)."""
        strings = unpack_strings(self.data, self.lengths)
        ends = np.cumsum(self.counts).tolist()
        return [strings[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def build_profiles(task: StringGroups) -> StringGroups:
    """:func:`~dnaembed.cluster.profiles.profile_of` of each cluster's oriented reads."""
    return StringGroups.of([profile_of(reads) for reads in task.lists()])


def build_missing_profiles(profiles: ClusterProfiles, clusters: Iterable[int],
                           runner: Runner | None) -> None:
    """Build (on ``runner``) the profiles of ``clusters`` not yet known to ``profiles``;
    left to be built on demand where the runner's tasks would share this process, or
    where the profiles are the reads themselves (no consensus to build)."""
    if runs_here(runner) or not profiles.consensus:
        return
    missing = profiles.missing(clusters)
    keys, reads = list(missing), list(missing.values())
    chunks = (StringGroups.of(reads[i : i + PROFILES_PER_TASK])
              for i in range(0, len(keys), PROFILES_PER_TASK))
    at = 0
    for built in runner.map(build_profiles, chunks, desc="cluster profiles", unit="task"):
        for profile in built.lists():
            profiles.add(keys[at], profile)
            at += 1


@dataclass
class ScoreTask:
    """Reads (and their reverse complements, when both orientations are clustered), each
    with its candidate clusters (``clusters[starts[i]:starts[i + 1]]``) and its alignment
    bound; the candidates' profiles (``profiles``, one list per cluster of ``ids``)."""

    queries: np.ndarray
    rc_queries: np.ndarray | None
    lengths: np.ndarray
    starts: np.ndarray
    clusters: np.ndarray
    bounds: np.ndarray
    ids: np.ndarray
    profiles: StringGroups


@dataclass
class ScoreResult:
    """Per read: its best cluster, that distance and orientation, the runner-up's distance."""

    best: np.ndarray
    flip: np.ndarray
    cluster: np.ndarray
    runner_up: np.ndarray


def score_reads(task: ScoreTask) -> ScoreResult:
    """Each read's candidates scored (:func:`score_clusters`): the best two."""
    queries = unpack_strings(task.queries, task.lengths)
    rcs = unpack_strings(task.rc_queries, task.lengths) if task.rc_queries is not None else None
    of = dict(zip(task.ids.tolist(), task.profiles.lists())).__getitem__
    starts, clusters = task.starts.tolist(), task.clusters.tolist()
    return _best_two(score_clusters(query, rcs[i] if rcs is not None else None,
                                    clusters[starts[i] : starts[i + 1]], of, bound)
                     for i, (query, bound) in enumerate(zip(queries, task.bounds.tolist())))


def _best_two(scored_reads) -> ScoreResult:
    """:class:`ScoreResult` of each read's scored candidates (best first, two at least)."""
    best = [(s[0][0], s[0][1], s[0][2], s[1][0]) for s in scored_reads]
    out = np.array(best, dtype=np.int64).reshape(-1, 4).T
    return ScoreResult(out[0], out[1].astype(np.int8), out[2], out[3])


def score_in_tasks(seqs: Sequence[str], rc_seqs: Sequence[str] | None, reads: list[int],
                   clusters: list[list[int]], bounds: list[int], profiles: ClusterProfiles,
                   runner: Runner | None) -> ScoreResult:
    """The best two of each read's clusters (at least two each), in tasks on ``runner``, or
    here where its tasks would share this process: the alignments hold the interpreter
    lock, so threads would not run them side by side."""
    if runs_here(runner):
        return _score_here(seqs, rc_seqs, reads, clusters, bounds, profiles)

    def tasks():
        for start in range(0, len(reads), READS_PER_TASK):
            rows = np.asarray(reads[start : start + READS_PER_TASK], dtype=np.int64)
            chosen = clusters[start : start + READS_PER_TASK]
            data, lengths = pack_strings(strings_of(seqs, rows))
            rc = pack_strings(strings_of(rc_seqs, rows))[0] if rc_seqs is not None else None
            ids = sorted({c for cs in chosen for c in cs})
            yield ScoreTask(data, rc, lengths,
                            np.cumsum([0, *map(len, chosen)], dtype=np.int64),
                            np.fromiter((c for cs in chosen for c in cs), np.int64),
                            np.asarray(bounds[start : start + READS_PER_TASK], np.int64),
                            np.asarray(ids, np.int64), StringGroups.of([profiles(c) for c in ids]))

    parts = list(runner.map(score_reads, tasks(), desc="rescue alignments", unit="task"))
    if not parts:
        return _best_two([])
    return ScoreResult(*(np.concatenate([getattr(p, f) for p in parts])
                         for f in ("best", "flip", "cluster", "runner_up")))


def _score_here(seqs, rc_seqs, reads, clusters, bounds, profiles) -> ScoreResult:
    return _best_two(score_clusters(seqs[row], rc_seqs[row] if rc_seqs is not None else None,
                                    clusters[i], profiles, bounds[i])
                     for i, row in enumerate(reads))


def score_clusters(query: str, rc_query: str | None, clusters: list[int],
                   profiles: Callable[[int], list[str]], bound: int
                   ) -> list[tuple[int, int, int]]:
    """(best semi-global distance to the cluster's profile, orientation, cluster), best first.

    Both orientations of the read are tried whenever both are clustered: the orientation
    that won the k-mer vote is wrong often enough (votes of a few k-mers) to cost reads.
    """
    import edlib

    oriented = (query,) if rc_query is None else (query, rc_query)
    scored = []
    for c in clusters:
        best = (bound + 1, 0)
        for target in profiles(c):
            for f, read in enumerate(oriented):
                # Profiles are in the cluster's orientation: so is the query, flipped or not.
                d = edlib.align(read, target, mode="HW", task="distance",
                                k=min(bound, best[0] - 1))["editDistance"]
                if 0 <= d < best[0]:
                    best = (d, f)
        scored.append((best[0], best[1], c))
    scored.sort()
    return scored
