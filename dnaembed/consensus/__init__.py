"""Strand reconstruction: one consensus sequence per cluster of noisy reads.

:func:`consensus_strands` (:mod:`.reconstruct`) is the entry point; the
algorithm, step by step, is in :mod:`.engine`. Modules: :mod:`.strands` (the
result record and its writers), :mod:`.inputs` (labels, orientations,
qualities), :mod:`.chunks` (units of work), :mod:`.orient`, :mod:`.medoid`,
:mod:`.align`, :mod:`.votes`, :mod:`.runlength`, :mod:`.polish`, :mod:`.engine`
(one chunk, start to end). How chunks run (here or in worker processes) is
:mod:`dnaembed.execute`'s business.
"""

from dnaembed.consensus.reconstruct import consensus_strands
from dnaembed.consensus.strands import (
    ConsensusStrand,
    length_tolerance,
    write_strand_report,
    write_strands,
)

__all__ = [
    "ConsensusStrand",
    "consensus_strands",
    "length_tolerance",
    "write_strand_report",
    "write_strands",
]
