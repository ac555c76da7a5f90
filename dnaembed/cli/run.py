"""`dnaembed run`: reads in, stored strands out (cluster, then consensus)."""

from __future__ import annotations

import click

from dnaembed.cli.base import (
    cli,
    common_options,
    constrained,
    echo_result,
    inference_options,
    json_option,
    plot_option,
    search_model_option,
    strand_option,
)
from dnaembed.cli.execution import execution_options
from dnaembed.cluster import GraphClusterer
from dnaembed.cluster.partition import PARTITION_SIZE


@cli.command()
@click.argument("reads", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for clusters.tsv, strands.fasta and strands.tsv (created if missing).",
)
@search_model_option
@strand_option
@click.option(
    "--max-dist",
    type=constrained(GraphClusterer, "max_dist"),
    help="Edit-distance cut for reads of median length (default: from the data).",
)
@click.option(
    "--length",
    "expected_length",
    type=click.IntRange(min=1),
    help="Expected strand length, when all designs have one (helps the consensus).",
)
@click.option(
    "--min-size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Write strands only for clusters with at least this many reads.",
)
@click.option(
    "--truth",
    type=click.Path(dir_okay=False),
    help="Also score the clusters: truth TSV (read_id<TAB>strand_id, as simulate writes); "
    "its rows of READS only (a data set's truth scores a subset of its reads).",
)
@click.option(
    "--refs",
    type=click.Path(dir_okay=False),
    help="Also score the strands: the reference strands (FASTA).",
)
@click.option(
    "--partition-size", type=click.IntRange(min=256), default=PARTITION_SIZE, show_default=True,
    help="Reads per partition of the clustering (each partition is one task).",
)
@json_option("the summary (threshold, counts, sizes, support, times, model, versions, scores)")
@plot_option
@inference_options
@execution_options
@common_options
def run(
    reads: tuple[str, ...],
    out_dir: str,
    json_path: str | None,
    plot_dir: str | None,
    seed: int,
    threads: int,
    **options,
) -> None:
    """Cluster READS (one or more files, one run) and reconstruct one strand per cluster.

    `dnaembed cluster` then `dnaembed consensus` in one command (graph method,
    threshold from the data). Writes OUT/clusters.tsv (read_id, cluster_id and,
    with --strand both, orientation), OUT/strands.fasta (one strand per cluster in cluster id order,
    named by cluster id, with its size and confidence) and OUT/strands.tsv
    (per-strand report): all three new, or none if the command fails.
    With --truth and --refs, prints the clustering and recovery scores too.
    """
    from dnaembed.cli.jobs import run_job
    from dnaembed.errors import UsageError

    if out_dir == "-":
        raise UsageError("-o/--output is a directory for clusters.tsv, strands.fasta and "
                         "strands.tsv: it cannot be standard output (-)")
    summary = run_job(reads, out_dir, json_path=json_path, plot_dir=plot_dir, seed=seed,
                      threads=threads, **options)
    if json_path == "-":
        return
    echo_result(format_run(summary, out_dir))


def format_run(summary: dict, out_dir: str) -> str:
    """The text that `run` prints: counts, and the scores when it has them."""
    import os

    from dnaembed.evaluate.clustering import format_scores as format_cluster_scores
    from dnaembed.evaluate.recovery import format_scores as format_recovery_scores

    counts, scores = summary["counts"], summary.get("scores", {})
    # One slash after the directory, however it was given ("-o out/" printed "out//").
    lines = [f"{counts['reads']:,} reads -> {counts['clusters']:,} clusters -> "
             f"{counts['strands']:,} strands in {os.path.join(out_dir, '')} (clusters.tsv, "
             "strands.fasta, strands.tsv)"]
    if "clustering" in scores:
        lines += ["", "clusters against the truth:", format_cluster_scores(scores["clustering"])]
    if "recovery" in scores:
        lines += ["", "strands against the references:",
                  format_recovery_scores(scores["recovery"])]
    return "\n".join(lines)
