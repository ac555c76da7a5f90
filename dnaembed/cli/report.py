"""`dnaembed report`: PNG plots of a command's JSON summary or of a training run."""

from __future__ import annotations

import click

from dnaembed.cli.base import cli, common_options


@cli.command()
@click.argument("sources", nargs=-1, required=True,
                type=click.Path(exists=True, allow_dash=False))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for the PNGs (created if missing).")
@common_options
def report(sources: tuple[str, ...], out_dir: str, seed: int, threads: int) -> None:
    """Draw the plots of SOURCES: summaries (--json of cluster, consensus or run) or
    training run directories (their metrics.jsonl).

    A summary gives distances.png (the sampled edit distances, the cut and both
    peaks), cluster-sizes.png and, from run or consensus, consensus-support.png;
    a training run gives training.png (training loss, validation error). With
    several SOURCES, each one's plots go into a subdirectory named after it.
    Needs matplotlib (pip install 'dnaembed[plot]').
    """
    from pathlib import Path

    from dnaembed.io.atomic import OutputSet
    from dnaembed.log import logger
    from dnaembed.report.plots import figures_of, require_matplotlib, save_figures

    require_matplotlib()
    with OutputSet({}, inputs={f"SOURCE {s}": s for s in sources},
                   directories=(out_dir,)) as out:
        for source in sources:
            where = Path(out_dir) / Path(source).stem if len(sources) > 1 else Path(out_dir)
            if where != Path(out_dir):
                out.directory(where)
            for path in save_figures(figures_of(source), where, out):
                logger.info("plot: %s", path)
