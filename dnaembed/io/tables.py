"""Tab-separated tables: the one reader and writer of every TSV dnaembed reads or writes.

A table dnaembed writes has a ``#`` provenance line (dnaembed version, command,
parameters), a ``#``-prefixed line of column names, then rows. Plain, or
compressed by its name (``.gz``...). Readers take plain or compressed (by
content, standard input too) and name the file and line of any problem.

Which lines are comments (so that a read id that starts with ``#`` is data):
only the header block at the top of the file. It is any number of lines that
are ``#`` alone or start with ``#`` and a space (the provenance line, free
text), then at most one line that starts with ``#`` and holds a tab: the
column names. Every line after the header block is a row, whatever its first
character; blank lines are skipped. So ``#read_id<TAB>cluster_id`` at the top is
the column line, and a later ``#r7<TAB>3`` is read ``#r7`` in cluster 3. A file
without a column line whose first read id starts with ``#`` would have that row
taken for column names: dnaembed always writes the column line.

Cluster tables (``read_id cluster_id [orientation]``) and truth tables
(``read_id strand_id ...``) are read here for every command."""

from __future__ import annotations

import io
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dnaembed import __version__
from dnaembed.errors import InputError
from dnaembed.io.atomic import open_output
from dnaembed.io.sequences import READ_ERRORS, describe_path
from dnaembed.log import logger


def command_header(command: str, params: dict[str, object]) -> str:
    """The ``#`` header line of every TSV: dnaembed version, command and its parameters."""
    parts = [f"{k}={shlex.quote(str(v))}" for k, v in params.items() if v is not None]
    return f"# dnaembed {__version__} {command} " + " ".join(parts)


def write_tsv(
    path: str | os.PathLike,
    columns: Sequence[str],
    rows: Iterator[Sequence[object]] | Sequence[Sequence[object]],
    header: str | None = None,
) -> None:
    """Write a TSV: optional ``#`` provenance line, ``#``-prefixed column names, rows."""
    with open_output(path) as out:
        if header:
            out.write(header.rstrip("\n") + "\n")
        out.write("#" + "\t".join(columns) + "\n")
        out.writelines("\t".join(map(str, row)) + "\n" for row in rows)


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a text file: plain or compressed (by content), ``-`` for standard input."""
    from xopen import xopen

    name = describe_path(path)
    # Not is_file(): a named pipe or a shell's process substitution (/dev/fd/63) is read
    # as standard input is; they were refused as "no such file".
    if str(path) != "-" and not Path(path).exists():
        raise InputError(f"{name}: no such file")
    if str(path) != "-" and Path(path).is_dir():
        raise InputError(f"{name}: is a directory, not a table")
    try:
        if str(path) == "-":
            source: IO[bytes] = sys.stdin.buffer
        else:
            # A nameless stream: xopen then detects compression by content, not by suffix.
            source = io.BytesIO(Path(path).read_bytes())
    except READ_ERRORS as e:
        raise InputError(f"{name}: cannot read: {e}") from None
    data = bytearray()
    try:
        with xopen(source, "rb", threads=0) as raw:
            # In blocks, read1(): read() dropped what it had decompressed when the stream was
            # cut short or corrupt, so the lines before could not be named.
            read = getattr(raw, "read1", raw.read)
            while block := read(1 << 16):
                data += block
    except READ_ERRORS as e:
        lines = data.count(b"\n")
        where = f" after line {lines}" if lines else ""
        raise InputError(f"{name}: cannot read{where}: {e}") from None
    return _decoded_lines(bytes(data), name)


def _decoded_lines(data: bytes, name: str) -> list[str]:
    """The lines of UTF-8 ``data``; a byte that is not UTF-8 is an error naming its line
    (Python's message named its offset in the decompressed bytes). A leading byte-order
    mark (Notepad's, a spreadsheet's "UTF-8" export) is dropped: it became part of the first
    read id, invisible in "read r1: not in the reads file", and hid a column line."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{name}: line {line}: not UTF-8 text (byte "
                         f"0x{data[e.start]:02x})") from None


def header_lines(lines: Sequence[str]) -> int:
    """How many leading lines are the header block (see the module notes on comments)."""
    count = 0
    for line in lines:
        if line == "#" or line.startswith("# ") or not line.strip():
            count += 1
        elif line.startswith("#") and "\t" in line:
            return count + 1
        else:
            break
    return count


