"""The benchmark's data sets: simulated with ``dnaembed simulate``'s library, and the real one.

Simulated sets (``--strands`` random strands, negative binomial coverage of mean
``--coverage``): ``illumina``, ``illumina-array``, ``nanopore``, ``nanopore-hard``
at 150 nt, and ``nanopore-110`` (the ``nanopore`` channel on 110-nt strands, like
Microsoft's clustered nanopore reads). Reads come in the strands' orientation unless
``--reverse-fraction`` says otherwise. ``real``: ``../shared/data/ldpc-exp7`` (raw
orientation, truncated reads, shared 25-nt primers, unlabelled reads kept as noise);
with ``--strands N`` below its 13,248 designs, the reads of N designs drawn at random
plus the same fraction of its unlabelled reads.

Each set is written once under ``bench-out/data/`` and reused while its parameters
are unchanged; every tool then reads the same reads, in the format it takes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from benchlib import REAL_READS, REAL_SET, REAL_TRUTH

from peers.convert import write_clover_input, write_fasta, write_lines

ROOT = Path(__file__).resolve().parents[2]
REAL_DESIGNS = 13248


@dataclass(frozen=True)
class SetSpec:
    """A data set's recipe. ``error``: total per-base error rate (aligned), for the settings."""

    name: str
    preset: str | None
    length: int
    error: float
    description: str


SPECS: dict[str, SetSpec] = {
    s.name: s
    for s in (
        SetSpec("illumina", "illumina", 150, 0.003, "Illumina, Twist synthesis (~0.3% errors)"),
        SetSpec(
            "illumina-array", "illumina-array", 150, 0.015, "Illumina, array synthesis (~1.5%)"
        ),
        SetSpec("nanopore", "nanopore", 150, 0.06, "nanopore (~6%)"),
        SetSpec("nanopore-hard", "nanopore-hard", 150, 0.12, "hard nanopore run (~12%)"),
        SetSpec("nanopore-110", "nanopore", 110, 0.06, "nanopore (~6%), 110-nt strands"),
        SetSpec(
            "real",
            None,
            150,
            0.021,
            "real Illumina reads, ldpc-exp7 (~2.1% errors, both orientations, truncated "
            "reads, shared primers, 1.3% unlabelled noise reads)",
        ),
    )
}
ALL_SETS = list(SPECS)


@dataclass
class DataSet:
    """One data set on disk: reads (FASTQ, gzip), truth TSV, and what they are."""

    spec: SetSpec
    directory: Path
    reads: Path
    truth: Path
    params: dict[str, object]
    ids: list[str] = field(default_factory=list)
    seqs: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    def load(self) -> None:
        """Read ids and sequences (once)."""
        if not self.ids:
            from dnaembed.io.sequences import read_sequences

            reads = read_sequences(self.reads)
            self.ids, self.seqs = list(reads.ids), list(reads.seqs)

    def truth_map(self) -> dict[str, str]:
        """Read id -> true cluster, labelled reads only (contaminants and unlabelled are noise)."""
        return load_truth(self.truth)

    def input_file(self, kind: str) -> Path:
        """The reads as ``fasta``, ``clover`` (``NUMBER SEQ`` lines) or ``lines``; written once."""
        self.load()
        path = self.directory / f"input.{kind}"
        if path.exists():
            return path
        tmp = path.with_name(path.name + ".tmp")
        if kind == "fasta":
            write_fasta(tmp, self.ids, self.seqs)
        elif kind == "clover":
            write_clover_input(tmp, self.seqs)
        elif kind == "lines":
            write_lines(tmp, self.seqs)
        else:
            raise ValueError(f"unknown input kind {kind!r}")
        tmp.replace(path)
        return path

    def summary(self) -> dict[str, object]:
        """Size of the set, for the report."""
        self.load()
        truth = self.truth_map()
        lengths = np.fromiter((len(s) for s in self.seqs), dtype=np.int64, count=len(self.seqs))
        return {
            "reads": len(self.ids),
            "labelled_reads": sum(1 for r in self.ids if r in truth),
            "true_clusters": len(set(truth.values())),
            "read_length_median": float(np.median(lengths)) if len(lengths) else 0.0,
            "strand_length": self.spec.length,
            **self.params,
        }


def load_truth(path: str | Path) -> dict[str, str]:
    """``read_id  cluster  [orientation]``; ``#`` lines, a ``read_id`` header row, and the
    labels ``contaminant`` / empty / ``*`` (reads of no strand) are skipped."""
    from dnaembed.io.tables import read_table

    out: dict[str, str] = {}
    for row in read_table(path):
        rid, label = row[0], row[1]
        if rid == "read_id" or label in ("", "*", "contaminant", "NA"):
            continue
        out[rid] = label
    return out


