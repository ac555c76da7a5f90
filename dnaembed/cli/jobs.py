"""What `cluster`, `consensus` and `run` do once their options are checked.

Each job opens its outputs first (:class:`dnaembed.io.atomic.OutputSet`: no
output over an input, every output writable, all renamed together at the end),
then reads, calls the library, and writes the results, the ``--json`` summary
(:mod:`dnaembed.report.summary`) and the ``--plot`` PNGs from the same data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnaembed.cluster.partition import PARTITION_SIZE
from dnaembed.io.atomic import OutputSet
from dnaembed.log import Timings, logger

if TYPE_CHECKING:
    from dnaembed.cluster.result import ClusterResult
    from dnaembed.io.tables import ClusterTable

#: Per method, the options that its estimator takes (the others are left out).
METHOD_PARAMS = {"graph": ("max_dist",), "kmeans": ("n_clusters", "refine"),
                 "dbscan": ("eps", "min_samples", "min_cluster_size")}
SHARED_PARAMS = ("neighbours", "rescue", "index", "index_dim")


def estimator_params(method: str, options: Mapping[str, object], *, seed: int,
                     threads: int) -> dict[str, object]:
    """The estimator's hyper-parameters from the command's options."""
    params = {k: options.get(k) for k in METHOD_PARAMS[method]}
    params.update({k: options[k] for k in SHARED_PARAMS if k in options})
    return {**params, "threads": threads, "seed": seed}


def header_params(model_path: str | None, result: ClusterResult, params: Mapping[str, object],
                  **extra: object) -> dict[str, object]:
    """The parameters recorded in a table's provenance line (the cut as it was used)."""
    threshold = result.threshold
    return {
        "model": model_path or "bundled", **extra,
        "max_dist": threshold.max_dist if threshold else None,
        "threshold": threshold.source if threshold else None,
        **{k: v for k, v in params.items() if k not in ("max_dist", "threads")},
    }


def finish(out: OutputSet, summary: dict, json_path: str | None, plot_dir: str | None) -> None:
    """The ``--json`` summary and the ``--plot`` figures, drawn from the same summary."""
    from dnaembed.cli.base import write_json

    if json_path is not None:
        write_json(out.path("--json"), summary)
    if plot_dir is not None:
        from dnaembed.report.plots import save_figures, summary_figures

        for path in save_figures(summary_figures(summary), plot_dir, out):
            logger.info("plot: %s", path)


def open_outputs(outputs: Mapping[str, str | None], inputs: Mapping[str, str | None],
                 plot_dir: str | None, directories: tuple[str, ...] = ()) -> OutputSet:
    """The command's OutputSet (matplotlib checked first when --plot asks for it)."""
    if plot_dir is not None:
        from dnaembed.report.plots import require_matplotlib

        require_matplotlib()
        directories = (*directories, plot_dir)
    return OutputSet(outputs, inputs=inputs, directories=directories)


#: The options that say where the tasks run and within what (dnaembed.cli.execution).
EXECUTION = ("workers", "scheduler", "memory", "tmpdir")


def _named(reads: Sequence[str]) -> str | list[str]:
    """The input(s) as the summary records them: one path, or the list of them."""
    return reads[0] if len(reads) == 1 else list(reads)


def check_inputs(reads: Sequence[str]) -> None:
    """Every input file exists, is readable and is given once: a wrong path fails before
    the model is loaded or a Dask cluster is started or joined, not after."""
    from dnaembed.io.atomic import check_given_once
    from dnaembed.io.sequences import check_readable

    for path in reads:
        check_readable(path)
    check_given_once(input_names(reads))


def input_names(reads: Sequence[str]) -> dict[str, str]:
    """The inputs never to be overwritten, by the name messages give them."""
    from dnaembed.io.atomic import named_inputs

    return named_inputs("READS", reads)


