"""The reads' votes on their estimates, and the majority's decisions (step 3 of :mod:`.engine`).

Per estimate position a base or a gap, per gap between positions inserted bases
(:func:`count_votes`, from :class:`~dnaembed.consensus.align.Alignments`). Indels
in a homopolymer run are first moved to the run's left end, so reads that lost
"one A of AAAA" vote for the same position. Reads whose edits exceed
:data:`OUTLIER` of their aligned span do not vote. A position takes the
plurality (ties keep the estimate); an insertion needs a strict majority of the
reads covering it. All clusters of a chunk are counted together with numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.arrays import rank_in_groups
from dnaembed.consensus.align import Alignments, Estimates
from dnaembed.consensus.inputs import MAX_QUAL, quality_values
from dnaembed.encoding import decode_flat, encode_flat, offsets, segment_ids

#: Vote columns: A, C, G, T, N (codes 0..4), then "no base here".
N = 4


GAP = 5


COLUMNS = 6


#: A read whose edit distance to the estimate exceeds this fraction of its span does not vote.
OUTLIER = 0.3


#: At most this many bases are inserted into one gap of the estimate per iteration.
MAX_INSERT = 8


@dataclass(frozen=True)
class Insertions:
    """Candidate insertions, one row per slot and rank: where, which base, how many reads."""

    slot: np.ndarray
    #: Order of the base within its slot (0: next to the slot's left position).
    rank: np.ndarray
    base: np.ndarray
    #: Reads that insert a base at this slot and rank.
    total: np.ndarray
    #: Active cluster of the slot.
    cluster: np.ndarray
    #: Inserted by the majority (a strict majority of the reads covering the slot).
    accepted: np.ndarray


@dataclass(frozen=True)
class Runs:
    """Homopolymer runs of the estimates, and how the reads read them."""

    start: np.ndarray
    length: np.ndarray
    #: Per run: covering reads whose copy of the run is 2 shorter ... 2 longer.
    hist: np.ndarray


@dataclass(frozen=True)
class Votes:
    """Votes of the reads of some clusters on their estimates (flat over the clusters)."""

    alignments: Alignments
    #: Reads that align well enough to vote.
    voting: np.ndarray
    #: (positions, 6): votes for A C G T N gap.
    counts: np.ndarray
    #: Reads covering each position, and each gap (slot).
    cover: np.ndarray
    slot_cover: np.ndarray
    #: The column each position takes.
    winner: np.ndarray
    insertions: Insertions
    runs: Runs
    #: Per active cluster: substitutions, unlike-neighbour insertions, positions read.
    error_counts: np.ndarray
    #: Per active cluster: qualities of the substituted and inserted read bases (or None).
    qual_err: np.ndarray | None

    @property
    def estimates(self) -> Estimates:
        """The estimates the reads were aligned to (the alignments')."""
        return self.alignments.estimates

    def reads_of(self, k: int) -> list[tuple[int, bool]]:
        """(read index, aligned as infix) of the voting reads of active cluster ``k``."""
        al = self.alignments
        lo, hi = np.searchsorted(al.read_cl, [k, k + 1])
        return [
            (r, inf)
            for r, inf, v in zip(
                al.read_idx[lo:hi].tolist(),
                al.infix[lo:hi].tolist(),
                self.voting[lo:hi].tolist(),
            )
            if v
        ]

    def rebuild(self, winner: np.ndarray, accepted: np.ndarray) -> list[str]:
        """The estimates after applying per-position ``winner`` and ``accepted`` insertions."""
        est, ins = self.estimates, self.insertions
        n_pos = len(est.codes)
        pos = np.arange(n_pos, dtype=np.int64)
        keep = winner != GAP
        # Order key: gap j of a cluster (its insertions by rank) comes before position j.
        pos_key = ((est.slot_offsets[est.seg] + pos - est.offsets[est.seg]) * 2 + 1) * MAX_INSERT
        ins_key = ins.slot * 2 * MAX_INSERT + ins.rank
        keys = np.concatenate([pos_key[keep], ins_key[accepted]])
        codes = np.concatenate([winner[keep], ins.base[accepted]]).astype(np.uint8)
        clusters = np.concatenate([est.seg[keep], ins.cluster[accepted]])
        order = np.argsort(keys, kind="stable")
        lengths = np.bincount(clusters, minlength=len(est.lengths))
        return decode_flat(codes[order], lengths)


@dataclass(frozen=True)
class _Edits:
    """The voting reads' edits as arrays: estimate positions (``sp``), read positions (``dp``)."""

    tag: np.ndarray  # first letter of the edit's tag: r(eplace), d(elete), i(nsert)
    sp: np.ndarray
    dp: np.ndarray
    op_read: np.ndarray
    op_cl: np.ndarray
    #: The read's base at ``dp`` (a code 0..4).
    read_codes: np.ndarray


def count_votes(alignments: Alignments, seqs: list[str], quals: list[str] | None) -> Votes:
    """The votes of the aligned reads (``seqs``, ``quals``: the chunk's reads, oriented)."""
    al, est = alignments, alignments.estimates
    n_active, n_pos = len(est.lengths), len(est.codes)
    pos = np.arange(n_pos, dtype=np.int64)
    # Reads that align badly even over their own span (a large internal deletion,
    # a chimera, a stray read) do not vote.
    voting = al.n_ops <= OUTLIER * (al.span_end - al.span_start + 1)
    cover, slot_cover = _coverage(al, voting)
    counts = np.zeros((n_pos, COLUMNS), dtype=np.int64)
    counts[pos, est.codes] = cover
    run_start, run_len, run_of, start_of = homopolymer_runs(est)

    empty = np.zeros(0, dtype=np.int64)
    ins_key, ins_b = empty, empty
    run_key, run_step = empty, empty
    subs = other_ins = np.zeros(n_active, dtype=np.int64)
    qual_err = None if quals is None else np.zeros((n_active, MAX_QUAL + 1), np.int64)
    if len(al.op_tag):
        edits = _edit_arrays(al, voting, seqs)
        if quals is not None:
            qual_err = _error_qualities(al, edits, quals)
        is_sub = edits.tag == ord("r")
        dpos, del_read = _count_changes(counts, edits, est, start_of)
        ins_key, ins_b, ins_read, ins_run, same = _insertion_votes(edits, est, run_of, start_of)
        # Each read's change of each run's length: -1 per deleted base, +1 per
        # inserted copy of the run's base next to it.
        n_runs = len(run_start)
        run_key = np.concatenate(
            [del_read * n_runs + run_of[dpos], ins_read[same] * n_runs + ins_run]
        )
        run_step = np.concatenate([np.full(len(dpos), -1), np.ones(len(ins_run), np.int64)])
        subs = np.bincount(edits.op_cl[is_sub], minlength=n_active)
        icl = edits.op_cl[edits.tag == ord("i")]
        other_ins = np.bincount(icl[~same], minlength=n_active)

    return Votes(
        alignments=al,
        voting=voting,
        counts=counts,
        cover=cover,
        slot_cover=slot_cover,
        winner=_position_winner(counts, est.codes),
        insertions=_insertion_decision(ins_key, ins_b, est, slot_cover),
        runs=Runs(
            run_start, run_len, _run_histograms(cover, run_start, run_len, run_key, run_step)
        ),
        error_counts=np.stack(
            [subs, other_ins, np.bincount(est.seg, weights=cover, minlength=n_active)], axis=1
        ).astype(np.int64),
        qual_err=qual_err,
    )


def _coverage(al: Alignments, voting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Voting reads covering each position and each gap: a read covers its aligned span."""
    est = al.estimates
    n_pos = len(est.codes)
    n_slots = n_pos + len(est.lengths)
    first = (est.offsets[al.read_cl] + al.span_start)[voting]
    last = (est.offsets[al.read_cl] + al.span_end)[voting]
    cover = np.cumsum(
        np.bincount(first, minlength=n_pos + 1) - np.bincount(last + 1, minlength=n_pos + 1)
    )[:n_pos]
    sfirst = (est.slot_offsets[al.read_cl] + al.span_start)[voting]
    slast = (est.slot_offsets[al.read_cl] + al.span_end + 1)[voting]
    slot_cover = np.cumsum(
        np.bincount(sfirst, minlength=n_slots + 1) - np.bincount(slast + 1, minlength=n_slots + 1)
    )[:n_slots]
    return cover, slot_cover


def homopolymer_runs(est: Estimates) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of the estimates: first position, length; per position its run and run start.

    Estimates are never empty, so every cluster has a run.
    """
    codes, seg = est.codes, est.seg
    n_pos = len(codes)
    new_run = np.ones(n_pos, dtype=bool)
    new_run[1:] = (codes[1:] != codes[:-1]) | (seg[1:] != seg[:-1])
    run_of = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    run_len = np.diff(np.append(run_start, n_pos))
    return run_start, run_len, run_of, run_start[run_of]


def _edit_arrays(al: Alignments, voting: np.ndarray, seqs: list[str]) -> _Edits:
    """The edits of the voting reads, their positions moved to the estimate's coordinates."""
    op_read = np.repeat(np.arange(len(al.read_idx)), al.n_ops)
    keep = voting[op_read]
    tag, sp, dp, op_read = al.op_tag[keep], al.op_est[keep], al.op_read_pos[keep], op_read[keep]
    sp += al.span_start[op_read]
    read_codes = read_values(seqs, al.read_idx[op_read], dp, encode_flat)
    return _Edits(tag, sp, dp, op_read, al.read_cl[op_read], read_codes)


def _error_qualities(al: Alignments, edits: _Edits, quals: list[str]) -> np.ndarray:
    """Per active cluster, how many substituted or inserted read bases have each quality."""
    n_active = len(al.estimates.lengths)
    bad = edits.tag != ord("d")
    q = read_values(quals, al.read_idx[edits.op_read[bad]], edits.dp[bad], quality_values)
    return np.bincount(
        edits.op_cl[bad] * (MAX_QUAL + 1) + q,
        minlength=n_active * (MAX_QUAL + 1),
    ).reshape(n_active, MAX_QUAL + 1)


def _count_changes(
    counts: np.ndarray, edits: _Edits, est: Estimates, start_of: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Move substitution and deletion votes into ``counts``; the deletions' positions and reads.

    Deletions move to the left end of their homopolymer run; a read that lost
    two bases of a run votes for the run's first two positions.
    """
    n_pos = len(est.codes)
    pos = np.arange(n_pos, dtype=np.int64)
    is_sub = edits.tag == ord("r")
    is_del = edits.tag == ord("d")
    dpos = est.offsets[edits.op_cl[is_del]] + edits.sp[is_del]
    del_read = edits.op_read[is_del]
    dpos = start_of[dpos] + rank_in_groups(del_read * (n_pos + 1) + start_of[dpos])
    dpos = np.minimum(dpos, n_pos - 1)
    spos = est.offsets[edits.op_cl[is_sub]] + edits.sp[is_sub]
    lost = np.bincount(np.concatenate([spos, dpos]), minlength=n_pos)
    counts[pos, est.codes] -= lost
    gained = np.concatenate([spos * COLUMNS + edits.read_codes[is_sub], dpos * COLUMNS + GAP])
    counts += np.bincount(gained, minlength=n_pos * COLUMNS).reshape(n_pos, COLUMNS)
    return dpos, del_read


def _insertion_votes(
    edits: _Edits, est: Estimates, run_of: np.ndarray, start_of: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Inserted bases as (slot, rank) keys and bases; their reads, runs, and run-base flags.

    An inserted base next to a run of itself moves to the run's left end (and
    counts as a lengthening of that run: ``same``, ``ins_run``).
    """
    eoff = est.offsets
    n_slots = len(est.codes) + len(est.lengths)
    is_ins = edits.tag == ord("i")
    icl = edits.op_cl[is_ins]
    k = edits.sp[is_ins]
    b = edits.read_codes[is_ins]
    length = est.lengths[icl]
    here = eoff[icl] + np.minimum(k, length - 1)
    prev = eoff[icl] + np.maximum(k - 1, 0)
    here_same = (k < length) & (est.codes[here] == b)
    prev_same = ~here_same & (k > 0) & (est.codes[prev] == b)
    k = np.where(
        here_same,
        start_of[here] - eoff[icl],
        np.where(prev_same, start_of[prev] - eoff[icl], k),
    )
    slot = est.slot_offsets[icl] + k
    ins_read = edits.op_read[is_ins]
    rank = rank_in_groups(ins_read * (n_slots + 1) + slot)
    fits = rank < MAX_INSERT
    same = here_same | prev_same
    ins_run = run_of[np.where(here_same, here, prev)[same]]
    return (slot * MAX_INSERT + rank)[fits], b[fits], ins_read, ins_run, same


def _position_winner(counts: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Plurality per position; ties keep the estimate; N only wins when alone."""
    pos = np.arange(len(codes), dtype=np.int64)
    score = counts * 2
    score[pos, codes] += 1
    informative = counts[:, :4].sum(axis=1) + counts[:, GAP] > 0
    score[:, N] = np.where(informative, -1, score[:, N])
    return np.argmax(score, axis=1)


def _insertion_decision(
    ins_key: np.ndarray, ins_b: np.ndarray, est: Estimates, slot_cover: np.ndarray
) -> Insertions:
    """Per (slot, rank): the most voted base, accepted by a strict majority of covering reads."""
    keys, inverse = np.unique(ins_key, return_inverse=True)
    total = np.bincount(inverse, minlength=len(keys))
    by_base = np.bincount(inverse * 5 + ins_b, minlength=len(keys) * 5).reshape(-1, 5)
    known = by_base[:, :4].sum(axis=1) > 0
    base = np.where(known, np.argmax(by_base[:, :4], axis=1), N)
    slot_of = keys // MAX_INSERT
    slot_seg = segment_ids(est.lengths + 1)
    ins_cluster = slot_seg[slot_of] if len(keys) else np.zeros(0, dtype=np.int64)
    accepted = 2 * total > slot_cover[slot_of] if len(keys) else np.zeros(0, dtype=bool)
    return Insertions(
        slot=slot_of,
        rank=keys % MAX_INSERT,
        base=base,
        total=total,
        cluster=ins_cluster,
        accepted=accepted,
    )


def _run_histograms(
    cover: np.ndarray,
    run_start: np.ndarray,
    run_len: np.ndarray,
    run_key: np.ndarray,
    run_step: np.ndarray,
) -> np.ndarray:
    """Per run: the reads covering the whole run, by their net change of its length -2..+2."""
    run_cover = np.minimum(cover[run_start], cover[run_start + run_len - 1])
    run_hist = np.zeros((len(run_start), 5), dtype=np.int64)
    if len(run_key):
        pairs, inv = np.unique(run_key, return_inverse=True)
        net = np.clip(np.bincount(inv, weights=run_step).astype(np.int64), -2, 2)
        runs = pairs % len(run_start)
        moved = net != 0
        np.add.at(run_hist, (runs[moved], net[moved] + 2), 1)
    run_hist[:, 2] = np.maximum(run_cover - run_hist.sum(axis=1), 0)
    return run_hist


def read_values(strings: list[str], reads: np.ndarray, at: np.ndarray,
                encode: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Value (base code or quality) at position ``at`` of read ``reads``, one per entry."""
    if len(reads) == 0:
        return np.zeros(0, dtype=np.int64)
    unique, inverse = np.unique(reads, return_inverse=True)
    values, lengths = encode([strings[r] for r in unique.tolist()])
    # A deletion at the end of a read points one past it; its base is never used.
    at = np.minimum(at, lengths[inverse] - 1)
    return values[offsets(lengths)[inverse] + at].astype(np.int64)


@dataclass
class StrandScores:
    """Per cluster, how much to trust its strand, from the votes on its last estimate (step 6)."""

    confidence: np.ndarray
    agreement: np.ndarray
    mean_distance: np.ndarray

    @classmethod
    def zeros(cls, n_clusters: int) -> StrandScores:
        """Scores of ``n_clusters`` clusters, all zero."""
        return cls(np.zeros(n_clusters), np.zeros(n_clusters), np.zeros(n_clusters))

    def record(self, active: np.ndarray, votes: Votes, sizes: np.ndarray) -> None:
        """Score the ``active`` clusters (``sizes``: reads per cluster) from ``votes``."""
        counts, cover, est = votes.counts, votes.cover, votes.estimates
        # The consensus base is the estimate's (a called run may keep a base the majority lost).
        winner = est.codes
        pos = np.arange(len(winner))
        top = counts[pos, winner]
        rest = counts.copy()
        rest[pos, winner] = -1
        runner = rest.max(axis=1)
        # An N in the consensus is a base that no read could call: never secure (reads that
        # all held N there gave a strand of Ns confidence 1.000).
        secure = ((top - runner) >= 2) & (2 * top > cover) & (winner != N)
        agree = top / np.maximum(cover, 1)
        seg = est.seg
        lens = np.maximum(est.lengths, 1)
        n_active = len(active)
        self.confidence[active] = np.bincount(seg, weights=secure, minlength=n_active) / lens
        self.agreement[active] = np.bincount(seg, weights=agree, minlength=n_active) / lens
        al = votes.alignments
        dist = np.bincount(al.read_cl, weights=al.n_ops, minlength=n_active)
        self.mean_distance[active] = dist / np.maximum(sizes[active], 1)
