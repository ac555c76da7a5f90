"""Reading and writing sequences: FASTA or FASTQ through dnaio.

Input: plain or compressed (gzip, bzip2, xz, zstd: detected from the content,
also on standard input, ``-``).
Every record is validated at the door:

* bases must be A, C, G, T or N in either case; they are upper-cased;
* other characters are an error naming the file, the record number and the read id;
* empty records are kept (they become singleton clusters) unless the caller
  forbids them (reference strands must not be empty);
* a read id is the record name up to the first whitespace; ids must be unique
  (cluster tables are keyed by id), a repeated id is an error;
* an empty file is a valid input with no reads; each command says what it does
  with zero reads."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import dnaio

from dnaembed.errors import InputError
from dnaembed.io.atomic import atomic_path, writing_stdout

_INVALID_BASE = re.compile(r"[^ACGTN]")


def decompression_errors() -> tuple[type[BaseException], ...]:
    """What reading a corrupt compressed input raises, beside ``OSError`` and ``EOFError``:
    the codecs' own errors (zlib's, lzma's, and isal's, which xopen reads gzip with)."""
    import lzma
    import zlib

    errors: list[type[BaseException]] = [zlib.error, lzma.LZMAError]
    with contextlib.suppress(ImportError):
        from isal import isal_zlib

        errors.append(isal_zlib.error)
    return tuple(errors)


#: Errors of reading an input (a damaged file), reported as such, not as internal ones.
READ_ERRORS = (OSError, EOFError, UnicodeDecodeError, *decompression_errors())

#: Records validated together by :func:`iter_reads`.
READ_BLOCK = 8_192


@dataclass
class ReadSet:
    """Reads as parallel lists: ids, upper-case sequences, and Phred strings (FASTQ only)."""

    ids: list[str]
    seqs: list[str]
    quals: list[str] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, index: Sequence[int]) -> ReadSet:
        """The reads at ``index``, in that order."""
        quals = [self.quals[i] for i in index] if self.quals is not None else None
        return ReadSet([self.ids[i] for i in index], [self.seqs[i] for i in index], quals)


def describe_path(path: str | os.PathLike) -> str:
    """How a path is named in messages ('-' is standard input; an output not yet
    published, by its destination rather than its temporary path)."""
    from dnaembed.io.atomic import destination_of

    if str(path) == "-":
        return "<stdin>"
    return str(destination_of(path) or path)


def check_readable(path: str | os.PathLike) -> None:
    """An :class:`InputError` unless ``path`` is a file this process may read ('-', standard
    input, always passes): for commands that check every input before long work starts."""
    if str(path) == "-":
        return
    name, p = describe_path(path), Path(path)
    if not p.exists():
        raise InputError(f"{name}: no such file")
    if p.is_dir():
        raise InputError(f"{name}: is a directory, expected a FASTA or FASTQ file")
    if not os.access(p, os.R_OK):
        raise InputError(f"{name}: permission denied")


@contextlib.contextmanager
def _open_records(path: str | os.PathLike) -> Iterator[dnaio.SingleEndReader]:
    name = describe_path(path)
    check_readable(path)
    try:
        source = _stdin() if str(path) == "-" else str(path)
        reader = dnaio.open(source, open_threads=_decompression_threads(source))
    except dnaio.UnknownFileFormat:
        raise InputError(f"{name}: not a FASTA or FASTQ file") from None
    except dnaio.FileFormatError as e:
        # dnaio parses the first record when opening.
        raise InputError(_fault_message(path, 0, _format_error(e))) from None
    except READ_ERRORS as e:
        raise InputError(f"{name}: cannot read: {e}") from None
    with reader:
        yield reader


def _stdin() -> IO[bytes]:
    # dnaio detects gzip from the content of a named file only; xopen does it for a pipe.
    from xopen import xopen

    return xopen(sys.stdin.buffer, "rb", threads=0)


def _decompression_threads(source: str | IO[bytes]) -> int:
    """1 for a gzipped file: one thread (isal's, in this process) decompresses while this
    one parses; a gzipped FASTQ of 10^6 reads took 0.51 s to go through, against 0.79 s.
    0 otherwise: for other codecs xopen would start a program (xz, zstd), whose failure
    on a damaged file surfaces only when it is closed. Only a regular file is looked
    at: reading the head of a pipe (``<(zcat ...)``) would take it from the reader."""
    if not isinstance(source, str) or not Path(source).is_file():
        return 0
    with contextlib.suppress(OSError), open(source, "rb") as head:
        return int(head.read(2) == GZIP_MAGIC)
    return 0


#: The first two bytes of a gzip stream.
GZIP_MAGIC = b"\x1f\x8b"


def _format_error(e: Exception) -> str:
    return str(e).replace("\n", " ")


def _fault_message(path: str | os.PathLike, before: int, fault: str) -> str:
    """The one-line error of the reader's ``fault`` after ``before`` good records.

    dnaio refuses a byte outside ASCII for a whole buffer, before any record in it, and
    without a line: the message named record 1 for a fault in record 301. So the byte is
    looked for in a regular file (standard input or a pipe, ``<(zcat ...)``, is read
    once: "at or after")."""
    name = describe_path(path)
    if "Non-ASCII" not in fault:
        return f"{name}: record {before + 1}: {fault}"
    found = _first_non_ascii(path) if str(path) != "-" and Path(path).is_file() else None
    if found is None:
        return (f"{name}: a character outside ASCII at or after record {before + 1} "
                "(FASTA and FASTQ files are ASCII)")
    record, line, byte = found
    return (f"{name}: record {record} (line {line}): a character outside ASCII (byte "
            f"0x{byte:02x}; FASTA and FASTQ files are ASCII)")


def _first_non_ascii(path: str | os.PathLike) -> tuple[int, int, int] | None:
    """``(record, line, byte)`` of the first byte outside ASCII in the (decompressed) file:
    records of four lines (FASTQ) or from each '>' line (FASTA); None if none is found."""
    from xopen import xopen

    outside = re.compile(rb"[\x80-\xff]")
    lines = headers = 0
    previous = b"\n"  # the byte before the chunk: a '>' at the file's start opens a record
    with contextlib.suppress(Exception), xopen(path, "rb", threads=0) as handle:
        fasta = None
        while chunk := handle.read(1 << 20):
            fasta = chunk[:1] == b">" if fasta is None else fasta
            hit = outside.search(chunk)
            head = chunk if hit is None else chunk[: hit.start()]
            lines += head.count(b"\n")
            headers += head.count(b"\n>") + (previous == b"\n" and head[:1] == b">")
            if hit is not None:
                return (headers if fasta else lines // 4 + 1), lines + 1, chunk[hit.start()]
            previous = chunk[-1:]
    return None


def iter_reads(
    path: str | os.PathLike, *, allow_empty: bool = True
) -> Iterator[tuple[str, str, str | None]]:
    """Yield ``(read_id, sequence, qualities)`` for each validated record of a file.

    Raises :class:`InputError` naming the file, record number (1-based) and read id.
    """
    for ids, seqs, quals in iter_read_blocks(path, READ_BLOCK, allow_empty=allow_empty):
        yield from zip(ids, seqs, quals)


def iter_read_blocks(
    path: str | os.PathLike, size: int, *, allow_empty: bool = True
) -> Iterator[tuple[list[str], list[str], list[str | None]]]:
    """The validated records of a file as blocks of at most ``size``: ids, sequences,
    qualities (None for FASTA), as :func:`iter_reads` gives them one by one.

    A block is checked in a few passes over all its records at once; only a block
    with a fault is checked record by record, so that the first fault in file order
    is the one reported.
    """
    name = describe_path(path)
    before = 0  # records in the blocks already given
    with _open_records(path) as reader:
        records = iter(reader)
        while True:
            block, fault = _next_block(records, size)
            if block:
                yield _validated_block(name, before, block, allow_empty)
                before += len(block)
            if fault is not None:
                raise InputError(_fault_message(path, before, fault))
            if len(block) < size:
                return


def _next_block(records, size: int) -> tuple[list, str | None]:
    """Up to ``size`` records, and the reader's fault that ended the block early, if any
    (the records before a fault are still validated first)."""
    block: list = []
    try:
        for record in itertools.islice(records, size):
            block.append(record)
    except dnaio.FileFormatError as e:
        return block, _format_error(e)
    except READ_ERRORS as e:
        return block, f"cannot read: {e}"
    return block, None


def _validated_block(name: str, before: int, block: list, allow_empty: bool
                     ) -> tuple[list[str], list[str], list[str | None]]:
    seqs = [record.sequence for record in block]
    try:
        ids = [record.name.split(None, 1)[0] for record in block]
    except IndexError:  # an empty name: found and reported below
        ids = None
    other = _other_than_bases(seqs)
    if other:
        seqs = [seq.upper() for seq in seqs]  # lower case is allowed: is anything else there?
        other = _other_than_bases(seqs)
    faulty = ids is None or (not allow_empty and not all(seqs)) or other
    if faulty:
        for number, (record, seq) in enumerate(zip(block, seqs), start=before + 1):
            _check_record(name, number, record.name, seq, allow_empty)
    return ids, seqs, [record.qualities for record in block]


def _other_than_bases(seqs: list[str]) -> bool:
    """Whether any sequence holds a character other than A, C, G, T and N (upper case)."""
    # One translate over the whole block: a regular expression is ten times slower.
    # A character outside ASCII becomes '?', which is not a base either.
    return bool("".join(seqs).encode("ascii", "replace").translate(None, b"ACGTN"))


def _check_record(name: str, number: int, header: str, seq: str, allow_empty: bool) -> None:
    """Raise the fault of one record (upper-cased ``seq``), if it has one."""
    read_id = header.split(maxsplit=1)[0] if header.strip() else ""
    if not read_id:
        raise InputError(f"{name}: record {number}: empty read id")
    bad = _INVALID_BASE.search(seq)
    if bad is not None:
        raise InputError(
            f"{name}: record {number} ({read_id}): invalid character "
            f"{bad.group()!r} at position {bad.start() + 1} (expected A, C, G, T or N)"
        )
    if not seq and not allow_empty:
        raise InputError(f"{name}: record {number} ({read_id}): empty sequence")


def read_sequences(path: str | os.PathLike, *, allow_empty: bool = True) -> ReadSet:
    """Read and validate all records of a FASTA/FASTQ file (see the module rules)."""
    name = describe_path(path)
    ids: list[str] = []
    seqs: list[str] = []
    quals: list[str] = []
    has_quals = True
    first_seen: dict[str, int] = {}
    for read_id, seq, qual in iter_reads(path, allow_empty=allow_empty):
        if read_id in first_seen:
            raise InputError(
                f"{name}: record {len(ids) + 1} ({read_id}): duplicate read id "
                f"(first seen at record {first_seen[read_id]})"
            )
        first_seen[read_id] = len(ids) + 1
        ids.append(read_id)
        seqs.append(seq)
        if qual is None:
            has_quals = False
        else:
            quals.append(qual)
    return ReadSet(ids, seqs, quals if has_quals and ids else None)


def iter_read_chunks(
    path: str | os.PathLike, chunk_size: int, *, check_duplicates: bool = True
) -> Iterator[ReadSet]:
    """Stream a file as ReadSets of at most ``chunk_size`` reads (bounded memory).

    Duplicate-id checking keeps one set entry per read id (ids only, not sequences).
    """
    name = describe_path(path)
    seen: set[str] = set()
    chunk = ReadSet([], [], None)
    for number, (read_id, seq, _qual) in enumerate(iter_reads(path), start=1):
        if check_duplicates:
            if read_id in seen:
                raise InputError(f"{name}: record {number} ({read_id}): duplicate read id"
                                 f"{_first_seen(path, read_id)}")
            seen.add(read_id)
        chunk.ids.append(read_id)
        chunk.seqs.append(seq)
        if len(chunk) >= chunk_size:
            yield chunk
            chunk = ReadSet([], [], None)
    if len(chunk):
        yield chunk


def _first_seen(path: str | os.PathLike, read_id: str) -> str:
    """`` (first seen at record N)``, as :func:`read_sequences` says it, found by reading a
    regular file again: the stream keeps ids only, no record numbers (the memory of one
    int per read), and this is the error path. A stream cannot be read again: ``""``."""
    if str(path) == "-" or not Path(path).is_file():
        return ""
    for number, (rid, _seq, _qual) in enumerate(iter_reads(path), start=1):
        if rid == read_id:
            return f" (first seen at record {number})"
    return ""


def write_sequences(
    path: str | os.PathLike,
    ids: Sequence[str],
    seqs: Sequence[str],
    quals: Sequence[str] | None = None,
) -> None:
    """Write FASTA (no qualities) or FASTQ; gzip when the name ends in ``.gz``; atomic."""
    fmt = "fastq" if quals is not None else "fasta"
    if str(path) == "-":
        with (writing_stdout() as out,
              dnaio.open(out.buffer, mode="w", fileformat=fmt) as writer):
            _write_records(writer, ids, seqs, quals)
        return
    with (
        atomic_path(path) as tmp,
        dnaio.open(tmp, mode="w", fileformat=fmt, compression_level=5) as writer,
    ):
        _write_records(writer, ids, seqs, quals)


def _write_records(writer, ids, seqs, quals) -> None:
    if quals is None:
        for i, s in zip(ids, seqs):
            writer.write(dnaio.SequenceRecord(i, s))
    else:
        for i, s, q in zip(ids, seqs, quals):
            writer.write(dnaio.SequenceRecord(i, s, q))
