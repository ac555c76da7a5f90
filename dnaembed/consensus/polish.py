"""Polishing: edits the majority missed, kept when the reads become likelier (:mod:`.engine`, 4).

Pairwise alignments describe one event in different ways (a read that lost one
C of CCCCC next to a missing A aligns it as C->A), which splits the votes for
the true edit below a majority; and a biased channel shortens homopolymer runs
more often than it lengthens them, which a majority cannot know. Every edit
that at least :data:`CONTEST` of the covering reads ask for
(:func:`contested_edits`) is tried and kept when the reads' total alignment
cost under the :class:`CostModel` goes down. The cost model is learnt from the
chunk's own votes (:class:`ErrorCounts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import edlib
import Levenshtein
import numpy as np

from dnaembed.consensus.chunks import ChunkReads
from dnaembed.consensus.inputs import MAX_QUAL
from dnaembed.consensus.runlength import (
    MAX_RUN,
    RUN_PRIOR_WEIGHT,
    run_length,
    run_length_log_p,
    run_table_counts,
)
from dnaembed.consensus.votes import GAP, N, Votes

#: Polishing tries an edit that at least this fraction of the covering reads asks for.
CONTEST = 0.25


#: Polishing weighs an edit on at most this many of a cluster's reads (evenly spaced).
POLISH_READS = 48
#: Estimates longer than this are polished a window at a time. Weighing a trial edit by
#: every read's alignment to the whole strand costs a long noisy strand the cube of its
#: length (it has an edit to try every few bases): three nanopore reads of 50 kb ran for
#: hours (~9,000 trials of alignments of 50 kb each).
POLISH_WHOLE_MAX_LENGTH = 2_000
#: A long estimate's trial edit is weighed on this many of its bases either side, against
#: the part of each read that the read's alignment to the whole strand puts there.
POLISH_WINDOW = 64


#: Quality adjustments of an edit's cost are capped at +-QUAL_CAP.
QUAL_CAP = 8.0


_LOG4 = math.log(4.0)


@dataclass(frozen=True)
class CostModel:
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
                adjust = [table[min(max(v - 33, 0), MAX_QUAL)] for v in quals[r].encode()]
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

    def cost(self, seq: str, read: str, adjust: list[float] | None) -> float:
        """The cost of ``read``'s global alignment to ``seq`` (the :data:`_LOG4` a base aside)."""
        return self._cost(Levenshtein.editops(seq, read), seq, read, adjust, 0)

    def _cost(self, ops, seq: str, read: str, adjust: list[float] | None, shift: int) -> float:
        cost = 0.0
        n = len(seq)
        run = self.run
        for tag, i, j in ops:
            i += shift
            if tag == "delete":
                cost += run[run_length(seq, i) - 1][1]
                continue
            if tag == "replace":
                cost += self.sub
            else:
                b = read[j]
                if i < n and seq[i] == b:
                    cost += run[run_length(seq, i) - 1][3]
                elif i > 0 and seq[i - 1] == b:
                    cost += run[run_length(seq, i - 1) - 1][3]
                else:
                    cost += self.ins
            if adjust is not None:
                cost += adjust[j]
        return cost


@dataclass
class ErrorCounts:
    """Per cluster of a chunk, the counts its error model is learnt from.

    Recorded from each cluster's latest votes, for clusters of three or more
    reads only (smaller ones would teach the model their own noise).
    """

    #: (clusters, MAX_RUN, 5): reads showing a run of length t as t-2 .. t+2.
    runs: np.ndarray
    #: (clusters, 3): substitutions, insertions of a base unlike its neighbours, positions read.
    errors: np.ndarray
    #: (clusters, MAX_QUAL + 1): qualities of the read bases that are substitutions or insertions.
    qual_err: np.ndarray
    #: (clusters, MAX_QUAL + 1): qualities of all the cluster's read bases (None: no qualities).
    qual_all: np.ndarray | None

    @classmethod
    def empty(cls, n_clusters: int, qual_all: np.ndarray | None) -> ErrorCounts:
        """Counts of ``n_clusters`` clusters, all zero."""
        return cls(
            runs=np.zeros((n_clusters, MAX_RUN, 5), dtype=np.int64),
            errors=np.zeros((n_clusters, 3), dtype=np.int64),
            qual_err=np.zeros((n_clusters, MAX_QUAL + 1), dtype=np.int64),
            qual_all=qual_all,
        )

    def record(self, active: np.ndarray, votes: Votes, big: np.ndarray) -> None:
        """Take the ``active`` clusters' counts from ``votes`` (zero where not ``big``)."""
        big = big[:, None]
        self.runs[active] = run_table_counts(votes, len(active)) * big[:, :, None]
        self.errors[active] = votes.error_counts * big
        if votes.qual_err is not None:
            self.qual_err[active] = votes.qual_err * big

    def run_log_p(self) -> np.ndarray:
        """The run-length model (:func:`~dnaembed.consensus.runlength.run_length_log_p`)."""
        return run_length_log_p(self.runs)

    def cost_model(self, sizes: np.ndarray) -> CostModel:
        """Edit costs (negative log-probabilities) learnt from every cluster's current votes."""
        subs, inserts, positions = self.errors.sum(axis=0).astype(np.float64)
        weight = 100.0 * RUN_PRIOR_WEIGHT
        p_sub = (subs + 0.01 * weight) / (positions + weight)
        p_ins = (inserts + 0.01 * weight) / (positions + weight)
        log_p = self.run_log_p()
        run = -(log_p - log_p[:, 2:3])  # cost of showing a run d longer than it is
        quality = None
        if self.qual_all is not None:
            # An error at a base of quality q costs log P(q | error) - log P(q | correct)
            # less: errors at low-quality bases are cheap (the only quality used).
            err = self.qual_err.sum(axis=0).astype(np.float64)
            ok = np.maximum(self.qual_all[sizes >= 3].sum(axis=0) - err, 0)
            p_err = (err + 1.0) / (err.sum() + len(err))
            p_ok = (ok + 1.0) / (ok.sum() + len(ok))
            quality = np.clip(np.log(p_ok) - np.log(p_err), -QUAL_CAP, QUAL_CAP).tolist()
        return CostModel(-math.log(p_sub), -math.log(p_ins), run.tolist(), quality)