def cluster_job(reads: Sequence[str], *, outputs: Mapping[str, str | None],
                plot_dir: str | None, fmt: str, model_path: str | None, method: str,
                strand: str, orientation: bool, size_labels: bool,
                options: Mapping[str, object], device: str, batch_size: int | None,
                precision: str, seed: int, threads: int) -> None:
    """`dnaembed cluster`: reads in, clusters (and centers, summary, plots) out.

    The graph method runs partitioned, on the executor the options ask for
    (:func:`dnaembed.pipeline.clustered_files`); kmeans and dbscan in memory.
    """
    from dnaembed.log import freeze_long_lived, set_threads
    from dnaembed.model.checkpoint import load_search_model, resolve_device, search_model_name

    check_inputs(reads)
    timings = Timings()
    with open_outputs(outputs, input_names(reads), plot_dir) as out:
        workers = set_threads(threads)
        with timings("model"):
            checkpoint = load_search_model(model_path, method, resolve_device(device))
        freeze_long_lived()
        model_path = search_model_name(model_path, method)
        job = _ClusterOutputs(out, outputs, plot_dir, fmt, model_path, method, strand,
                              orientation, size_labels, seed, checkpoint, timings, reads)
        if method != "graph":
            from dnaembed.io.readstore import stream_reads
            from dnaembed.pipeline import cluster_reads

            with timings("read"):
                read_set = stream_reads(reads).read_set()
            params = estimator_params(method, options, seed=seed, threads=workers)
            result = cluster_reads(read_set.seqs, checkpoint.model, method=method,
                                   strand=strand, params=params, batch_size=batch_size,
                                   precision=precision)
            job.write(read_set.ids, read_set.seqs, result, params)
            return
        from dnaembed.cli.execution import open_executor
        from dnaembed.pipeline import clustered_files

        graph = {"max_dist": options.get("max_dist"), "neighbours": options["neighbours"],
                 "rescue": options["rescue"], "search_dim": options["index_dim"],
                 "partition_size": options["partition_size"]}
        with (
            open_executor(options.get("workers"), options.get("scheduler"), threads,
                          options.get("memory"), graph) as executor,
            clustered_files(reads, checkpoint.model, executor, strand=strand, params=graph,
                            memory=options.get("memory"), tmpdir=options.get("tmpdir"),
                            seed=seed, precision=precision, batch_size=batch_size,
                            threads=workers) as (result, store),
        ):
            params = {"max_dist": graph["max_dist"], "neighbours": graph["neighbours"],
                      "rescue": graph["rescue"], "index_dim": options["index_dim"],
                      "partition_size": result.stats.get("partition_size"), "seed": seed}
            job.write(store.ids, store.seqs, result, params)


class _ClusterOutputs:
    """Writes what `cluster` makes: the table, the centres, the summary, the log line."""

    def __init__(self, out: OutputSet, outputs, plot_dir, fmt, model_path, method, strand,
                 orientation, size_labels, seed, checkpoint, timings, reads) -> None:
        self.out, self.outputs, self.plot_dir, self.fmt = out, outputs, plot_dir, fmt
        self.model_path, self.method, self.strand = model_path, method, strand
        self.orientation, self.size_labels, self.seed = orientation, size_labels, seed
        self.checkpoint, self.timings, self.reads = checkpoint, timings, reads

    def write(self, ids, seqs, result, params: dict) -> None:
        from dnaembed.io.clusters import write_centers, write_clusters
        from dnaembed.io.sequences import describe_path
        from dnaembed.io.tables import command_header
        from dnaembed.report.summary import command_summary

        out, timings = self.out, self.timings
        timings.update(result.timings)
        with timings("write"):
            header = command_header("cluster", header_params(
                self.model_path, result, params, method=self.method, strand=self.strand))
            write_clusters(out.path("-o/--output"), ids, result, header=header,
                           orientation=self.orientation, fmt=self.fmt, seqs=seqs)
            if self.outputs.get("--centers") is not None:
                write_centers(out.path("--centers"), ids, seqs, result,
                              size_labels=self.size_labels)
        n = len(result.labels)
        summary = command_summary(
            "cluster", {"reads": _named(self.reads), "format": self.fmt, **params},
            seed=self.seed, reads=n, result=result, checkpoint=self.checkpoint,
            timings=timings)
        finish(out, summary, self.outputs.get("--json"), self.plot_dir)
        if n == 0:
            logger.warning("%s: no reads; wrote an empty table",
                           ", ".join(describe_path(r) for r in self.reads))
        stages = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
        logger.info("%d reads in %d clusters (%s)", n, result.n_clusters, stages)


