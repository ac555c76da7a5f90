"""`dnaembed embed`."""

from __future__ import annotations

import click

from dnaembed.cli.base import cli, common_options, inference_options, model_option


@cli.command()
@click.argument("reads", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Embeddings .npy (one row per read); the read ids go beside it in NAME.ids.txt. "
    "A file: not - (standard output) nor compressed.",
)
@model_option
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float16"]),
    default="float32",
    show_default=True,
    help="Stored precision of the vectors.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=65536,
    show_default=True,
    help="Reads held in memory at once.",
)
@inference_options
@common_options
def embed(
    reads: str,
    output: str,
    model_path: str | None,
    dtype: str,
    device: str,
    batch_size: int | None,
    precision: str,
    chunk_size: int,
    seed: int,
    threads: int,
) -> None:
    """Embed READS: squared distances between rows approximate edit distances.

    Streams the input (memory bounded by --chunk-size, whatever the file
    size). Writes OUTPUT (.npy, float32 or float16, shape reads x dim) and
    OUTPUT's name with .ids.txt instead of .npy (one read id per line, in row
    order). Reads longer than the model's window are embedded by their first
    window bases; the log says how many.
    """
    from dnaembed.errors import UsageError
    from dnaembed.io.atomic import COMPRESSED_SUFFIXES, OutputSet
    from dnaembed.io.vectors import check_embedding_output, ids_path_for
    from dnaembed.log import logger, set_threads
    from dnaembed.model.checkpoint import load_model, resolve_device
    from dnaembed.model.inference import embed_file

    if output == "-" or output.endswith(COMPRESSED_SUFFIXES):
        raise UsageError(f"-o/--output {output}: embeddings are a .npy file (memory-mappable, "
                         "uncompressed) with its ids beside it; give a file name")
    check_embedding_output(output)  # before the OutputSet stages the ids beside it
    outputs = {"-o/--output": output, "ids": str(ids_path_for(output))}
    with OutputSet(outputs, inputs={"READS": reads}) as out:
        set_threads(threads)
        checkpoint = load_model(model_path, resolve_device(device))
        # embed_file writes the ids beside its output: in the OutputSet's staging
        # directory, where the set expects them.
        summary = embed_file(
            reads, checkpoint.model, out.path("-o/--output"), dtype=dtype,
            batch_size=batch_size, chunk_size=chunk_size, precision=precision,
        )
    if summary.truncated:
        logger.warning(
            "%d of %d reads are longer than the model's window of %d: embedded by their "
            "first %d bases",
            summary.truncated, summary.reads, summary.window, summary.window,
        )
    logger.info(
        "wrote %s (%d x %d, %s) and %s", output, summary.reads, summary.dim, dtype,
        ids_path_for(output),
    )