def contested_edits(
    votes: Votes, which: np.ndarray, min_reads: np.ndarray
) -> dict[int, list[tuple[int, str, int]]]:
    """Edits that a large minority asks for, per active cluster in ``which``.

    ``(index, kind, base)`` with kind ``sub``/``del`` at estimate position
    ``index`` or ``ins`` before it; sorted from the end of the strand to its
    start so that applying one leaves the indexes of the next valid.
    """
    est, ins = votes.estimates, votes.insertions
    wanted = np.zeros(len(est.lengths), dtype=bool)
    wanted[which] = True
    wanted &= min_reads
    # Alternatives to the estimate's own base (the majority's choice may be one
    # the run-length check held back).
    pos = np.arange(len(est.codes))
    rest = votes.counts.copy()
    rest[pos, est.codes] = -1
    rest[:, N] = -1
    need = np.maximum(1, np.ceil(CONTEST * votes.cover))[:, None]
    p_hit, col_hit = np.nonzero(wanted[est.seg][:, None] & (rest >= need))
    out: dict[int, list[tuple[int, int, str, int]]] = {}
    for p, cl, col in zip(p_hit.tolist(), est.seg[p_hit].tolist(), col_hit.tolist()):
        index = p - int(est.offsets[cl])
        kind = "del" if col == GAP else "sub"
        out.setdefault(cl, []).append((index, 1, kind, col))
    if len(ins.slot):
        slot_need = np.maximum(1, np.ceil(CONTEST * votes.slot_cover[ins.slot]))
        ok = (ins.rank == 0) & (ins.base < 4) & (ins.total >= slot_need) & wanted[ins.cluster]
        for q, cl, base in zip(
            ins.slot[ok].tolist(), ins.cluster[ok].tolist(), ins.base[ok].tolist()
        ):
            out.setdefault(cl, []).append((q - int(est.slot_offsets[cl]), 0, "ins", base))
    return {
        cl: [(i, kind, base) for i, _, kind, base in sorted(edits, reverse=True)]
        for cl, edits in out.items()
    }


def apply_edit(seq: str, index: int, kind: str, base: int) -> str:
    """``seq`` with base code ``base`` substituted at, inserted before, or deleted at ``index``."""
    letter = "ACGTN"[base] if base < 5 else ""
    if kind == "ins":
        return seq[:index] + letter + seq[index:]
    if kind == "del":
        return seq[:index] + seq[index + 1 :]
    return seq[:index] + letter + seq[index + 1 :]


