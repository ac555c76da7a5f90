"""`dnaembed cluster`."""

from __future__ import annotations

import click

from dnaembed.cli.base import (
    cli,
    common_options,
    constrained,
    given,
    inference_options,
    json_option,
    plot_option,
    search_model_option,
    strand_option,
)
from dnaembed.cli.execution import execution_options
from dnaembed.cluster import DbscanClusterer, GraphClusterer, KMeansClusterer
from dnaembed.cluster.partition import PARTITION_SIZE
from dnaembed.cluster.search import PROJECTED_DIM
from dnaembed.io.formats import WRITE_FORMATS

#: Options that only one method takes.
METHOD_ONLY = {"max_dist": ("--max-dist", "graph"), "n_clusters": ("-k/--k", "kmeans"),
               "eps": ("--eps", "dbscan"), "min_samples": ("--min-samples", "dbscan"),
               "min_cluster_size": ("--min-cluster-size", "dbscan"),
               "refine": ("--refine", "kmeans"), "workers": ("--workers", "graph"),
               "scheduler": ("--scheduler", "graph")}


@cli.command()
@click.argument("reads", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", default="-", show_default=True,
              type=click.Path(dir_okay=False, allow_dash=True),
              help="Clusters of every read, in --format (.gz compresses).")
@click.option("-f", "--format", "fmt", type=click.Choice(WRITE_FORMATS), default="tsv",
              show_default=True,
              help="tsv: read_id, cluster_id (and orientation); uc: vsearch --uc; clstr: CD-HIT "
              ".clstr; mmseqs: representative<TAB>member (MMseqs2).")
@search_model_option
@click.option(
    "--method",
    type=click.Choice(["graph", "kmeans", "dbscan"]),
    default="graph",
    show_default=True,
    help="graph: neighbours checked with exact edit distance; kmeans, dbscan: on the vectors.",
)
@strand_option
@click.option("--orientation-column/--no-orientation-column", "orientation_column",
              default=None,
              help="tsv: write each read's orientation (+/-) relative to its cluster "
              "(default: with --strand both).")
@click.option("--centers", type=click.Path(dir_okay=False, allow_dash=True),
              help="Also write one representative read per cluster (FASTA, named by cluster id).")
@click.option("--size-labels", is_flag=True,
              help="Name the --centers usearch-style, READ;size=N;cluster=C; (vsearch --sizein).")
@click.option("--max-dist", type=constrained(GraphClusterer, "max_dist"),
              help="graph: edit-distance cut for reads of median length (default: from the data).")
@click.option(
    "--neighbours",
    type=constrained(GraphClusterer, "neighbours"),
    default=16,
    show_default=True,
    help="Candidate neighbours per read in embedding space.",
)
@click.option("-k", "--k", "n_clusters", type=constrained(KMeansClusterer, "n_clusters"),
              help="kmeans: number of clusters (default: estimated from the data).")
@click.option("--eps", type=constrained(DbscanClusterer, "eps"),
              help="dbscan: radius in edits (default: the data-derived threshold).")
@click.option("--min-samples", type=constrained(DbscanClusterer, "min_samples"),
              help="dbscan: reads within eps that make a core read [default: 3].")
@click.option("--min-cluster-size", type=constrained(DbscanClusterer, "min_cluster_size"),
              help="dbscan: smallest part a cluster is split into where it is two dense groups "
              "joined by a few reads [default: 5].")
@click.option("--refine", is_flag=True, default=None,
              help="kmeans: exact-distance refinement of the final assignment (reads over the "
              "threshold from their cluster's representative move or start a cluster).")
@click.option("--rescue/--no-rescue", default=True, show_default=True,
              help="Second chance for truncated reads and reads left alone.")
@click.option(
    "--index",
    type=constrained(GraphClusterer, "index"),
    default="auto",
    show_default=True,
    help="kmeans, dbscan: neighbour search, exact up to 20,000 reads, HNSW beyond (auto). "
    "Not for graph, which searches each partition exactly.",
)
@click.option(
    "--index-dim",
    type=constrained(GraphClusterer, "index_dim"),
    default=PROJECTED_DIM,
    show_default=True,
    help="Search on a PCA projection of wider vectors to this many dimensions (0: the full "
    "vectors); graph: the width of the partitions' search.",
)
@click.option(
    "--partition-size", type=click.IntRange(min=256), default=PARTITION_SIZE, show_default=True,
    help="graph only: reads per partition (each partition is one task).",
)
@json_option("the summary (threshold, counts, sizes, times, model, versions)")
@plot_option
@inference_options
@execution_options
@common_options
def cluster(reads: tuple[str, ...], output: str, fmt: str, model_path: str | None,
            method: str, strand: str, orientation_column: bool | None, centers: str | None,
            size_labels: bool, json_path: str | None, plot_dir: str | None, device: str,
            batch_size: int | None, precision: str, seed: int, threads: int,
            **method_options) -> None:
    """Cluster READS (one or more files, one run) by strand; write every read's cluster.

    Cluster ids are 0, 1, ... by decreasing cluster size; singletons included.
    With --strand both the TSV's third column gives each read's orientation
    (+/-) relative to its cluster's representative. The log (standard error)
    reports the threshold chosen, how the work was split, the time per stage
    and the number of clusters. READS may be - (standard input, plain or compressed).
    The graph method runs in partitions, as tasks: here (--threads), on a Dask
    LocalCluster (--workers) or on a Dask cluster (--scheduler); the output is
    the same wherever they run.
    """
    from dnaembed.cli.jobs import cluster_job

    _check_options(method, strand, orientation_column, centers, size_labels, method_options)
    cluster_job(
        reads, outputs={"-o/--output": output, "--centers": centers, "--json": json_path},
        plot_dir=plot_dir, fmt=fmt, model_path=model_path, method=method, strand=strand,
        orientation=strand == "both" if orientation_column is None else orientation_column,
        size_labels=size_labels, options=method_options, device=device,
        batch_size=batch_size, precision=precision, seed=seed, threads=threads,
    )


def _check_options(method: str, strand: str, orientation_column: bool | None,
                   centers: str | None, size_labels: bool, options: dict) -> None:
    """Usage errors: options of another method, or that need another option."""
    for key, (name, only) in METHOD_ONLY.items():
        if options.get(key) is not None and method != only:
            raise click.UsageError(f"{name} applies to --method {only} only")
    # Options with a default: refused only where given for a method that would ignore them.
    if method == "graph" and given("index"):
        raise click.UsageError("--index applies to --method kmeans and dbscan only (graph "
                               "searches each partition exactly)")
    if method != "graph" and given("partition_size"):
        raise click.UsageError("--partition-size applies to --method graph only")
    if orientation_column and strand == "plus":
        raise click.UsageError("--orientation-column needs --strand both")
    if size_labels and centers is None:
        raise click.UsageError("--size-labels names the --centers: give --centers FILE")
