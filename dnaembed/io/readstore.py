"""Reads of one or several files streamed into a store: ids, sequences (qualities), in order.

Input files (FASTA/FASTQ, gzip, ``-``) are read one after the other as one
run, validated as :mod:`dnaembed.io.sequences` does. Nothing is kept per read
as a Python object: ids and sequences go to :class:`PackedStrings` (in
memory, or spilled under the run's tmpdir), so a run over millions of reads
holds a few bytes per read besides them. Read ids must be unique across all
files; they are checked by a 64-bit hash of each id, and the ids of any equal
hashes compared, so the check needs no set of every id. A repeated id is an
error naming the file, the record and where the id was first seen.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dnaembed.errors import InputError
from dnaembed.io.bases import PackedBases
from dnaembed.io.sequences import ReadSet, describe_path, iter_read_blocks
from dnaembed.io.spill_dir import SpillDir
from dnaembed.io.strings import PackedStrings

#: Reads per block while streaming (bounds the per-block Python lists).
STREAM_CHUNK = 65_536


@dataclass
class ReadStore:
    """Every read of a run, in input order: ids, sequences, qualities (or None), lengths."""

    ids: PackedStrings
    seqs: PackedStrings | PackedBases
    quals: PackedStrings | None
    files: list[str]
    #: Reads of each file (the record numbers in messages are per file).
    counts: list[int]

    def __len__(self) -> int:
        return len(self.seqs)

    @property
    def lengths(self) -> np.ndarray:
        """Each read's length."""
        return self.seqs.lengths

    def where(self, read: int) -> tuple[str, int]:
        """(file, record number) of a read."""
        for name, count in zip(self.files, self.counts):
            if read < count:
                return name, read + 1
            read -= count
        raise IndexError(read)

    def read_set(self) -> ReadSet:
        """Everything as lists in memory (for the consensus, which needs the qualities)."""
        rows = np.arange(len(self))
        quals = self.quals.take(rows) if self.quals is not None else None
        return ReadSet(self.ids.take(rows), self.seqs.take(rows), quals)

    def spill_beyond(self, limit: int) -> list[str]:
        """Spill the ids, qualities or sequences held in memory beyond ``limit`` bytes in
        all, in that order (the sequences, read back most often, last); the names of
        those spilled."""
        parts = {"ids": self.ids, "qualities": self.quals, "sequences": self.seqs}
        held = [(p.nbytes, name) for name, p in parts.items() if p is not None and not p.spilled]
        spilled, total = [], sum(size for size, _ in held)
        for size, name in held:
            if total <= limit:
                break
            if parts[name].spill():
                spilled.append(name)
                total -= size
        return spilled

    def close(self) -> None:
        """Frees the ids, sequences and qualities (and closes any spill files)."""
        for store in (self.ids, self.seqs, self.quals):
            if store is not None:
                store.close()


def stream_reads(
    paths: Sequence[str | os.PathLike],
    *,
    spill: SpillDir | None = None,
    spill_after: int | None = None,
    keep_quals: bool = False,
    two_bit: bool = False,
    on_block: Callable[[list[str]], None] | None = None,
) -> ReadStore:
    """Read every file into a :class:`ReadStore`.

    ``spill``/``spill_after``: each of ids, sequences and qualities moves to a
    file under ``spill`` once it takes more than ``spill_after`` bytes (None:
    never). ``on_block(seqs)`` sees each block of sequences as it is read
    (hashing for the dedupe). ``keep_quals``: keep the qualities when every
    file is FASTQ. ``two_bit``: the sequences at two bits per base
    (:class:`~dnaembed.io.bases.PackedBases`: a quarter of the memory, for a
    little more CPU time to read them back).
    """
    def new(stem: str, store=PackedStrings, **options):
        if spill is None or spill_after is None:
            return store(**options)
        return store(spill_to=spill.new_file(stem), spill_after=spill_after, **options)

    ids = new("ids", encoding="utf-8")
    seqs = new("seqs", PackedBases) if two_bit else new("seqs", encoding="ascii")
    quals = new("quals", encoding="ascii") if keep_quals else None
    id_hashes: list[np.ndarray] = []
    counts: list[int] = []
    has_quals = keep_quals
    for path in paths:
        count = 0
        for block_ids, block_seqs, block_quals in iter_read_blocks(path, STREAM_CHUNK):
            ids.append(block_ids)
            seqs.append(block_seqs)
            id_hashes.append(np.fromiter(map(hash, block_ids), np.int64, len(block_ids)))
            if quals is not None and has_quals:
                if any(q is None for q in block_quals):
                    has_quals = False
                else:
                    quals.append(block_quals)
            if on_block is not None:
                on_block(block_seqs)
            count += len(block_ids)
        counts.append(count)
    store = ReadStore(ids.finish(), seqs.finish(),
                      quals.finish() if quals is not None and has_quals else None,
                      [describe_path(p) for p in paths], counts)
    if quals is not None and not has_quals:
        quals.close()
    _check_unique_ids(store, np.concatenate(id_hashes) if id_hashes else np.zeros(0, np.int64))
    return store


def _check_unique_ids(store: ReadStore, hashes: np.ndarray) -> None:
    """Refuse a repeated read id (see the module notes): the first repeat, in input order."""
    order = np.argsort(hashes, kind="stable")
    same = np.flatnonzero(hashes[order][1:] == hashes[order][:-1])
    if len(same) == 0:
        return
    suspects = np.unique(np.concatenate([order[same], order[same + 1]]))
    first_seen: dict[str, int] = {}
    for read, read_id in zip(suspects.tolist(), store.ids.take(suspects)):
        if read_id in first_seen:
            name, record = store.where(read)
            first_name, first_record = store.where(first_seen[read_id])
            where = (f"record {first_record}" if first_name == name
                     else f"{first_name}, record {first_record}")
            raise InputError(f"{name}: record {record} ({read_id}): duplicate read id "
                             f"(first seen at {where})")
        first_seen[read_id] = read