def polish_estimates(
    estimates: list[str],
    active: np.ndarray,
    votes: Votes,
    settled: np.ndarray,
    reads: ChunkReads,
    counts: ErrorCounts,
) -> dict[int, str]:
    """New estimates of the settled clusters whose contested edits make the reads likelier.

    ``settled``: active clusters (indexes into ``active``) the majority left as
    they were. Edits are tried from the end of the strand to its start, each
    kept when the reads' total cost goes down. Clusters of fewer than three
    reads are not polished (every edit would tie), of two only with base
    qualities (the lower-quality base gives). Estimates longer than
    :data:`POLISH_WHOLE_MAX_LENGTH` weigh each edit in a window around it
    (:func:`polish_in_windows`). Returns cluster -> new estimate.
    """
    if len(settled) == 0:
        return {}
    smallest = 2 if reads.quals is not None else 3
    cands = contested_edits(votes, settled, min_reads=reads.sizes[active] >= smallest)
    if not cands:
        return {}
    model = counts.cost_model(reads.sizes)
    changed = {}
    for k, edits in cands.items():
        c = int(active[k])
        voters = votes.reads_of(k)
        if len(voters) > POLISH_READS:
            # Enough to weigh an edit; keeps a 400-read cluster from costing 40 small ones.
            voters = voters[:: math.ceil(len(voters) / POLISH_READS)]
        prepared = model.prepare(voters, reads.seqs, reads.quals)
        long = len(estimates[c]) > POLISH_WHOLE_MAX_LENGTH
        seq = (polish_in_windows if long else polish_whole)(model, estimates[c], prepared, edits)
        if seq != estimates[c]:
            changed[c] = seq
    return changed


def polish_whole(model: CostModel, seq: str, prepared: list, edits: list) -> str:
    """``seq`` with each of ``edits`` (from its end to its start) that lowers the reads'
    total cost (:meth:`CostModel.total`) applied."""
    best = model.total(seq, prepared)
    for index, kind, base in edits:
        trial = apply_edit(seq, index, kind, base)
        cost = model.total(trial, prepared, limit=best)
        if cost < best - 1e-9:
            seq, best = trial, cost
    return seq


def polish_in_windows(model: CostModel, seq: str, prepared: list, edits: list) -> str:
    """:func:`polish_whole` for a long ``seq``: each edit weighed on :data:`POLISH_WINDOW`
    bases either side of it, each read's part there taken from its alignment to ``seq``.

    An edit moves a read's optimal alignment only near it, so the window's change of
    cost stands for the whole's (strands of 2.5-10 kb came out with as many errors as the
    whole polish leaves). A trial costs two alignments of ~2 x POLISH_WINDOW bases a
    read, not one of the whole strand.
    """
    spans = [_read_positions(seq, read, infix) for read, _, infix in prepared]
    shifts: list[tuple[int, int]] = []  # applied edits (index, length change), last lowest
    for index, kind, base in edits:
        change = {"ins": 1, "del": -1}.get(kind, 0)
        lo, hi = max(0, index - POLISH_WINDOW), min(len(seq), index + POLISH_WINDOW + 1)
        # The applied edits all lie at or after ``index``: of the window, only its end
        # has moved since the reads were aligned.
        moved = sum(d for _, d in _edits_before(shifts, hi))
        delta = _LOG4 * change + sum(
            _window_change(model, seq, read, adjust, span, (lo, hi, moved), (index, kind, base))
            for (read, adjust, _), span in zip(prepared, spans))
        if delta < -1e-9:
            seq = apply_edit(seq, index, kind, base)
            shifts.append((index, change))
    return seq


def _window_change(model: CostModel, seq: str, read: str, adjust: list[float] | None,
                   span: tuple[int, int, np.ndarray], window: tuple[int, int, int],
                   edit: tuple[int, str, int]) -> float:
    """How much one read's cost changes with ``edit``, over ``window`` (start, end, and
    how far its end has moved since ``span``, the read's place on ``seq``, was found)."""
    start, end, at = span
    lo, hi, moved = window
    index, kind, base = edit
    left, right = max(lo, start), min(hi - moved, end)  # right: where the read was aligned
    right_now = right + moved
    if not left <= index <= right_now or (index == right_now and kind != "ins"):
        return 0.0  # the read does not cover the edit
    part = slice(int(at[left]), int(at[right]))
    here, segment = seq[left:right_now], read[part]
    weights = adjust[part] if adjust is not None else None
    trial = apply_edit(here, index - left, kind, base)
    return model.cost(trial, segment, weights) - model.cost(here, segment, weights)


def _edits_before(shifts: list[tuple[int, int]], position: int):
    """The applied edits (newest last, at falling indexes) that lie before ``position``."""
    for index, change in reversed(shifts):
        if index >= position:
            return
        yield index, change


def _read_positions(seq: str, read: str, infix: bool) -> tuple[int, int, np.ndarray]:
    """Where a read lies on ``seq`` (start, end) and, for each position of ``seq`` from
    start to end, the read's position there (by the read's unit-cost alignment)."""
    start, end = 0, len(seq)
    if infix:
        start, last = edlib.align(read, seq, mode="HW", task="locations")["locations"][0]
        end = last + 1
    at = np.zeros(len(seq) + 1, dtype=np.int64)
    for _, i1, i2, j1, j2 in Levenshtein.opcodes(seq[start:end], read):
        if i2 > i1:
            at[start + i1 : start + i2] = j1 + np.minimum(np.arange(i2 - i1), j2 - j1)
    at[end:] = len(read)
    return start, end, at
