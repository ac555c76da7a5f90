"""`dnaembed consensus`: one reconstructed strand per cluster."""

from __future__ import annotations

import click

from dnaembed.cli.base import check_writable, cli, common_options, echo_result


@cli.command()
@click.argument("reads", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("clusters", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    help="Strands (FASTA; .gz compresses; - for standard output).",
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
@common_options
def consensus(
    reads: str,
    clusters: str,
    output: str,
    expected_length: int | None,
    min_size: int,
    orientation: str,
    max_iterations: int,
    medoid_only: bool,
    report: str | None,
    seed: int,
    threads: int,
) -> None:
    """Reconstruct each cluster's strand from its reads.

    READS is the FASTA/FASTQ that was clustered; CLUSTERS a TSV of
    read_id<TAB>cluster_id[<TAB>orientation] (what `dnaembed cluster` writes; a
    truth table works too). Reads absent from CLUSTERS are ignored; a read id
    in CLUSTERS that is not in READS is an error. Writes one FASTA record per
    cluster: the cluster id, then size=, confidence= (fraction of positions no
    single read could overturn), agreement= and distance= (mean edit distance
    of the reads to the strand).
    """
    from dnaembed.consensus import consensus_strands, write_strand_report, write_strands
    from dnaembed.errors import DnaembedError, InputError
    from dnaembed.io.sequences import describe_path, read_sequences
    from dnaembed.io.tables import command_header, read_cluster_table
    from dnaembed.log import logger

    if str(reads) == "-" and str(clusters) == "-":
        raise InputError("READS and CLUSTERS cannot both be standard input")
    if report is not None and str(report) == "-" and str(output) == "-":
        raise DnaembedError("--report and --output cannot both be standard output")
    check_writable(output, report)
    readset = read_sequences(reads)
    table = read_cluster_table(clusters, readset.ids)
    absent = len(readset) - len(table.labels)
    if absent:
        logger.info("%d of %d reads are in no cluster of %s: ignored", absent, len(readset),
                    describe_path(clusters))
    given = table.orientation if orientation == "auto" else None
    if orientation == "forward":
        given = "forward"
    logger.info(
        "orientation: %s",
        "from the clusters table" if isinstance(given, dict) else (given or "inferred"),
    )
    strands = consensus_strands(
        readset,
        table.labels,
        expected_length=expected_length,
        min_size=min_size,
        orientation=given,
        refine=not medoid_only,
        max_iterations=max_iterations,
        seed=seed,
        threads=threads,
    )
    if not strands:
        logger.warning("no cluster with at least %d read(s): writing no strand", min_size)
    params = dict(reads=reads, clusters=clusters, length=expected_length, min_size=min_size,
                  orientation=orientation, max_iterations=max_iterations,
                  medoid_only=medoid_only or None, seed=seed)
    if report:
        write_strand_report(report, strands, header=command_header("consensus", params),
                            medoid_only=medoid_only)
    write_strands(output, strands, medoid_only=medoid_only)
    sure = sum(1 for s in strands if s.confidence >= 1.0)
    summary = (
        f"{len(strands)} strands from {len(readset)} reads"
        f" ({sure} with every position backed by a margin of two reads or more)"
    )
    if str(output) == "-":
        logger.info(summary)
    else:
        echo_result(f"{summary}: {output}")
