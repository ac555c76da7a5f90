"""Other tools' cluster formats, written (``cluster --format``) and read (``evaluate --format``).

* ``uc``: vsearch/usearch ``--uc``, ten tab-separated fields per record: type
  (``S`` a cluster's centroid, ``H`` a hit, ``C`` a cluster summary), cluster
  number, length (``S``: the centroid's, ``H``: the query's, ``C``: the cluster
  size), identity to the centroid in percent (``H``), strand (``H``), two unused
  fields, the compressed alignment (``H``; vsearch's letters: ``M`` a column of
  both, ``D`` a query base the centroid lacks, ``I`` a centroid base the query
  lacks, a count before a letter when above one, ``=`` for identical
  sequences), the query label and the centroid label (``H``). Identity is
  vsearch's default (``--iddef 2``): matching columns over the columns of the
  alignment without its terminal gaps. dnaembed writes, cluster by cluster, the
  ``S`` record then the ``H`` records of its members, then every ``C`` record.
* ``clstr``: CD-HIT ``.clstr``: ``>Cluster N`` then one line per member,
  ``K<TAB>LENnt, >ID... *`` for the representative (written first) and
  ``... at +/97.33%`` (strand, identity over the shorter sequence) for the others.
* ``mmseqs``: MMseqs2 ``createtsv`` / ``easy-linclust`` ``_cluster.tsv``:
  ``representative<TAB>member`` for every read, the representative's own line first.
* ``starcode`` (read only): ``starcode --seq-id`` output,
  ``centroid<TAB>count[<TAB>sequences]<TAB>numbers`` where the numbers are the
  members' 1-based lines in the input, mapped to read ids in input order.

The identities and alignments are an optimal unit-cost global alignment of each
member, in its orientation, against its cluster's representative (rapidfuzz).

Each reader takes the lines of the tool's output and returns ``read_id ->
cluster label`` (labels are the tool's: a number or a centroid's id; only
equality matters). Problems are errors naming the file and the line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from dnaembed.encoding import reverse_complement
from dnaembed.errors import InputError

#: What ``cluster --format`` writes; ``evaluate --format`` reads these and ``starcode``.
WRITE_FORMATS = ("tsv", "uc", "clstr", "mmseqs")
READ_FORMATS = ("tsv", "uc", "clstr", "mmseqs", "starcode")


class Clustering(Protocol):
    """What the writers read of a clustering result (:class:`ClusterResult` has it)."""

    labels: np.ndarray
    orientation: np.ndarray
    representatives: np.ndarray

    def sizes(self) -> np.ndarray:
        """Reads per cluster."""
        ...


# --- writing -----------------------------------------------------------------------------


def _members(result: Clustering) -> list[list[int]]:
    """Read indices per cluster: the representative first, then the others in input order."""
    order = np.argsort(result.labels, kind="stable")
    bounds = np.cumsum(result.sizes())[:-1]
    groups = np.split(order, bounds) if len(result.representatives) else []
    out = []
    for rep, group in zip(result.representatives.tolist(), groups):
        out.append([rep] + [i for i in group.tolist() if i != rep])
    return out


def _run(count: int, letter: str) -> str:
    return f"{count if count > 1 else ''}{letter}"


def _columns(query: str, target: str) -> list[tuple[int, str, int]]:
    """The alignment's runs: (length, vsearch letter, matching bases in the run)."""
    from rapidfuzz.distance import Levenshtein

    runs: list[list] = []
    for tag, q0, q1, t0, t1 in Levenshtein.opcodes(query, target):
        # rapidfuzz edits the query into the target: 'delete' drops a query base (vsearch
        # D: a base the centroid lacks), 'insert' adds a target base (vsearch I).
        letter = {"equal": "M", "replace": "M", "delete": "D", "insert": "I"}[tag]
        length = q1 - q0 if letter != "I" else t1 - t0
        matches = length if tag == "equal" else 0
        if runs and runs[-1][1] == letter:
            runs[-1][0] += length
            runs[-1][2] += matches
        else:
            runs.append([length, letter, matches])
    return [(n, letter, m) for n, letter, m in runs]


