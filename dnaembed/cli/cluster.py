"""`dnaembed cluster`."""

from __future__ import annotations

import click

from dnaembed.cli.base import (
    check_writable,
    cli,
    common_options,
    constrained,
    inference_options,
    model_option,
    strand_option,
)
from dnaembed.cli.execution import execution_options
from dnaembed.cluster import DbscanClusterer, GraphClusterer, KMeansClusterer
from dnaembed.cluster.search import PROJECTED_DIM


@cli.command()
@click.argument("reads", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Clusters TSV: read_id, cluster_id (and orientation), every read.",
)
@model_option
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
    help="kmeans, dbscan: neighbour search, exact up to 20,000 reads, HNSW beyond (auto); "
    "graph: always exact, within partitions.",
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
    "--partition-size", type=click.IntRange(min=256), default=4096, show_default=True,
    help="graph: reads per partition (each partition one task; --memory may lower it).",
)
@inference_options
@execution_options
@common_options
def cluster(
    reads: tuple[str, ...],
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
    partition_size: int,
    device: str,
    batch_size: int | None,
    precision: str,
    workers: int | None,
    scheduler: str | None,
    memory: int | None,
    tmpdir: str | None,
    seed: int,
    threads: int,
) -> None:
    """Cluster READS (one or more files, one run) by strand; write read_id<TAB>cluster_id.

    Cluster ids are 0, 1, ... by decreasing cluster size; singletons included.
    With --strand both a third column gives each read's orientation (+/-)
    relative to its cluster's representative. The log (standard error) reports
    the threshold chosen, how the work was split, the time per stage and the
    number of clusters. The graph method runs in partitions, as tasks: here
    (--threads), on a Dask LocalCluster (--workers) or on a Dask cluster
    (--scheduler); the output is the same wherever they run.
    """
    import time

    from dnaembed.errors import DnaembedError
    from dnaembed.log import set_threads
    from dnaembed.model.checkpoint import load_model, resolve_device

    misplaced = [
        (name, only)
        for name, value, only in (
            ("--max-dist", max_dist, "graph"),
            ("--k", n_clusters, "kmeans"),
            ("--eps", eps, "dbscan"),
            ("--min-samples", min_samples, "dbscan"),
            ("--workers", workers, "graph"),
            ("--scheduler", scheduler, "graph"),
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
    check_not_an_input(reads, output, centers)
    cores = set_threads(threads)

    start = time.perf_counter()
    checkpoint = load_model(model_path, resolve_device(device))
    seconds_load = time.perf_counter() - start
    params = {
        "graph": {"max_dist": max_dist},
        "kmeans": {"n_clusters": n_clusters},
        "dbscan": {"eps": eps, "min_samples": min_samples},
    }[method]
    params.update(neighbours=neighbours, rescue=rescue, index=index, index_dim=index_dim,
                  seed=seed)
    header = {"model": model_path or "bundled", "method": method, "strand": strand}
    outputs = _Outputs(output, centers, strand == "both" if orientation is None else orientation)
    if method != "graph":
        from dnaembed.io.readstore import stream_reads
        from dnaembed.pipeline import cluster_reads

        start = time.perf_counter()
        read_set = stream_reads(reads).read_set()
        seconds_read = time.perf_counter() - start
        result = cluster_reads(
            read_set.seqs, checkpoint.model, method=method, strand=strand,
            params=dict(params, threads=cores), batch_size=batch_size, precision=precision,
        )
        result.timings = {"model": seconds_load, "read": seconds_read, **result.timings}
        outputs.write(read_set.ids, read_set.seqs, result, header, params, reads)
        return
    from dnaembed.cli.execution import open_executor
    from dnaembed.pipeline import clustered_files

    graph = {"max_dist": max_dist, "neighbours": neighbours, "rescue": rescue,
             "search_dim": index_dim, "partition_size": partition_size}
    with (
        open_executor(workers, scheduler, threads, memory) as executor,
        clustered_files(reads, checkpoint.model, executor, strand=strand, params=graph,
                        memory=memory, tmpdir=tmpdir, seed=seed, precision=precision,
                        batch_size=batch_size) as (result, store),
    ):
        result.timings = {"model": seconds_load, **result.timings}
        params = {"max_dist": max_dist, "neighbours": neighbours, "rescue": rescue,
                  "index_dim": index_dim, "partition_size": result.stats.get("partition_size"),
                  "seed": seed}
        outputs.write(store.ids, store.seqs, result, header, params, reads)


def check_not_an_input(inputs, *outputs: str | None) -> None:
    """Refuse to write an output over one of the inputs."""
    import os

    from dnaembed.errors import DnaembedError

    for out in outputs:
        if out is None or out == "-" or not os.path.exists(out):
            continue
        for path in inputs:
            if path != "-" and os.path.exists(path) and os.path.samefile(out, path):
                raise DnaembedError(f"{out}: is an input file; refusing to overwrite it")


class _Outputs:
    """The clusters TSV and the centres FASTA, with the summary line in the log."""

    def __init__(self, output: str, centers: str | None, orientation: bool) -> None:
        self.output, self.centers, self.orientation = output, centers, orientation

    def write(self, ids, seqs, result, header: dict, params: dict, reads) -> None:
        import time

        from dnaembed.io.clusters import write_centers, write_clusters
        from dnaembed.io.tables import command_header
        from dnaembed.log import logger

        start = time.perf_counter()
        header_params = {
            **header,
            "max_dist": result.threshold.max_dist if result.threshold else None,
            "threshold": result.threshold.source if result.threshold else None,
            **{k: v for k, v in params.items() if k not in ("max_dist", "threads")},
        }
        write_clusters(self.output, ids, result, header=command_header("cluster", header_params),
                       orientation=self.orientation)
        if self.centers is not None:
            write_centers(self.centers, ids, seqs, result)
        result.timings["write"] = time.perf_counter() - start
        n = len(result.labels)
        if n == 0:
            logger.warning("%s: no reads; wrote an empty table", ", ".join(reads))
        stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
        logger.info("%d reads in %d clusters (%s)", n, result.n_clusters, stages)
