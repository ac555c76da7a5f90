"""Each peer's output format -> one mapping ``read_id -> cluster_id`` (and back to a TSV).

Every parser takes the lines (or text) of the tool's output, so the tests can feed
literal samples. Cluster ids are strings; what they are is the tool's business
(a centroid's id, a cluster number): only equality matters for scoring.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path


def parse_cluster_tsv(lines: Iterable[str]) -> dict[str, str]:
    """``read_id<TAB>cluster_id[<TAB>...]`` (dnaembed's format): ``#`` lines skipped.

    A first row whose read id is ``read_id`` is a header and is skipped too.
    """
    out: dict[str, str] = {}
    for line in lines:
        line = line.rstrip("\r\n")
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise ValueError(f"clusters table: expected read_id<TAB>cluster_id, got {line!r}")
        if not out and fields[0] == "read_id":
            continue
        out[fields[0]] = fields[1]
    return out


def parse_uc(lines: Iterable[str]) -> dict[str, str]:
    """vsearch/usearch ``--uc``: ``S`` (centroid) and ``H`` (hit) records give the cluster.

    Fields: type, cluster number, length, identity, strand, ..., query label (9th),
    target label (10th). ``C`` records are per-cluster summaries and are skipped.
    """
    out: dict[str, str] = {}
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.rstrip("\r\n").split("\t")
        if fields[0] in ("S", "H") and len(fields) >= 9:
            out[fields[8]] = fields[1]
    return out


def parse_cdhit_clstr(lines: Iterable[str]) -> dict[str, str]:
    """CD-HIT ``.clstr``: ``>Cluster N`` then ``i<TAB>LEN nt, >ID... (*|at +/P%)`` lines.

    Run with ``-d 0`` so that ids are whole (up to the first space).
    """
    out: dict[str, str] = {}
    cluster: str | None = None
    for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            continue
        if line.startswith(">Cluster"):
            cluster = line.split()[1]
            continue
        if cluster is None:
            raise ValueError(f"cd-hit .clstr: member line before any cluster: {line!r}")
        start = line.index(">") + 1
        end = line.index("...", start)
        out[line[start:end]] = cluster
    return out


def parse_mmseqs_tsv(lines: Iterable[str]) -> dict[str, str]:
    """MMseqs2 ``easy-linclust`` ``PREFIX_cluster.tsv``: ``representative<TAB>member``."""
    out: dict[str, str] = {}
    for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            continue
        rep, member = line.split("\t")[:2]
        out[member] = rep
    return out


def parse_clover(text: str, keys: Sequence[str] | None = None) -> dict[str, str]:
    """Clover's ``-O NAME`` file (``NAME.txt``): a Python list of ``(read, core)`` tuples.

    Clover lists a read with the first read of the cluster it joined; the core reads
    themselves (those that opened a cluster) are not listed, so each core is added to
    its own cluster here. Reads it skipped (too short, containing N, or too far from
    every core yet too close to open one) are absent. ``keys``: when the input was
    written with line numbers as read names (see :func:`write_clover_input`), the ids
    they stand for.
    """
    text = text.strip()
    pairs = ast.literal_eval(text) if text else []
    if isinstance(pairs, tuple):  # a single tuple written without the list brackets
        pairs = [pairs]
    out: dict[str, str] = {}
    for read, core in pairs:
        out[str(read)] = str(core)
    for core in set(out.values()):
        out.setdefault(core, core)
    if keys is not None:
        out = {keys[int(r)]: keys[int(c)] for r, c in out.items()}
    return out


def parse_starcode(lines: Iterable[str], ids: Sequence[str]) -> dict[str, str]:
    """Starcode with ``--seq-id``: ``centroid<TAB>count[<TAB>sequences]<TAB>numbers``.

    The last column lists the members' 1-based line numbers in the input; ``ids``
    are the read ids in input order. The cluster id is the centroid sequence's
    line (the first number of a cluster is as good: any label works).
    """
    out: dict[str, str] = {}
    for k, line in enumerate(lines):
        line = line.rstrip("\r\n")
        if not line:
            continue
        fields = line.split("\t")
        numbers = fields[-1]
        if len(fields) < 3 or not numbers.replace(",", "").isdigit():
            raise ValueError(f"starcode output: no sequence numbers (use --seq-id): {line!r}")
        for n in numbers.split(","):
            out[ids[int(n) - 1]] = f"c{k}"
    return out


def complete(mapping: dict[str, str], read_ids: Sequence[str]) -> tuple[dict[str, str], int]:
    """Every input read in the output: the ones a tool dropped become singletons.

    Returns the completed mapping (in input order) and how many reads were dropped.
    Reads the tool reported that are not in the input are an error (a converter bug).
    """
    known = set(read_ids)
    stray = [r for r in mapping if r not in known]
    if stray:
        raise ValueError(f"{len(stray)} output read ids are not input reads, e.g. {stray[0]!r}")
    out: dict[str, str] = {}
    dropped = 0
    for rid in read_ids:
        label = mapping.get(rid)
        if label is None:
            dropped += 1
            label = f"\0dropped:{rid}"
        else:
            label = f"c:{label}"
        out[rid] = label
    # Give clusters short stable names: by order of first appearance.
    names: dict[str, str] = {}
    for rid, label in out.items():
        out[rid] = names.setdefault(label, str(len(names)))
    return out, dropped


def write_cluster_tsv(mapping: dict[str, str], path: str | Path) -> None:
    """``read_id<TAB>cluster_id`` with a ``#`` column line, like ``dnaembed cluster``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write("#read_id\tcluster_id\n")
        out.writelines(f"{r}\t{c}\n" for r, c in mapping.items())
    tmp.replace(path)


def write_fasta(path: str | Path, ids: Sequence[str], seqs: Sequence[str]) -> None:
    """One-line-per-sequence FASTA (what every peer reads)."""
    with open(path, "w", encoding="ascii") as out:
        out.writelines(f">{i}\n{s}\n" for i, s in zip(ids, seqs))


def write_clover_input(path: str | Path, seqs: Sequence[str]) -> None:
    """Clover's plain text input: ``NAME SEQUENCE`` per line; names are line numbers.

    Clover drops every *line* containing ``N`` (names included), so names are digits.
    """
    with open(path, "w", encoding="ascii") as out:
        out.writelines(f"{k} {s}\n" for k, s in enumerate(seqs))


def write_lines(path: str | Path, seqs: Sequence[str]) -> None:
    """One sequence per line (Starcode's plain input; line numbers are its read ids)."""
    with open(path, "w", encoding="ascii") as out:
        out.writelines(f"{s}\n" for s in seqs)