def prepare(
    name: str,
    root: Path,
    *,
    strands: int,
    coverage: float,
    reverse_fraction: float,
    seed: int,
    regenerate: bool = False,
) -> DataSet:
    """Write (or reuse) data set ``name`` under ``root`` and return it."""
    if name not in SPECS:
        raise SystemExit(f"unknown data set {name!r}: choose from {', '.join(SPECS)}")
    spec = SPECS[name]
    if spec.preset is None:
        return _prepare_real(spec, root, strands=strands, seed=seed, regenerate=regenerate)
    params: dict[str, object] = {
        "preset": spec.preset,
        "strands": strands,
        "length": spec.length,
        "coverage": f"negbin mean {coverage:g}",
        "reverse_fraction": reverse_fraction,
        "seed": seed,
    }
    directory = root / f"{name}-n{strands}-c{coverage:g}-r{reverse_fraction:g}-s{seed}"
    prefix = directory / "reads"
    reads, truth = Path(f"{prefix}.fastq.gz"), Path(f"{prefix}.truth.tsv")
    if regenerate or not _complete(directory, params):
        from dnaembed.sim.simulate import SimulationPlan, run_simulation

        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("input.*"):
            old.unlink()
        plan = SimulationPlan(
            n_strands=strands,
            length=(spec.length, spec.length),
            preset=spec.preset,
            coverage={"model": "negbin", "mean": coverage},
            layout={"reverse_fraction": reverse_fraction},
            seed=seed,
        )
        summary = run_simulation(plan, prefix)
        (directory / "simulate-summary.txt").write_text(summary + "\n")
        (directory / "params.json").write_text(json.dumps(params, indent=1) + "\n")
    return DataSet(spec, directory, reads, truth, params)


def _complete(directory: Path, params: dict[str, object]) -> bool:
    marker = directory / "params.json"
    return marker.exists() and json.loads(marker.read_text()) == json.loads(json.dumps(params))


def _prepare_real(
    spec: SetSpec, root: Path, *, strands: int, seed: int, regenerate: bool
) -> DataSet:
    reads, truth = REAL_READS, REAL_TRUTH
    if not reads.exists() or not truth.exists():
        raise SystemExit(f"real data set not found in {REAL_SET}")
    if strands >= REAL_DESIGNS:
        params: dict[str, object] = {"source": str(REAL_SET), "designs": REAL_DESIGNS}
        directory = root / "real-full"
        directory.mkdir(parents=True, exist_ok=True)
        if not _complete(directory, params):
            for old in directory.glob("input.*"):
                old.unlink()
            (directory / "params.json").write_text(json.dumps(params, indent=1) + "\n")
        return DataSet(spec, directory, reads, truth, params)
    # A smaller set: the reads of `strands` designs drawn at random, and as large a
    # share of the unlabelled reads.
    params = {"source": str(REAL_SET), "designs": strands, "seed": seed}
    directory = root / f"real-n{strands}-s{seed}"
    sub_reads, sub_truth = directory / "reads.fastq.gz", directory / "truth.tsv"
    if regenerate or not _complete(directory, params):
        from dnaembed.io.sequences import read_sequences, write_sequences
        from dnaembed.io.tables import read_table, write_tsv

        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("input.*"):
            old.unlink()
        rows = [r for r in read_table(truth) if r[0] != "read_id"]
        designs = sorted({r[1] for r in rows})
        rng = np.random.default_rng(seed)
        keep = set(rng.choice(designs, size=min(strands, len(designs)), replace=False).tolist())
        labelled = {r[0]: r for r in rows}
        all_reads = read_sequences(reads)
        fraction = strands / REAL_DESIGNS
        chosen: list[int] = []
        for k, rid in enumerate(all_reads.ids):
            row = labelled.get(rid)
            if (row is not None and row[1] in keep) or (row is None and rng.random() < fraction):
                chosen.append(k)
        write_sequences(
            sub_reads,
            [all_reads.ids[k] for k in chosen],
            [all_reads.seqs[k] for k in chosen],
            [all_reads.quals[k] for k in chosen] if all_reads.quals is not None else None,
        )
        write_tsv(
            sub_truth,
            ["read_id", "oligo_id", "strand"],
            [labelled[all_reads.ids[k]] for k in chosen if all_reads.ids[k] in labelled],
        )
        (directory / "params.json").write_text(json.dumps(params, indent=1) + "\n")
    return DataSet(spec, directory, sub_reads, sub_truth, params)