def _alignment(query: str, target: str) -> tuple[str, float, float]:
    """(vsearch CIGAR, vsearch identity, CD-HIT identity) of an optimal global alignment.

    vsearch's identity (``--iddef 2``) is the matching columns over the columns without
    the terminal gaps; CD-HIT's, the matching bases over the shorter sequence.
    """
    if query == target:
        return "=", 100.0, 100.0
    runs = _columns(query, target)
    matches = sum(m for _, _, m in runs)
    columns = sum(n for n, _, _ in runs)
    for end in {0, len(runs) - 1} if runs else ():
        if runs[end][1] != "M":
            columns -= runs[end][0]
    shorter = min(len(query), len(target))
    vsearch = 100.0 * matches / columns if columns > 0 else 0.0
    cdhit = 100.0 * matches / shorter if shorter > 0 else 0.0
    return "".join(_run(n, letter) for n, letter, _ in runs), vsearch, cdhit


def _hits(ids, seqs, result: Clustering) -> Iterable[tuple[int, list[tuple]]]:
    """Per cluster: its id and (read, strand, cigar, vsearch id, cd-hit id) per member."""
    flips = result.orientation.tolist()
    for c, members in enumerate(_members(result)):
        rep = members[0]
        target = seqs[rep]
        rows = [(rep, "+", "*", 100.0, 100.0)]
        for i in members[1:]:
            flipped = flips[i] != flips[rep]
            query = reverse_complement(seqs[i]) if flipped else seqs[i]
            cigar, vsearch, cdhit = _alignment(query, target)
            rows.append((i, "-" if flipped else "+", cigar, vsearch, cdhit))
        yield c, rows


def uc_lines(ids: Sequence[str], seqs: Sequence[str], result: Clustering) -> Iterable[str]:
    """The records of a vsearch ``.uc`` file (module notes), one string per line."""
    for c, rows in _hits(ids, seqs, result):
        rep = rows[0][0]
        yield f"S\t{c}\t{len(seqs[rep])}\t*\t*\t*\t*\t*\t{ids[rep]}\t*\n"
        for i, strand, cigar, identity, _ in rows[1:]:
            yield (f"H\t{c}\t{len(seqs[i])}\t{identity:.1f}\t{strand}\t0\t0\t{cigar}\t"
                   f"{ids[i]}\t{ids[rep]}\n")
    sizes = result.sizes().tolist()
    for c, rep in enumerate(result.representatives.tolist()):
        yield f"C\t{c}\t{sizes[c]}\t*\t*\t*\t*\t*\t{ids[rep]}\t*\n"


def clstr_lines(ids: Sequence[str], seqs: Sequence[str], result: Clustering) -> Iterable[str]:
    """The lines of a CD-HIT ``.clstr`` file (module notes)."""
    for c, rows in _hits(ids, seqs, result):
        yield f">Cluster {c}\n"
        for k, (i, strand, _, _, identity) in enumerate(rows):
            mark = "*" if k == 0 else f"at {strand}/{identity:.2f}%"
            yield f"{k}\t{len(seqs[i])}nt, >{ids[i]}... {mark}\n"


def mmseqs_lines(ids: Sequence[str], seqs: Sequence[str], result: Clustering) -> Iterable[str]:
    """The lines of an MMseqs2 cluster TSV: ``representative<TAB>member``."""
    for members in _members(result):
        rep = ids[members[0]]
        for i in members:
            yield f"{rep}\t{ids[i]}\n"


def write_cluster_format(
    path: str | os.PathLike, fmt: str, ids: Sequence[str], seqs: Sequence[str],
    result: Clustering,
) -> None:
    """Write ``result`` as ``uc``, ``clstr`` or ``mmseqs`` (atomic, compressed by name)."""
    from dnaembed.io.atomic import open_output

    lines = {"uc": uc_lines, "clstr": clstr_lines, "mmseqs": mmseqs_lines}[fmt]
    with open_output(path) as out:
        out.writelines(lines(ids, seqs, result))


# --- reading -----------------------------------------------------------------------------


