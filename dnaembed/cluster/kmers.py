"""Shared k-mers between reads and cluster representatives (rescue candidates).

A read that lost its end is far from its strand in global edit distance, and so
in the embedding, which approximates it; but it shares most of its k-mers with
its strand. :class:`KmerIndex` holds the k-mers of a set of target sequences,
both orientations, and returns for each query the targets that share the most
k-mers with it. K-mers found in many targets (primers and adapters shared by
every strand) carry no information and are left out: "many" is at least
:data:`MAX_TARGETS_PER_KMER`, and more when there are so many targets that a k-mer
is held by that many by chance (:func:`chance_cut`).

Why this shape: the rescue asks about tens of thousands of reads against every
cluster's representative, and both grow with the input. Indexing the *queries*
(a table over all 4^k k-mers) and streaming the targets through it block by
block costs two passes over the targets whatever the number of queries (one to
find the common k-mers, one to vote); a target's votes are complete within its
block, so each block's best targets merge into a running top list. An index of
the targets, searched once per block of queries, would read every target once
per block, which grows as the square of the input.

The second orientation is the queries' (each query and its reverse complement
share a k-mer with a target as often as the query and the reversed target do):
the rescue's targets, several reads per cluster, outnumber its queries. The first
pass counts only the k-mers that the queries hold and keeps them, up to
:data:`KEPT_BYTES`, for the vote pass. With ``groups`` (the rescue: a few central
reads per cluster), blocks are cut between groups, so a group's votes too are
complete within its block, and a k-mer counts once per group.

On a runner whose tasks share this process (the one-process pipeline's threads), the
blocks are coded, counted and voted on its threads, all reading the one table of the
queries; this thread reads the targets and merges the blocks' results in order, so the
result is the one-thread search's. The rescue's targets come as blocks of the read
store (``coded_block``), decoded to base codes by the threads: as strings, made here,
they were most of this thread's share (the rescue of a run of 10^6 reads, replayed
three times on two threads, with each read's k-mers found from the lengths too: 5.4-5.6 s
against 5.9-6.4, the same labels). A search as at 3 x 10^6 reads (300,000 clusters of
three reads, 22,000 queries, 12-mers; ``scripts/check_kmer_cut.py --threads 1 2``) took
8.6 s on two threads against 12.7 s on one. (:mod:`.kmer_tasks` sends the search to
other processes.)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from dnaembed.arrays import rank_in_groups, sorted_unique
from dnaembed.encoding import encode_flat, kmer_codes, kmer_codes_of, reverse_complement_codes
from dnaembed.execute import Runner, runs_here
from dnaembed.io.strings import strings_of

#: k-mer length (the rescue's, :data:`dnaembed.cluster.rescue_rule.RESCUE_K`, says why 11).
K = 11
#: Longest k: the tables hold entries per possible k-mer (the queries' offsets and the
#: targets' counts, 4 bytes each, and three flags: ~190 MB a search at 12, ~50 at 11).
MAX_K = 12

#: Query sides (a query, or its reverse complement) expected to hold a given k-mer by
#: chance, at most (:func:`kmer_length`).
CHANCE_SIDES = 0.75

#: A k-mer in more targets than this is uninformative (shared primers) and ignored,
#: unless chance alone puts it in more (:func:`chance_cut`).
MAX_TARGETS_PER_KMER = 16
#: Standard deviations above the chance level of targets per k-mer that still count as
#: chance (:func:`chance_cut`).
CHANCE_SIGMAS = 4.0

#: Targets, and queries, whose k-mers are held at a time: a search's memory is a block's,
#: whatever the number of targets; each block of queries reads the targets once more.
TARGET_BLOCK = 2_048
QUERY_BLOCK = 32_768
#: Bytes of the targets' k-mers (those the queries hold) that the pass finding the common
#: k-mers keeps for the vote passes, which then read only the targets beyond them again.
KEPT_BYTES = 64 << 20


def chance_cut(held_by: np.ndarray, floor: int = MAX_TARGETS_PER_KMER) -> int:
    """Targets per k-mer above which a k-mer counts as shared (a primer), not chance.

    ``held_by``: the number of targets holding each k-mer of the queries. Among many
    targets, a k-mer is held by some by chance: at 300,000 clusters (3 x 10^6 reads)
    an 11-mer, in either orientation, is held by about 44, and a fixed cut of 16
    dropped nearly every k-mer of a read's true cluster with them
    (``scripts/check_kmer_cut.py``). Holders by chance are about
    Poisson; their level is the median (shared primers are few of the k-mers, so it
    does not see them), and the cut is :data:`CHANCE_SIGMAS` standard deviations
    above it, never below ``floor`` (small inputs keep the fixed cut).
    """
    if len(held_by) == 0:
        return floor
    level = float(np.median(held_by))
    return max(floor, math.ceil(level + CHANCE_SIGMAS * math.sqrt(level)))


def kmer_length(queries: int, kmers_per_query: float, base: int, *, both: bool) -> int:
    """The k-mer length for a search of ``queries`` queries: ``base``, or longer (up to
    :data:`MAX_K`) while more than :data:`CHANCE_SIDES` query sides would hold a given
    k-mer by chance.

    Why: a target's k-mer is looked up, and voted with, for every query side that holds
    it, so with a fixed k the vote pass costs queries x targets, both of which grow with
    the input. At 3 x 10^6 reads (22,000 queries of ~140 11-mers, both orientations)
    each 11-mer is held by ~1.5 query sides, so ~77% of the targets' 11-mers are voted
    with (Poisson: 1 - e^-1.5), against ~38% at 10^6 reads; one base more divides chance
    holders by four and holds that share where the input grows (4x the queries, one more
    base). A longer k-mer also survives a read's errors less often: the base is the
    length a read's true cluster needs (the rescue's notes), and small inputs keep it.
    """
    sides = queries * (2 if both else 1) * max(kmers_per_query, 0.0)
    k = base
    while k < MAX_K and sides > CHANCE_SIDES * 4**k:
        k += 1
    return k


def _starts_by_kmer(values: np.ndarray, k: int) -> np.ndarray:
    """Where each k-mer's entries start in sorted ``values`` (4^k + 1 offsets, int32).

    Counted in slices of the k-mer space: ``np.bincount`` over all 4^k k-mers at once
    would hold an int64 count per k-mer (134 MB at k = 12) beside the table."""
    if len(values) >= 2**31:
        raise ValueError("too many k-mer entries for an int32 table")
    first = np.zeros(4**k + 1, dtype=np.int32)
    step = 1 << 20
    bounds = np.searchsorted(values, np.arange(0, 4**k + step, step))
    for i, code in enumerate(range(0, 4**k, step)):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        counts = np.bincount(values[lo:hi] - code, minlength=min(step, 4**k - code))
        np.cumsum(counts, out=first[code + 1 : code + 1 + len(counts)])
        first[code + 1 : code + 1 + len(counts)] += lo
    return first


class KmerIndex:
    """k-mers of target sequences (matched in both orientations when ``both``).

    ``targets`` may be any sequence of strings, read block by block: memory
    does not grow with the number of targets. ``groups``, when given, numbers the
    group of each target (several reads of one cluster), non-decreasing so that a
    group's targets are contiguous: a search then ranks groups, a k-mer counting
    once per group however many of its reads hold it, and ``max_targets`` counts
    groups. ``block``: targets held at a time (default :data:`TARGET_BLOCK`; a block
    never splits a group). ``max_targets``: a fixed cut on the targets per k-mer;
    by default :func:`chance_cut` of the queries' k-mers.
    """

    def __init__(self, targets: Sequence[str], *, both: bool, k: int = K,
                 max_targets: int | None = None, groups: np.ndarray | None = None,
                 block: int | None = None) -> None:
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k-mer length must be 1..{MAX_K}, not {k}")
        if groups is not None:
            groups = np.asarray(groups, dtype=np.int64)
            if len(groups) != len(targets):
                raise ValueError(f"{len(groups)} group numbers for {len(targets)} targets")
            if len(groups) and (groups[0] < 0 or (np.diff(groups) < 0).any()):
                raise ValueError("group numbers must be non-negative and non-decreasing")
        self.k = k
        self.targets = targets
        self.both = both
        self.max_targets = max_targets
        #: The cut on targets per k-mer (set by :meth:`common` when not fixed).
        self.cut = MAX_TARGETS_PER_KMER if max_targets is None else max_targets
        self.groups = groups
        self.block = block

    def ranges(self, size: int | None = None) -> Iterator[tuple[int, int]]:
        """(first, end) target of each block: about ``block`` targets (or ``size``), cut
        between groups."""
        n, start = len(self.targets), 0
        size = max(size or (TARGET_BLOCK if self.block is None else self.block), 1)
        while start < n:
            end = min(start + size, n)
            if self.groups is not None and end < n and self.groups[end] == self.groups[end - 1]:
                # Back to the start of the group the cut would split; forward to its end when
                # that group alone is larger than a block.
                g = self.groups[end]
                end = int(np.searchsorted(self.groups, g, side="left"))
                if end <= start:
                    end = int(np.searchsorted(self.groups, g, side="right"))
            yield start, end
            start = end

    def _read_blocks(self, skip: int = 0):
        """Each block of targets (:class:`_TargetBlock`), from the ``skip``-th on: read by
        the calling thread alone (a spilled store is read by one thread)."""
        for start, end in itertools.islice(self.ranges(), skip, None):
            yield _TargetBlock(start, end, _block_of(self.targets, np.arange(start, end)))

    def _coded(self, block: _TargetBlock):
        """(first owner, owners m, k-mer codes, owner) of a block of targets, one entry per
        k-mer of a target as read (repeats included; the queries carry the other
        orientation). Owners are the targets, or with ``groups`` the groups (numbered
        from the block's first)."""
        start, end = block.start, block.end
        reads = block.reads
        values, owner = kmer_codes_of(*(encode_flat(reads) if isinstance(reads, list)
                                        else reads.codes()), self.k)
        m, first = end - start, start
        if self.groups is not None:
            first = int(self.groups[start])
            local = self.groups[start:end] - first
            m = int(local[-1]) + 1
            owner = local[owner]
        return first, m, values, owner

    def common(self, wanted: np.ndarray | None = None, kept: list | None = None,
               runner: Runner | None = None) -> np.ndarray:
        """Per possible k-mer: True if more than ``max_targets`` targets hold it (either
        orientation counts once; with ``groups``, groups), in one pass over the targets.
        Without ``max_targets``, more than :func:`chance_cut` of the k-mers counted.

        ``wanted`` (per possible k-mer, closed under reverse complement when ``both``):
        only those k-mers are counted, the others reported False (a search needs only its
        queries'). ``kept``: receives ``(first owner, m, k-mer * m + owner)`` of the first
        blocks, up to :data:`KEPT_BYTES`, for the vote passes. ``runner``: see
        :meth:`candidates`.
        """
        return self.common_of(self.held_by(wanted, kept, runner), wanted)

    def held_by(self, wanted: np.ndarray | None = None, kept: list | None = None,
                runner: Runner | None = None) -> np.ndarray:
        """Per possible k-mer (canonical with ``both``): the targets (or groups) holding it,
        counting the ``wanted`` ones only (see :meth:`common`). Counts of disjoint sets of
        targets add up: the search in tasks (:mod:`.kmer_tasks`) sums its ranges'.
        ``runner``: one whose tasks share this process counts blocks on its threads."""
        held_by = np.zeros(4**self.k, dtype=np.int32)
        budget = KEPT_BYTES if kept is not None else -1
        count = functools.partial(self._count_block, wanted)
        for first, m, key, kmer, n_targets in _in_order(runner, count, self._read_blocks(),
                                                        "counting k-mers"):
            if 0 <= key.nbytes <= budget:
                kept.append((first, m, key))
                budget -= key.nbytes
            else:
                budget = -1  # kept blocks stay a prefix of the targets
            held_by[kmer] += n_targets
        return held_by

    def _count_block(self, wanted: np.ndarray | None, block: _TargetBlock):
        """One block of :meth:`held_by`: ``(first owner, m, k-mer * m + owner, k-mers
        counted, owners holding each)``."""
        first, m, values, owner = self._coded(block)
        if wanted is not None:
            keep = wanted[values]
            values, owner = values[keep], owner[keep]
        key = sorted_unique(values * m + owner)
        values = key // m
        if self.both:
            # Counted by canonical k-mer (the lesser of it and its reverse complement):
            # a target holding either counts once.
            canonical = np.minimum(values, reverse_complement_codes(values, self.k))
            values = sorted_unique(canonical * m + key % m) // m
        kmer, n_targets = sorted_unique(values, return_counts=True)
        return first, m, key, kmer, n_targets.astype(np.int32)

    def common_of(self, held_by: np.ndarray, wanted: np.ndarray | None = None) -> np.ndarray:
        """:meth:`common` from the counts of :meth:`held_by` (sets :attr:`cut`)."""
        if self.max_targets is None:
            self.cut = chance_cut(held_by[self._counted(wanted, held_by)])
        common = held_by > self.cut
        if self.both:
            canonical = np.flatnonzero(common)  # few: shared primers
            common[reverse_complement_codes(canonical, self.k)] = True
        return common

    def _counted(self, wanted: np.ndarray | None, held_by: np.ndarray) -> np.ndarray:
        """The k-mers whose holders :meth:`common` counted: the wanted ones (or, without
        ``wanted``, those held), by canonical k-mer with ``both``."""
        counted = held_by > 0 if wanted is None else wanted
        if self.both:
            codes = np.flatnonzero(counted)
            return codes[codes <= reverse_complement_codes(codes, self.k)]
        return counted

    def wanted(self, queries: Sequence[str]) -> np.ndarray:
        """Per possible k-mer: whether a query holds it (or, with ``both``, its reverse)."""
        wanted = np.zeros(4**self.k, dtype=bool)
        for start in range(0, len(queries), QUERY_BLOCK):
            values, _ = kmer_codes(list(queries[start : start + QUERY_BLOCK]), self.k)
            wanted[values] = True
            if self.both:
                wanted[reverse_complement_codes(values, self.k)] = True
        return wanted

    def candidates(self, queries: Sequence[str], top: int, *, min_votes: int = 1,
                   runner: Runner | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``top`` targets sharing the most k-mers with each query.

        Returns ``(targets, flips)`` arrays of shape ``(len(queries), top)``, -1
        where there are fewer (group numbers with ``groups``) sharing at least
        ``min_votes`` k-mers; ``flip`` 1 means the query matches the target's reverse
        complement. Ties: the lower number first. ``runner``: one whose tasks share this
        process (:func:`dnaembed.execute.runs_here`) codes, counts and votes blocks of
        targets on its threads, this thread reading them and merging in order (the
        same result); None: all here.
        """
        if len(queries) == 0 or len(self.targets) == 0:
            empty = TopTargets(len(queries), top)
            return empty.target, empty.flip
        kept: list = []
        common = self.common(self.wanted(queries), kept, runner)
        return self.top_targets(queries, top, common, kept, runner).result(min_votes)

    def top_targets(self, queries: Sequence[str], top: int, common: np.ndarray,
                    kept: Sequence = (), runner: Runner | None = None) -> TopTargets:
        """Each query's ``top`` targets by shared k-mers, ``common`` ones left out (the vote
        pass of :meth:`candidates`; ``kept``: the blocks :meth:`common` kept)."""
        out = TopTargets(len(queries), top)
        for start in range(0, len(queries), QUERY_BLOCK):
            block = list(queries[start : start + QUERY_BLOCK])
            best = TopTargets(len(block), top)
            table = _QueryTable(block, self.k, common, self.both)
            blocks = itertools.chain(kept, self._read_blocks(skip=len(kept)))
            vote = functools.partial(self._vote_block, table)
            for q, owner, votes, size, first in _in_order(runner, vote, _with_floor(blocks, best),
                                                          "k-mer votes"):
                best.merge(q, owner, votes, size, first)
            out.put(slice(start, start + len(block)), best)
        return out

    def _vote_block(self, table: _QueryTable, task):
        """One block's votes (:meth:`_QueryTable.votes`) above each query's floor, and the
        block's ``(m, first owner)``; the block: kept ``(first, m, key)``, or targets to
        code."""
        block, floor = task
        if isinstance(block, _TargetBlock):
            first, size, values, owner = self._coded(block)
            q, owner, votes = table.votes(values, owner, size)
        else:
            first, size, key = block
            q, owner, votes = table.votes(key // size, key % size, size, distinct=True)
        enters = votes > floor[q]
        return q[enters], owner[enters], votes[enters], size, first


def _with_floor(blocks: Iterable, best: TopTargets) -> Iterator:
    """Each block with the votes of each query's last place as the block is handed out:
    a block's votes at or below it cannot enter (places only gain votes), so a thread
    drops them before the merge, which checks again against the places as they are then.
    Why: most pairs share a k-mer or two by chance, and filtering them was most of the
    merge, which runs on this thread alone."""
    for block in blocks:
        yield block, best.votes[:, -1].copy()


class _TargetBlock:
    """Targets ``start:end`` (:meth:`KmerIndex._read_blocks`): strings, or a block of a
    read store to code (:func:`_block_of`). Not a tuple: a runner's traffic count would
    walk its strings one by one."""

    __slots__ = ("start", "end", "reads")

    def __init__(self, start: int, end: int, reads) -> None:
        self.start, self.end, self.reads = start, end, reads


def _block_of(targets: Sequence[str], rows: np.ndarray):
    """Targets ``rows`` as a block's thread codes them: the targets' ``coded_block``
    where they have one (an object whose ``codes()`` gives what
    :func:`~dnaembed.encoding.encode_flat` would; the rescue's reads, decoded by the
    thread and not by this one, which hands out every block), else strings."""
    coded_block = getattr(targets, "coded_block", None)
    return coded_block(rows) if coded_block is not None else strings_of(targets, rows)


def _in_order(runner, fn: Callable, blocks: Iterable, desc: str) -> Iterator:
    """``fn(block)`` for each block, in order: on ``runner``'s threads, when its tasks share
    this process, else here.

    Why threads: a block's coding, counting and voting are numpy passes over ~300,000
    k-mers, which release the interpreter lock; the blocks are read and the results
    merged by this thread, in order, so the result is the one-pass search's.
    """
    if runner is None or not runs_here(runner) or getattr(runner, "workers", 1) < 2:
        return map(fn, blocks)
    return runner.map(fn, blocks, desc=desc, unit="block")


class _QueryTable:
    """The queries' k-mers by k-mer: a table over all 4^k k-mers of where each one's
    query sides start in ``side`` (a k-mer counts once per side; common k-mers left out).

    With ``both``, query ``i``'s reverse complement is side ``m + i``: matching the
    reverse of a query against targets as read counts what matching the query against
    reversed targets would (the same k-mers, reversed), and costs a second orientation
    of the queries rather than of the targets, of which there are usually more.
    """

    def __init__(self, queries: list[str], k: int, common: np.ndarray, both: bool) -> None:
        self.m = m = len(queries)
        values, side = kmer_codes(queries, k)
        if both:
            values = np.concatenate([values, reverse_complement_codes(values, k)])
            side = np.concatenate([side, side + m])
        sides = 2 * m if both else m
        key = sorted_unique(values * sides + side)
        values, side = key // sides, key % sides
        keep = ~common[values]
        values, self.side = values[keep], side[keep].astype(np.int32)
        self.first = _starts_by_kmer(values, k)
        # Whether a query side holds each k-mer, 1 byte per k-mer: most of a target's
        # k-mers are looked up only to be dropped, and this table, 8x smaller than
        # ``first``, misses the cache less (300,000 synthetic clusters, 22,000 queries:
        # the search took 34.5 s with it, 41.7 s without).
        self.held = self.first[1:] > self.first[:-1]

    def votes(self, values: np.ndarray, owner: np.ndarray, m: int, *, distinct: bool = False
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, owner orientation, votes) for every query sharing k-mers with an owner
        of this block (``values``/``owner`` as :meth:`KmerIndex._coded` gives them, or
        ``distinct`` pairs, ``m`` owners); owner orientation ``m + i``: the query matches
        owner ``i`` reversed."""
        found = self.held[values]
        values, owner = values[found], owner[found]
        if not distinct:
            # A k-mer counts once per owner: deduplicated after the lookup, which drops most.
            key = sorted_unique(values * m + owner)
            values, owner = key // m, key % m
        lo = self.first[values].astype(np.int64)
        hits = self.first[values + 1] - lo
        pos = np.repeat(lo - np.cumsum(hits) + hits, hits) + np.arange(int(hits.sum()))
        combo, votes = sorted_unique(self.side[pos].astype(np.int64) * m
                                     + np.repeat(owner, hits), return_counts=True)
        side, owner = combo // m, combo % m
        return side % self.m, owner + m * (side >= self.m), votes


class TopTargets:
    """Each query's ``top`` targets by votes so far (ties: lower target number)."""

    def __init__(self, m: int, top: int) -> None:
        self.top = top
        self.target = np.full((m, top), -1, dtype=np.int64)
        self.flip = np.zeros((m, top), dtype=np.int8)
        self.votes = np.zeros((m, top), dtype=np.int64)

    def merge(self, q: np.ndarray, owner: np.ndarray, votes: np.ndarray, m: int,
              first_target: int) -> None:
        """Add one block's votes (:meth:`_QueryTable.votes`; its ``m`` targets numbered
        from ``first_target``, after every target merged before)."""
        # Later blocks hold higher target numbers, which lose ties: only votes above a
        # query's last place can enter (most pairs share one k-mer by chance).
        enters = votes > self.votes[q, -1]
        q, owner, votes = q[enters], owner[enters], votes[enters]
        if len(q) == 0:
            return
        t, f = owner % m + first_target, (owner >= m).astype(np.int8)
        rows = sorted_unique(q)
        held = self.votes[rows] > 0
        q = np.concatenate([np.repeat(rows, held.sum(axis=1)), q])
        t = np.concatenate([self.target[rows][held], t])
        f = np.concatenate([self.flip[rows][held], f])
        votes = np.concatenate([self.votes[rows][held], votes])
        # A target once per query, in its better orientation (more votes; ties: as read).
        order = np.lexsort((f, -votes, t, q))
        q, t, f, votes = q[order], t[order], f[order], votes[order]
        once = np.ones(len(q), dtype=bool)
        once[1:] = (q[1:] != q[:-1]) | (t[1:] != t[:-1])
        q, t, f, votes = q[once], t[once], f[once], votes[once]
        order = np.lexsort((t, -votes, q))
        q, t, f, votes = q[order], t[order], f[order], votes[order]
        rank = rank_in_groups(q)
        keep = rank < self.top
        q, t, f, votes, rank = q[keep], t[keep], f[keep], votes[keep], rank[keep]
        self.target[rows], self.flip[rows], self.votes[rows] = -1, 0, 0
        self.target[q, rank], self.flip[q, rank], self.votes[q, rank] = t, f, votes

    def put(self, rows: slice, other: TopTargets) -> None:
        """Queries ``rows`` are ``other``'s (a block of the queries)."""
        self.target[rows], self.flip[rows], self.votes[rows] = other.target, other.flip, \
            other.votes

    def merge_top(self, other: TopTargets, first_target: int, m: int) -> None:
        """Add another top list over ``m`` targets numbered from ``first_target`` (after
        every target merged before): the top of a union of disjoint sets of targets is the
        top of their tops."""
        q, rank = np.nonzero(other.votes > 0)
        owner = other.target[q, rank] + m * other.flip[q, rank].astype(np.int64)
        self.merge(q, owner, other.votes[q, rank], m, first_target)

    def result(self, min_votes: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(targets, flips); -1 (and 0) where a place has fewer than ``min_votes`` votes."""
        target, flip = self.target.copy(), self.flip.copy()
        few = self.votes < min_votes  # the last places of a query's list
        target[few], flip[few] = -1, 0
        return target, flip
