"""`dnaembed consensus`: one reconstructed strand per cluster."""

from __future__ import annotations

import click

from dnaembed.cli.base import cli, common_options, echo_result, json_option, plot_option


@cli.command()
@click.argument("reads", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("clusters", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Strands (FASTA; .gz compresses; - for standard output).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tsv", "uc", "clstr", "mmseqs", "starcode"]),
    default="tsv",
    show_default=True,
    help="Format of CLUSTERS: dnaembed's table, or another tool's (vsearch --uc, CD-HIT "
    ".clstr, MMseqs2 cluster TSV, starcode --seq-id: its line numbers, READS in its input "
    "order). Orientations come from the table's third column only.",
)
@click.option(
    "--length",
    "expected_length",
    type=click.IntRange(min=1),
    help="Expected strand length (designs of one length): medoids are chosen near it and "
    "estimates that end within 2% of it are brought to it.",
)
@click.option(
    "--min-size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Skip clusters with fewer non-empty reads.",
)
@click.option(
    "--orientation",
    type=click.Choice(["auto", "infer", "forward"]),
    default="auto",
    show_default=True,
    help="auto: the clusters table's third column (+/-) when it has one, else infer; "
    "infer: compare each read and its reverse complement with the cluster's medoid; "
    "forward: reads are already in one orientation.",
)
@click.option(
    "--max-iterations",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Refinement rounds at most (0: the medoids).",
)
@click.option(
    "--medoid-only",
    is_flag=True,
    help="Write each cluster's medoid read (the baseline) instead of a consensus.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Also write a TSV: cluster_id, size, confidence, agreement, distance, length, ...",
)
@json_option("the summary (counts, support and confidence, times, versions)")
@plot_option
@common_options
def consensus(
    reads: str,
    clusters: str,
    output: str,
    fmt: str,
    orientation: str,
    report: str | None,
    json_path: str | None,
    plot_dir: str | None,
    seed: int,
    threads: int,
    **options,
) -> None:
    """Reconstruct each cluster's strand from its reads.

    READS is the FASTA/FASTQ that was clustered; CLUSTERS a TSV of
    read_id<TAB>cluster_id[<TAB>orientation] (what `dnaembed cluster` writes; a
    truth table works too), or another tool's clusters (--format). Reads absent
    from CLUSTERS are ignored; a read id in CLUSTERS that is not in READS is an
    error. Writes one FASTA record per
    cluster, in cluster id order: the cluster id, then size=, confidence=
    (fraction of positions no single read could overturn), agreement= and
    distance= (mean edit distance of the reads to the strand).
    """
    from dnaembed.cli.jobs import consensus_job
    from dnaembed.log import logger

    outputs = {"-o/--output": output, "--report": report, "--json": json_path}
    n_reads, strands = consensus_job(reads, clusters, outputs=outputs, plot_dir=plot_dir,
                                     orientation=orientation, options=options, seed=seed,
                                     threads=threads, fmt=fmt)
    if not strands:
        logger.warning("no cluster with at least %d read(s): writing no strand",
                       options["min_size"])
    sure = sum(1 for s in strands if s.confidence >= 1.0)
    summary = (
        f"{len(strands)} strands from {n_reads} reads"
        f" ({sure} with every position backed by a margin of two reads or more)"
    )
    # Whichever output is standard output, the line goes to the log: after --report -'s
    # rows it made the last line of the table.
    if "-" in (output, json_path, report):
        logger.info(summary)
    else:
        echo_result(f"{summary}: {output}")