def _rows(lines: Iterable[str]) -> Iterable[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r\n")
        if line.strip():
            yield number, line


class _Assignments:
    """``read_id -> label`` as a reader collects it, line by line.

    Every tool lists each read once, so a read on two lines (a damaged or concatenated
    file, or one of a search rather than a clustering) is an error rather than the last
    line winning silently; so are an empty id or label, which would be scored as a read
    or a cluster of their own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.labels: dict[str, str] = {}
        self._line: dict[str, int] = {}
        self._opened: dict[str, int] = {}

    def add(self, number: int, rid: str, label: str, what: str = "cluster label") -> None:
        """Put read ``rid`` (found on line ``number``) in cluster ``label``."""
        if not rid:
            raise InputError(f"{self.name}: line {number}: empty read id")
        if not label:
            raise InputError(f"{self.name}: line {number}: read {rid}: empty {what}")
        if rid in self.labels:
            raise InputError(f"{self.name}: line {number}: read {rid} listed twice (first on "
                             f"line {self._line[rid]})")
        self.labels[rid] = label
        self._line[rid] = number

    def new_cluster(self, number: int, label: str, what: str) -> None:
        """A record that opens cluster ``label`` (on line ``number``): a second one is two
        files joined, whose cluster numbers both start at 0 and would merge clusters."""
        first = self._opened.setdefault(label, number)
        if first != number:
            raise InputError(f"{self.name}: line {number}: a second {what} of cluster {label} "
                             f"(first on line {first}): are two files joined?")


def _first_word(label: str) -> str:
    """A read id is its record name up to the first whitespace (as the reads' readers take
    it): vsearch --notrunclabels and MMseqs2 --full-header write whole FASTA headers."""
    words = label.split(maxsplit=1)
    return words[0] if words else ""


def parse_uc(lines: Iterable[str], name: str = "<uc>") -> dict[str, str]:
    """vsearch/usearch ``.uc``: ``S`` and ``H`` records give each query's cluster number.

    ``C`` (summary) and ``N`` (no hit) records are skipped; ``#`` lines too. A query's id
    is its label up to the first whitespace.
    """
    out = _Assignments(name)
    for number, line in _rows(lines):
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        # All ten fields: a last line cut short within its query label has nine, and the
        # label read there was a wrong read (r2 of r23).
        if fields[0] not in ("S", "H", "C", "N") or len(fields) < 10:
            raise InputError(f"{name}: line {number}: not a .uc record (10 tab-separated fields "
                             f"starting with S, H, C or N)")
        if fields[0] == "S":
            out.new_cluster(number, fields[1].strip(), "centroid (S) record")
        if fields[0] in ("S", "H"):
            out.add(number, _first_word(fields[8]), fields[1].strip(), "cluster number")
    return out.labels


def parse_clstr(lines: Iterable[str], name: str = "<clstr>") -> dict[str, str]:
    """CD-HIT ``.clstr``: ``>Cluster N`` then ``K<TAB>LEN(nt|aa), >ID... (*|at ...)`` lines.

    Ids are what CD-HIT kept of the names (run it with ``-d 0`` for whole ids).
    """
    out = _Assignments(name)
    cluster: str | None = None
    for number, line in _rows(lines):
        if line.startswith(">Cluster"):
            parts = line.split()
            if len(parts) < 2:
                raise InputError(f"{name}: line {number}: '>Cluster' without a number")
            cluster = parts[1]
            out.new_cluster(number, cluster, "'>Cluster' line")
            continue
        start = line.find(">") + 1
        # The last '...': CD-HIT's mark after the id, which may hold dots of its own.
        end = line.rfind("...", start)
        if cluster is None or start == 0 or end < 0:
            where = "member line before any '>Cluster' line" if cluster is None else (
                "not a member line ('K<TAB>LENnt, >ID... *')")
            raise InputError(f"{name}: line {number}: {where}")
        out.add(number, line[start:end], cluster)
    return out.labels


def parse_mmseqs(lines: Iterable[str], name: str = "<mmseqs>") -> dict[str, str]:
    """MMseqs2 cluster TSV: ``representative<TAB>member``; the representative is the label.

    Ids are taken up to the first whitespace (``createtsv --full-header`` writes headers).
    """
    out = _Assignments(name)
    for number, line in _rows(lines):
        fields = line.split("\t")
        if len(fields) < 2:
            raise InputError(f"{name}: line {number}: expected representative<TAB>member")
        out.add(number, _first_word(fields[1]), _first_word(fields[0]), "representative")
    return out.labels


#: Starcode's last column with ``--seq-id``: 1-based sequence numbers, comma-separated.
_NUMBERS = re.compile(r"[0-9]+(,[0-9]+)*")


def parse_starcode(lines: Iterable[str], ids: Sequence[str], name: str = "<starcode>"
                   ) -> dict[str, str]:
    """Starcode ``--seq-id`` output; ``ids``: the read ids in the order of its input lines."""
    out = _Assignments(name)
    for k, (number, line) in enumerate(_rows(lines)):
        fields = line.split("\t")
        numbers = fields[-1]
        # A full match of ASCII digits: str.isdigit() let '1,,2' and '²' through to int().
        if len(fields) < 3 or not _NUMBERS.fullmatch(numbers):
            raise InputError(f"{name}: line {number}: no sequence numbers in the last column "
                             "(comma-separated; run starcode with --seq-id)")
        for n in numbers.split(","):
            if not 1 <= int(n) <= len(ids):
                raise InputError(f"{name}: line {number}: sequence number {n} is not a line of "
                                 f"the reads ({len(ids)} reads)")
            out.add(number, ids[int(n) - 1], f"c{k}")
    return out.labels


def read_assignments(
    path: str | os.PathLike, fmt: str = "tsv", read_ids: Sequence[str] | None = None
) -> dict[str, str]:
    """``read_id -> cluster label`` from a clusters file in format ``fmt`` (READ_FORMATS).

    ``read_ids`` (the reads in input order) is needed for ``starcode``. A file that fails
    to parse and looks like another format's is an error that names that format.
    """
    try:
        return _parse_file(path, fmt, read_ids)
    except InputError as e:
        hint = _format_hint(path, fmt)
        if not hint:
            raise
        raise InputError(f"{e}{hint}") from None


def _parse_file(path: str | os.PathLike, fmt: str, read_ids: Sequence[str] | None
                ) -> dict[str, str]:
    from dnaembed.io.sequences import describe_path
    from dnaembed.io.tables import read_labels, read_lines

    if fmt == "tsv":
        return read_labels(path, empty_labels=False)
    name = describe_path(path)
    lines = read_lines(path)
    if fmt == "starcode":
        if read_ids is None:
            raise InputError(f"{name}: starcode output numbers its input lines: give the reads "
                             "(--reads) to name them")
        return parse_starcode(lines, read_ids, name)
    parsers = {"uc": parse_uc, "clstr": parse_clstr, "mmseqs": parse_mmseqs}
    if fmt not in parsers:
        raise InputError(f"unknown clusters format {fmt!r} (use {', '.join(READ_FORMATS)})")
    return parsers[fmt](lines, name)


#: How each format is named in a hint.
_FORMAT_NAMES = {"tsv": "a dnaembed clusters table", "uc": "a vsearch .uc file",
                 "clstr": "a CD-HIT .clstr file", "mmseqs": "an MMseqs2 cluster TSV",
                 "starcode": "starcode --seq-id output"}


def guess_format(lines: Sequence[str]) -> str | None:
    """The format (READ_FORMATS) that the first lines of a clusters file look like, if any.

    Only what sets a format apart is looked at: a ``.clstr`` header, a ``.uc`` record, a
    dnaembed header line, starcode's sequence and numbers, MMseqs2's first line (the
    representative, its own member). A plain two-column table is none of them.
    """
    rows = [line.rstrip("\r\n") for line in lines[:200] if line.strip()]
    if not rows:
        return None
    if rows[0].startswith(">Cluster"):
        return "clstr"
    if rows[0].startswith(("# dnaembed", "#read_id\t")):
        return "tsv"
    data = [row for row in rows if not row.startswith("#")]
    fields = data[0].split("\t") if data else []
    if len(fields) >= 9 and fields[0] in ("S", "H", "C", "N"):
        return "uc"
    if (len(fields) >= 3 and re.fullmatch(r"[ACGTNacgtn]+", fields[0])
            and _NUMBERS.fullmatch(fields[-1])):
        return "starcode"
    if len(fields) == 2 and fields[0] == fields[1]:
        return "mmseqs"
    return None


def _format_hint(path: str | os.PathLike, fmt: str) -> str:
    """`` (it looks like X: give --format Y)`` when the file looks like another format.

    The file is read again (only on this error path), so only a regular file gets a hint:
    standard input and a pipe cannot be read twice, and opening a named pipe again waits
    for a writer that never comes.
    """
    from pathlib import Path

    from dnaembed.io.tables import read_lines

    if str(path) == "-" or not Path(path).is_file():
        return ""
    try:
        guess = guess_format(read_lines(path))
    except InputError:
        return ""
    if guess is None or guess == fmt:
        return ""
    return f" (it looks like {_FORMAT_NAMES[guess]}: give --format {guess})"
