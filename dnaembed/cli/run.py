"""`dnaembed run`: reads in, stored strands out (cluster, then consensus)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from dnaembed.cli.base import (
    cli,
    common_options,
    constrained,
    echo_result,
    inference_options,
    search_model_option,
    strand_option,
)
from dnaembed.cluster import GraphClusterer


@cli.command()
@click.argument("reads", type=click.Path(dir_okay=False, allow_dash=True))
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
    help="Also score the clusters: truth TSV (read_id<TAB>strand_id, as simulate writes).",
)
@click.option(
    "--refs",
    type=click.Path(dir_okay=False),
    help="Also score the strands: the reference strands (FASTA).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@inference_options
@common_options
def run(
    reads: str,
    out_dir: str,
    model_path: str | None,
    strand: str,
    max_dist: int | None,
    expected_length: int | None,
    min_size: int,
    truth: str | None,
    refs: str | None,
    as_json: bool,
    device: str,
    batch_size: int | None,
    precision: str,
    seed: int,
    threads: int,
) -> None:
    """Cluster READS and reconstruct one strand per cluster, with the bundled model.

    `dnaembed cluster` then `dnaembed consensus` in one command (graph method,
    threshold from the data). Writes OUT/clusters.tsv (read_id, cluster_id,
    orientation), OUT/strands.fasta (one strand per cluster, named by cluster
    id, with its size and confidence) and OUT/strands.tsv (per-strand report).
    With --truth and --refs, prints the clustering and recovery scores too.
    """
    from dnaembed.consensus.engine import write_strand_report, write_strands
    from dnaembed.evaluate.clustering import evaluate_files, read_truth
    from dnaembed.evaluate.clustering import format_scores as format_cluster_scores
    from dnaembed.evaluate.recovery import format_scores as format_recovery_scores
    from dnaembed.evaluate.recovery import recovery_scores
    from dnaembed.io.clusters import write_clusters
    from dnaembed.io.sequences import read_sequences
    from dnaembed.io.tables import command_header
    from dnaembed.log import logger, set_threads
    from dnaembed.model.checkpoint import load_search_model, resolve_device, search_model_name
    from dnaembed.pipeline import reads_to_strands

    out = Path(out_dir)
    workers = set_threads(threads)
    checkpoint = load_search_model(model_path, "graph", resolve_device(device))
    read_set = read_sequences(reads)
    # Read the references and the truth before the long work: a bad file should fail fast.
    ref_set = read_sequences(refs) if refs else None
    if truth:
        read_truth(truth)
    out.mkdir(parents=True, exist_ok=True)

    result, strands = reads_to_strands(
        read_set, checkpoint.model, strand=strand, params={"max_dist": max_dist},
        expected_length=expected_length, min_size=min_size, seed=seed, threads=workers,
        batch_size=batch_size, precision=precision,
    )
    params = {
        "reads": reads, "model": search_model_name(model_path, "graph"), "strand": strand,
        "max_dist": result.threshold.max_dist if result.threshold else None,
        "threshold": result.threshold.source if result.threshold else None,
        "length": expected_length, "min_size": min_size, "seed": seed,
    }
    header = command_header("run", params)
    write_clusters(out / "clusters.tsv", read_set.ids, result, header=header,
                   orientation=strand == "both")
    write_strands(out / "strands.fasta", strands)
    write_strand_report(out / "strands.tsv", strands, header=header)
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
    logger.info("%d reads, %d clusters, %d strands (%s)", len(read_set), result.n_clusters,
                len(strands), stages)

    summary: dict[str, object] = {
        "reads": len(read_set), "clusters": result.n_clusters, "strands": len(strands),
        "outputs": [str(out / name) for name in ("clusters.tsv", "strands.fasta", "strands.tsv")],
    }
    if truth:
        summary["clustering"] = evaluate_files(out / "clusters.tsv", truth)
    if ref_set is not None:
        summary["recovery"] = recovery_scores(ref_set.seqs, [s.sequence for s in strands],
                                              workers=workers)
    if as_json:
        echo_result(json.dumps(summary))
        return
    lines = [f"{len(read_set):,} reads -> {result.n_clusters:,} clusters -> "
             f"{len(strands):,} strands in {out}/ (clusters.tsv, strands.fasta, strands.tsv)"]
    if "clustering" in summary:
        lines += ["", "clusters against the truth:", format_cluster_scores(summary["clustering"])]
    if "recovery" in summary:
        lines += ["", "strands against the references:",
                  format_recovery_scores(summary["recovery"])]
    echo_result("\n".join(lines))
