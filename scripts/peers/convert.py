"""Each peer's output format -> one mapping ``read_id -> cluster_id`` (and back to a TSV).

The parsers of vsearch ``.uc``, CD-HIT ``.clstr``, MMseqs2 and Starcode output are
the library's (:mod:`dnaembed.io.formats`, behind ``dnaembed evaluate --format``);
Clover's, which only this benchmark runs, is here. Every parser takes the lines (or
text) of the tool's output, so the tests can feed literal samples. Cluster ids are
strings; what they are is the tool's business (a centroid's id, a cluster number):
only equality matters for scoring.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from dnaembed.io.formats import parse_clstr as parse_cdhit_clstr
from dnaembed.io.formats import parse_mmseqs as parse_mmseqs_tsv
from dnaembed.io.formats import parse_starcode, parse_uc
from dnaembed.io.tables import write_tsv

__all__ = ["parse_cdhit_clstr", "parse_clover", "parse_mmseqs_tsv",
           "parse_starcode", "parse_uc", "complete", "write_cluster_tsv", "write_fasta",
           "write_clover_input", "write_lines"]


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
    write_tsv(path, ["read_id", "cluster_id"], mapping.items())


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