def consensus_job(reads: str, clusters: str, *, outputs: Mapping[str, str | None],
                  plot_dir: str | None, orientation: str, options: Mapping[str, object],
                  seed: int, threads: int, fmt: str = "tsv") -> tuple[int, list]:
    """`dnaembed consensus`: one strand per cluster; (number of reads, the strands)."""
    from dnaembed.consensus import consensus_strands, write_strand_report, write_strands
    from dnaembed.consensus.strands import check_cluster_ids
    from dnaembed.io.sequences import describe_path, read_sequences
    from dnaembed.io.tables import cluster_id_key, command_header
    from dnaembed.report.summary import command_summary, size_histogram

    timings = Timings()
    with open_outputs(outputs, {"READS": reads, "CLUSTERS": clusters}, plot_dir) as out:
        with timings("read"):
            readset = read_sequences(reads)
            table = _cluster_table(clusters, fmt, readset.ids)
        check_cluster_ids(table.labels, describe_path(clusters))
        absent = len(readset) - len(table.labels)
        if absent:
            logger.info("%d of %d reads are in no cluster of %s: ignored", absent,
                        len(readset), describe_path(clusters))
        given = table.orientation if orientation == "auto" else None
        given = "forward" if orientation == "forward" else given
        logger.info("orientation: %s", "from the clusters table" if isinstance(given, dict)
                    else (given or "inferred"))
        medoid_only = bool(options.get("medoid_only"))
        with timings("consensus"):
            strands = consensus_strands(
                readset, table.labels, expected_length=options.get("expected_length"),
                min_size=options["min_size"], orientation=given, refine=not medoid_only,
                max_iterations=options["max_iterations"], seed=seed, threads=threads)
        strands.sort(key=lambda s: cluster_id_key(s.cluster_id))
        params = {"reads": reads, "clusters": clusters,
                  "format": fmt, "orientation": orientation,
                  "seed": seed, **{k: v for k, v in options.items() if v not in (None, False)}}
        with timings("write"):
            write_strands(out.path("-o/--output"), strands, medoid_only=medoid_only)
            if outputs.get("--report") is not None:
                write_strand_report(out.path("--report"), strands, medoid_only=medoid_only,
                                    header=command_header("consensus", params))
        summary = command_summary("consensus", params, seed=seed, reads=len(readset),
                                  strands=strands, timings=timings)
        sizes = size_histogram(list(_label_counts(table.labels).values()))
        summary["counts"].update(clusters=sum(sizes["clusters"]), singletons=sum(
            n for s, n in zip(sizes["size"], sizes["clusters"]) if s == 1))
        summary["cluster_sizes"] = sizes
        finish(out, summary, outputs.get("--json"), plot_dir)
    return len(readset), strands


def _cluster_table(clusters: str, fmt: str, read_ids: Sequence[str]) -> ClusterTable:
    """CLUSTERS in format ``fmt`` (orientations from dnaembed's table only); a read id
    that is not among ``read_ids`` is an error."""
    from dnaembed.errors import InputError
    from dnaembed.io.formats import guess_format, read_assignments
    from dnaembed.io.sequences import describe_path
    from dnaembed.io.tables import ClusterTable, read_cluster_table, read_lines

    if fmt == "tsv":
        try:
            return read_cluster_table(clusters, read_ids)
        except InputError:
            # Another tool's file read as a table failed as "read H: listed twice":
            # read_assignments' parse of it fails alike and names the format it looks
            # like. Only a regular file can be read again (a named pipe's reopening
            # waits for a writer that has gone).
            if Path(clusters).is_file() and guess_format(read_lines(clusters)) not in (
                    None, "tsv"):
                read_assignments(clusters, "tsv")
            raise
    labels = read_assignments(clusters, fmt, read_ids)
    known = set(read_ids)
    unknown = [rid for rid in labels if rid not in known]
    if unknown:
        raise InputError(f"{describe_path(clusters)}: read {unknown[0]}: not in the reads "
                         f"file ({len(unknown)} of {len(labels)} read ids unknown: is it the "
                         "clusters file of these reads?)")
    return ClusterTable(labels, None)


