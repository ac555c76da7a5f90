"""`dnaembed evaluate`: clusters against the truth, or strands against the references."""

from __future__ import annotations

import click

from dnaembed.cli.base import cli, common_options, echo_result, json_option, write_json
from dnaembed.io.formats import READ_FORMATS


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
    help="Score RESULT as recovered strands (FASTA) against these reference strands (FASTA).",
)
@click.option("-f", "--format", "fmt", type=click.Choice(READ_FORMATS), default="tsv",
              show_default=True,
              help="RESULT's format as clusters: tsv (dnaembed cluster), uc (vsearch --uc), "
              "clstr (CD-HIT), mmseqs (MMseqs2 cluster TSV), starcode (starcode --seq-id).")
@click.option("--reads", type=click.Path(dir_okay=False, allow_dash=True),
              help="The reads the tool clustered, in its input order (needed by starcode, "
              "whose output numbers its input lines; checks the read ids of the others; only "
              "the truth's reads among them are scored).")
@json_option("the scores")
@common_options
def evaluate(result: str, truth: str | None, refs: str | None, fmt: str, reads: str | None,
             json_path: str | None, seed: int, threads: int) -> None:
    """Score RESULT: clusters (with --truth) or recovered strands (with --refs).

    Clusters (read_id<TAB>cluster_id, or another tool's --format): A_gamma at
    0.8 / 0.9 / 1.0 (Rashtchian et al.: the fraction of true clusters C for
    which some output cluster C' is a subset of C with |C'| >= gamma |C|), ARI,
    NMI and cluster counts. Reads
    of the truth missing from RESULT count as singletons; reads of no strand
    (strand id 'contaminant', or absent from the truth) are noise.

    Strands: the fraction of references recovered exactly, within edit
    distance 1 and 3 (each reference against its nearest strand), and the
    per-position error of the strands found.
    """
    from dnaembed.errors import UsageError
    from dnaembed.io.atomic import check_distinct

    if (truth is None) == (refs is None):
        raise UsageError("evaluate needs one of --truth TRUTH.tsv (clusters) or "
                         "--refs REFS.fasta (strands)")
    if refs is not None and (fmt != "tsv" or reads is not None):
        raise UsageError("--format and --reads apply to clusters (--truth) only")
    if fmt == "starcode" and reads is None:
        raise UsageError("--format starcode needs --reads: Starcode's output numbers its "
                         "input lines, and the reads name them")
    check_distinct({"RESULT": result, "--truth": truth, "--refs": refs, "--reads": reads},
                   {"--json": json_path})
    if truth is not None:
        from dnaembed.evaluate.clustering import evaluate_files, format_scores

        scores = evaluate_files(result, truth, fmt=fmt, reads_path=reads)
        key = {"clusters": result, "format": fmt, "truth": truth}
    else:
        from dnaembed.evaluate.recovery import format_scores, read_references, recovery_scores
        from dnaembed.io.sequences import read_sequences

        references = read_references(refs)
        strands = read_sequences(result)
        scores = recovery_scores(references.seqs, strands.seqs, workers=threads or -1)
        # Not "strands": the scores' "strands" is their count and replaced the file's name.
        key = {"strands_file": result, "refs": refs}
    if json_path is not None:
        write_json(json_path, {**key, **scores})
    if json_path != "-":
        echo_result(format_scores(scores))
