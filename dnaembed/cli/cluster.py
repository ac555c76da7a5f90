"""`dnaembed cluster`."""

from __future__ import annotations

import click

from dnaembed.cli.base import (
    check_writable,
    cli,
    common_options,
    constrained,
    inference_options,
    search_model_option,
    strand_option,
)
from dnaembed.cluster import DbscanClusterer, GraphClusterer, KMeansClusterer
from dnaembed.cluster.search import PROJECTED_DIM


@cli.command()
@click.argument("reads", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Clusters TSV: read_id, cluster_id (and orientation), every read.",
)
@search_model_option
@click.option(
    "--method",
    type=click.Choice(["graph", "kmeans", "dbscan"]),
    default="graph",
    show_default=True,
    help="graph: neighbours checked with exact edit distance; kmeans, dbscan: on the vectors.",
)
@strand_option
@click.option(
    "--orientation/--no-orientation",
    default=None,
    help="Write each read's orientation relative to its cluster (default: with --strand both).",
)
@click.option(
    "--centers",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Also write one representative read per cluster (FASTA, named by cluster id).",
)
@click.option(
    "--max-dist",
    type=constrained(GraphClusterer, "max_dist"),
    help="graph: edit-distance cut for reads of median length (default: from the data).",
)
@click.option(
    "--neighbours",
    type=constrained(GraphClusterer, "neighbours"),
    default=16,
    show_default=True,
    help="Candidate neighbours per read in embedding space.",
)
@click.option("--k", "n_clusters", type=constrained(KMeansClusterer, "n_clusters"),
              help="kmeans: number of clusters (default: estimated from the data).")
@click.option("--eps", type=constrained(DbscanClusterer, "eps"),
              help="dbscan: radius in edits (default: the data-derived threshold).")
@click.option("--min-samples", type=constrained(DbscanClusterer, "min_samples"),
              help="dbscan: reads within eps that make a core read [default: 3].")
@click.option("--rescue/--no-rescue", default=True, show_default=True,
              help="Second chance for truncated reads and reads left alone.")
@click.option(
    "--index",
    type=constrained(GraphClusterer, "index"),
    default="auto",
    show_default=True,
    help="Neighbour search: exact up to 20,000 reads, HNSW beyond (auto).",
)
@click.option(
    "--index-dim",
    type=constrained(GraphClusterer, "index_dim"),
    default=PROJECTED_DIM,
    show_default=True,
    help="HNSW: build the graph on a PCA projection of the vectors to this many dimensions, "
    "re-ranking its candidates at full width (0: on the full vectors).",
)
@inference_options
@common_options
def cluster(
    reads: str,
    output: str,
    model_path: str | None,
    method: str,
    strand: str,
    orientation: bool | None,
    centers: str | None,
    max_dist: int | None,
    neighbours: int,
    n_clusters: int | None,
    eps: float | None,
    min_samples: int | None,
    rescue: bool,
    index: str,
    index_dim: int,
    device: str,
    batch_size: int | None,
    precision: str,
    seed: int,
    threads: int,
) -> None:
    """Cluster READS by strand; write read_id<TAB>cluster_id for every read.

    Cluster ids are 0, 1, ... by decreasing cluster size; singletons included.
    With --strand both a third column gives each read's orientation (+/-)
    relative to its cluster's representative. The log (standard error) reports
    the threshold chosen, the time per stage and the number of clusters.
    """
    import time

    from dnaembed.errors import DnaembedError
    from dnaembed.io.clusters import write_centers, write_clusters
    from dnaembed.io.sequences import read_sequences
    from dnaembed.io.tables import command_header
    from dnaembed.log import logger, set_threads
    from dnaembed.model.checkpoint import load_search_model, resolve_device, search_model_name
    from dnaembed.pipeline import cluster_reads

    misplaced = [
        (name, only)
        for name, value, only in (
            ("--max-dist", max_dist, "graph"),
            ("--k", n_clusters, "kmeans"),
            ("--eps", eps, "dbscan"),
            ("--min-samples", min_samples, "dbscan"),
        )
        if value is not None and method != only
    ]
    if misplaced:
        name, only = misplaced[0]
        raise click.UsageError(f"{name} applies to --method {only} only")
    if output == "-" and centers == "-":
        raise DnaembedError("--output and --centers cannot both be standard output")
    if orientation and strand == "plus":
        raise click.UsageError("--orientation needs --strand both")
    check_writable(output, centers)
    workers = set_threads(threads)

    start = time.perf_counter()
    checkpoint = load_search_model(model_path, method, resolve_device(device))
    seconds_load = time.perf_counter() - start
    read_set = read_sequences(reads)
    seconds_read = time.perf_counter() - start - seconds_load
    params = {
        "graph": {"max_dist": max_dist},
        "kmeans": {"n_clusters": n_clusters},
        "dbscan": {"eps": eps, "min_samples": min_samples},
    }[method]
    params.update(
        neighbours=neighbours, rescue=rescue, index=index, index_dim=index_dim, threads=workers,
        seed=seed,
    )
    result = cluster_reads(
        read_set.seqs, checkpoint.model, method=method, strand=strand, params=params,
        batch_size=batch_size, precision=precision,
    )
    result.timings = {"model": seconds_load, "read": seconds_read, **result.timings}

    start = time.perf_counter()
    header_params = {
        "model": search_model_name(model_path, method),
        "method": method,
        "strand": strand,
        "max_dist": result.threshold.max_dist if result.threshold else None,
        "threshold": result.threshold.source if result.threshold else None,
        **{k: v for k, v in params.items() if k not in ("max_dist", "threads")},
    }
    write_clusters(
        output, read_set.ids, result,
        header=command_header("cluster", header_params),
        orientation=strand == "both" if orientation is None else orientation,
    )
    if centers is not None:
        write_centers(centers, read_set.ids, read_set.seqs, result)
    result.timings["write"] = time.perf_counter() - start
    if len(read_set) == 0:
        logger.warning("%s: no reads; wrote an empty table", reads)
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
    logger.info("%d reads in %d clusters (%s)", len(read_set), result.n_clusters, stages)