def _label_counts(labels: Mapping[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    return counts


#: The files of `dnaembed run`, in its output directory.
RUN_FILES = ("clusters.tsv", "strands.fasta", "strands.tsv")


def run_job(reads: Sequence[str], out_dir: str, *, json_path: str | None,
            plot_dir: str | None, truth: str | None, refs: str | None, model_path: str | None,
            strand: str, max_dist: int | None, expected_length: int | None, min_size: int,
            device: str, batch_size: int | None, precision: str, seed: int, threads: int,
            partition_size: int = PARTITION_SIZE, workers: int | None = None,
            scheduler: str | None = None, memory: int | None = None,
            tmpdir: str | None = None) -> dict:
    """`dnaembed run`: reads in, clusters and strands out (scored when given a truth); summary.

    The clustering runs partitioned on the executor the options ask for, the
    consensus on it too when it is Dask (:func:`dnaembed.pipeline.strands_from_files`).
    """
    from dnaembed.cli.execution import open_executor
    from dnaembed.evaluate.clustering import labels_of_reads
    from dnaembed.log import freeze_long_lived, set_threads
    from dnaembed.model.checkpoint import load_search_model, resolve_device, search_model_name
    from dnaembed.pipeline import strands_from_files

    check_inputs(reads)
    files = {name: str(Path(out_dir) / name) for name in RUN_FILES}
    timings = Timings()
    inputs = {**input_names(reads), "--truth": truth, "--refs": refs}
    with open_outputs({**files, "--json": json_path}, inputs, plot_dir,
                      directories=(out_dir,)) as out:
        cores = set_threads(threads)
        with timings("model"):
            checkpoint = load_search_model(model_path, "graph", resolve_device(device))
        freeze_long_lived()
        model_path = search_model_name(model_path, "graph")
        ref_set, truth_labels = _scoring_inputs(refs, truth)
        graph = {"max_dist": max_dist, "partition_size": partition_size}
        with (
            open_executor(workers, scheduler, threads, memory, graph) as executor,
            strands_from_files(
                reads, checkpoint.model, executor, strand=strand, params=graph,
                expected_length=expected_length, min_size=min_size, memory=memory,
                tmpdir=tmpdir, seed=seed, threads=cores, batch_size=batch_size,
                precision=precision) as (result, strands, store),
        ):
            timings.update(result.timings)
            params = {"reads": " ".join(reads),
                      **header_params(model_path, result, {}, strand=strand),
                      "length": expected_length, "min_size": min_size,
                      "partition_size": result.stats.get("partition_size"), "seed": seed}
            with timings("write"):
                _write_run(out, store.ids, result, strands, _run_header(params),
                           strand)
            n_reads = len(store)
            if truth_labels is not None:
                truth_labels = labels_of_reads(truth_labels, store.ids, truth,
                                               "the run's reads")
        scores = _run_scores(out.path("clusters.tsv"), truth, truth_labels, ref_set,
                             strands, cores)
        summary = _run_summary(params, seed, n_reads, result, strands, checkpoint,
                                     timings, scores, list(files.values()))
        finish(out, summary, json_path, plot_dir)
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
    logger.info("%d reads, %d clusters, %d strands (%s)", n_reads, result.n_clusters,
                len(strands), stages)
    return summary


def _scoring_inputs(refs: str | None, truth: str | None) -> tuple[Any, dict[str, str] | None]:
    """`run`'s references and truth labels, read before the long work (a bad file fails
    fast). The truth is read once and kept: on standard input or a pipe it ends after one
    read (scoring it again failed with "I/O operation on closed file")."""
    from dnaembed.evaluate.clustering import read_truth_labels
    from dnaembed.evaluate.recovery import read_references

    return (read_references(refs) if refs else None,
            read_truth_labels(truth) if truth is not None else None)


def _run_header(params: dict) -> str:
    from dnaembed.io.tables import command_header

    return command_header("run", params)


def _run_summary(params, seed, n_reads, result, strands, checkpoint, timings, scores,
                       outputs) -> dict:
    from dnaembed.report.summary import command_summary

    return command_summary("run", params, seed=seed, reads=n_reads, result=result,
                           strands=strands, checkpoint=checkpoint, timings=timings,
                           scores=scores, outputs=outputs)


def _write_run(out: OutputSet, ids, result, strands, header: str, strand: str) -> None:
    from dnaembed.consensus import write_strand_report, write_strands
    from dnaembed.io.clusters import write_clusters

    write_clusters(out.path("clusters.tsv"), ids, result, header=header,
                   orientation=strand == "both")
    write_strands(out.path("strands.fasta"), strands)
    write_strand_report(out.path("strands.tsv"), strands, header=header)


def _run_scores(clusters_path, truth, truth_labels, ref_set, strands,
                workers: int) -> dict[str, object]:
    """Clustering scores against the truth, recovery scores against the references."""
    scores: dict[str, object] = {}
    if truth is not None:
        from dnaembed.evaluate.clustering import evaluate_files

        scores["clustering"] = evaluate_files(clusters_path, truth,
                                              truth_labels=truth_labels)
    if ref_set is not None:
        from dnaembed.evaluate.recovery import recovery_scores

        scores["recovery"] = recovery_scores(ref_set.seqs, [s.sequence for s in strands],
                                             workers=workers)
    return scores
