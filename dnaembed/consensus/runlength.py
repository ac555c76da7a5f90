"""The run-length model: how often the channel reads a homopolymer run of length t as t-2 .. t+2.

Learnt from the votes of the chunk's clusters (:func:`run_length_log_p`). A
change of a run's length that the majority decides is held back when the model
prefers another length (:func:`hold_disputed_runs`): a biased channel
(nanopore) shortens runs far more often than it lengthens them, which a plain
majority cannot know. Polishing then weighs the held-back change.
"""

from __future__ import annotations

import numpy as np

from dnaembed.consensus.votes import GAP, Votes

#: Homopolymer runs of this length or more share one row of the run-length model.
MAX_RUN = 8


#: Weight (in reads) of the prior of each row of the run-length model.
RUN_PRIOR_WEIGHT = 50.0


def run_length(seq: str, i: int) -> int:
    """Length (capped at :data:`MAX_RUN`) of the homopolymer run of ``seq`` that holds ``i``."""
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
    return min(hi - lo, MAX_RUN)


def run_table_counts(votes: Votes, n_active: int) -> np.ndarray:
    """Per active cluster, run-length change counts by run length 1..MAX_RUN: (n, R, 5)."""
    runs = votes.runs
    row = np.minimum(runs.length, MAX_RUN) - 1
    cl = votes.estimates.seg[runs.start]
    flat = (cl * MAX_RUN + row)[:, None] * 5 + np.arange(5)
    out = np.bincount(flat.ravel(), weights=runs.hist.ravel(), minlength=n_active * MAX_RUN * 5)
    return out.reshape(n_active, MAX_RUN, 5).astype(np.int64)


def run_length_log_p(run_counts: np.ndarray) -> np.ndarray:
    """log P(read shows a run of true length t as t + d), from per-cluster counts (n, R, 5).

    Counted over every cluster of three or more reads against its current
    estimate; each run length is smoothed towards the one below it (and the
    shortest towards a symmetric prior), so rare long runs borrow strength.
    """
    counts = run_counts.sum(axis=0).astype(np.float64)
    prior = np.array([0.5, 2.0, 95.0, 2.0, 0.5]) / 100.0
    out = np.empty((MAX_RUN, 5))
    for t in range(MAX_RUN):
        p = (counts[t] + RUN_PRIOR_WEIGHT * prior) / (counts[t].sum() + RUN_PRIOR_WEIGHT)
        out[t] = np.log(p)
        prior = p
    return out


def _length_scores(length: np.ndarray, hist: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """Per run of length L: log-likelihood of its reads' copies for true length L-1, L, L+1."""
    scores = []
    for shift in (-1, 0, 1):
        row = np.clip(length + shift, 1, MAX_RUN) - 1
        score = np.zeros(len(length))
        for d in range(-2, 3):
            # Reads that showed L + d show t + (d - shift) for a true length t = L + shift.
            score += hist[:, d + 2] * log_p[row, np.clip(d - shift, -2, 2) + 2]
        scores.append(score)
    scores[0] = np.where(length >= 2, scores[0], -np.inf)
    return np.stack(scores, axis=1)


def hold_disputed_runs(votes: Votes, log_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Winner and accepted insertions, less the run-length changes the model disputes.

    ``log_p[t - 1, d + 2]``: log-probability that a read shows a run of true
    length t (capped at MAX_RUN) as t + d. Where the majority's decisions
    change a run's length (by one) to a length that explains the reads'
    copies of the run less well than another of L - 1, L, L + 1, the run is
    left as it is, for :func:`dnaembed.consensus.polish.polish_estimates` to
    weigh.
    """
    est, ins, runs = votes.estimates, votes.insertions, votes.runs
    winner = votes.winner.copy()
    accepted = ins.accepted.copy()
    base = est.codes[runs.start]
    length = runs.length
    run_cl = est.seg[runs.start]
    run_slot = est.slot_offsets[run_cl] + runs.start - est.offsets[run_cl]
    stacked = _length_scores(length, runs.hist, log_p)

    # What the majority did to each run: bases dropped, copies of its base inserted.
    dropped = np.bincount(
        np.repeat(np.arange(len(length)), length), weights=winner == GAP,
        minlength=len(length),
    ).astype(np.int64)
    where = np.minimum(np.searchsorted(run_slot, ins.slot), len(run_slot) - 1)
    same_base = (run_slot[where] == ins.slot) & (ins.base == base[where])
    added = np.bincount(where[same_base & accepted], minlength=len(length))
    majority = np.clip(added - dropped, -1, 1)
    call = np.argmax(stacked, axis=1) - 1
    rows = np.arange(len(length))
    gain = stacked[rows, call + 1] - stacked[rows, majority + 1]
    # Only where both are lengths the model weighs (the majority may remove a
    # single-base run outright, or change a run by two; those stand).
    override = (call != majority) & (gain > 0) & (base < 4)
    override &= (np.abs(added - dropped) <= 1) & np.isfinite(stacked[rows, majority + 1])
    if not override.any():
        return winner, accepted

    # Leave those runs as they are: undo the majority's decisions on them.
    in_run = np.repeat(override, length)
    winner[in_run & (winner == GAP)] = est.codes[in_run & (winner == GAP)]
    accepted[same_base & override[where]] = False
    return winner, accepted
