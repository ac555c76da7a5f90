"""The examples that end each command's ``--help`` (two or three per command)."""

from __future__ import annotations

EXAMPLES: dict[str, list[str]] = {
    "simulate": [
        "dnaembed simulate -o sim --strands 1000 --preset nanopore",
        "dnaembed simulate --refs designs.fasta -o run1 --mean-coverage 20 --reverse-fraction 0.5",
    ],
    "train": [
        "dnaembed train -c configs/default.toml -o runs/default",
        "dnaembed train -o runs/quick --steps 2000 --device cuda",
    ],
    "embed": [
        "dnaembed embed reads.fastq.gz -o reads.npy",
        "dnaembed embed reads.fastq.gz -o reads.npy --dtype float16 --device cuda",
    ],
    "cluster": [
        "dnaembed cluster reads.fastq.gz -o clusters.tsv --json summary.json",
        "dnaembed cluster reads.fastq.gz -o clusters.uc --format uc --centers centers.fasta "
        "--size-labels",
        "zcat reads.fastq.gz | dnaembed cluster - -o clusters.tsv.gz --plot plots/",
    ],
    "consensus": [
        "dnaembed consensus reads.fastq.gz clusters.tsv -o strands.fasta --report strands.tsv",
        "dnaembed consensus reads.fastq.gz clusters.tsv --length 150 > strands.fasta",
    ],
    "run": [
        "dnaembed run reads.fastq.gz -o out/",
        "dnaembed run reads.fastq.gz -o out/ --length 150 --json out/summary.json --plot out/plots",
        "dnaembed run sim.fastq.gz -o out/ --truth sim.truth.tsv --refs sim.refs.fasta --json",
    ],
    "evaluate": [
        "dnaembed evaluate clusters.tsv --truth sim.truth.tsv",
        "dnaembed evaluate vsearch.uc --format uc --truth sim.truth.tsv --json",
        "dnaembed evaluate strands.fasta --refs sim.refs.fasta",
    ],
    "report": [
        "dnaembed report summary.json -o plots/",
        "dnaembed report runs/default -o plots/",
    ],
    "demo": [
        "dnaembed demo",
        "dnaembed demo -o demo --strands 200 --preset illumina-array",
    ],
}


def epilog(command: str | None) -> str | None:
    """The ``Examples:`` block of ``command``'s help (None for a command without examples)."""
    lines = EXAMPLES.get(command or "")
    if not lines:
        return None
    # \b keeps click from re-wrapping the lines.
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)
