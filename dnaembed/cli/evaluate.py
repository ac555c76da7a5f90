"""`dnaembed evaluate`: clusters against the truth, or strands against the references."""

from __future__ import annotations

import json

import click

from dnaembed.cli.base import cli, common_options, echo_result


@cli.command()
@click.argument("result", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--truth",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Score RESULT as clusters: truth TSV read_id<TAB>strand_id[...] (simulate's truth, "
    "or a data set's labels).",
)
@click.option(
    "--refs",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Score RESULT as recovered strands (FASTA): the reference strands (FASTA).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the scores as one JSON object.")
@common_options
def evaluate(result: str, truth: str | None, refs: str | None, as_json: bool, seed: int,
             threads: int) -> None:
    """Score RESULT: clusters (with --truth) or recovered strands (with --refs).

    \b
    dnaembed evaluate clusters.tsv --truth reads.truth.tsv
    dnaembed evaluate strands.fasta --refs reads.refs.fasta

    Clusters (read_id<TAB>cluster_id): A_gamma at 0.8 / 0.9 / 1.0 (Rashtchian
    et al.: the fraction of true clusters C for which some output cluster C' is
    a subset of C with |C'| >= gamma |C|), ARI, NMI and cluster counts. Reads
    of the truth missing from RESULT count as singletons; reads of no strand
    (strand id 'contaminant', or absent from the truth) are noise.

    Strands: the fraction of references recovered exactly, within edit
    distance 1 and 3 (each reference against its nearest strand), and the
    per-position error of the strands found.
    """
    from dnaembed.errors import DnaembedError

    if (truth is None) == (refs is None):
        raise DnaembedError("evaluate needs one of --truth TRUTH.tsv (clusters) or "
                            "--refs REFS.fasta (strands)")
    if result == "-" and "-" in (truth, refs):
        raise DnaembedError("RESULT and its reference cannot both be standard input")
    if truth is not None:
        from dnaembed.evaluate.clustering import evaluate_files, format_scores

        scores = evaluate_files(result, truth)
        key = {"clusters": result, "truth": truth}
    else:
        from dnaembed.evaluate.recovery import format_scores, recovery_scores
        from dnaembed.io.sequences import read_sequences

        references = read_sequences(refs)
        strands = read_sequences(result)
        scores = recovery_scores(references.seqs, strands.seqs, workers=threads or -1)
        key = {"strands": result, "refs": refs}
    if as_json:
        echo_result(json.dumps({**key, **scores}))
    else:
        echo_result(format_scores(scores))