def numbered_rows(path: str | os.PathLike, min_columns: int = 2) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each row of a TSV (see :func:`read_table`), so that a
    reader can name the line of a bad row, not its rank among the rows."""
    name = describe_path(path)
    lines = read_lines(path)
    skip = header_lines(lines)
    rows = []
    for number, line in enumerate(lines[skip:], start=skip + 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < min_columns:
            raise InputError(
                f"{name}: line {number}: expected at least {min_columns} tab-separated "
                f"columns, found {len(fields)}"
            )
        rows.append((number, fields))
    return rows


def read_table(path: str | os.PathLike, min_columns: int = 2) -> list[list[str]]:
    """Read a TSV written by dnaembed (or a compatible one): the header block is skipped.

    Plain or compressed (by content). Each row must have at least
    ``min_columns`` fields. Only the header block is comments (module notes).
    """
    return [fields for _, fields in numbered_rows(path, min_columns)]


def read_labels(path: str | os.PathLike, *, empty_labels: bool = True) -> dict[str, str]:
    """``read_id -> label`` from the first two columns; a read listed twice is an error.

    ``empty_labels=False``: an empty label is an error too (a clusters table, where it
    would be a cluster of its own; a truth's empty strand id means a read of no strand).
    """
    name = describe_path(path)
    labels: dict[str, str] = {}
    first: dict[str, int] = {}
    for number, row in numbered_rows(path, min_columns=2):
        rid, label = row[0].strip(), row[1].strip()
        if not rid:
            raise InputError(f"{name}: line {number}: empty read id")
        if not label and not empty_labels:
            raise InputError(f"{name}: line {number}: read {rid}: empty cluster id")
        if rid in labels:
            raise InputError(f"{name}: line {number}: read {rid} listed twice (first on line "
                             f"{first[rid]})")
        labels[rid] = label
        first[rid] = number
    return labels


@dataclass
class ClusterTable:
    """A clusters TSV: cluster id (and orientation, when given) per read id."""

    labels: dict[str, str]
    orientation: dict[str, str] | None


def read_cluster_table(
    path: str | os.PathLike, read_ids: Sequence[str] | None = None
) -> ClusterTable:
    """Read ``read_id<TAB>cluster_id[<TAB>orientation]`` rows (after the header block).

    What ``dnaembed cluster`` writes, and the truth tables of ``dnaembed
    simulate`` and of the real data set. The third column is taken as the
    orientation when every row has one and all are ``+`` or ``-``; otherwise it
    is ignored (logged). A read id listed twice is an error; with ``read_ids``,
    so is a read id that is not among them (a TSV of other reads). Reads of
    ``read_ids`` absent from the table are left out of every cluster.
    """
    from dnaembed.io.sequences import describe_path

    name = describe_path(path)
    rows = read_table(path, min_columns=2)
    labels: dict[str, str] = {}
    signs: list[str | None] = []
    for row in rows:
        rid, cluster = row[0].strip(), row[1].strip()
        if not rid or not cluster:
            raise InputError(f"{name}: read {rid or '(empty)'}: empty read id or cluster id")
        if rid in labels:
            raise InputError(f"{name}: read {rid}: listed twice")
        labels[rid] = cluster
        signs.append(row[2].strip() if len(row) > 2 else None)
    orientation = None
    if signs and all(x in ("+", "-") for x in signs):
        orientation = dict(zip(labels, signs))
    elif any(x is not None for x in signs):
        logger.info("%s: third column is not an orientation (+/-) on every row: ignored", name)
    if read_ids is not None:
        known = set(read_ids)
        unknown = [rid for rid in labels if rid not in known]
        if unknown:
            raise InputError(
                f"{name}: read {unknown[0]}: not in the reads file "
                f"({len(unknown)} of {len(labels)} read ids unknown: "
                "is it the table of these reads?)"
            )
    return ClusterTable(labels, orientation)


def cluster_id_key(cluster_id: object) -> tuple:
    """Sort key of cluster ids: numbers by value (2 before 10), then other ids by text."""
    text = str(cluster_id)
    # isdigit() holds for '²', which int() refuses ("internal error: ValueError").
    return (0, int(text), "") if text.isascii() and text.isdigit() else (1, 0, text)
