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
    a training run gives training.png (training loss, validation error). A staged
    run's directory (train -c with stages: OUT/1-NAME, OUT/2-NAME, ...) gives each
    stage's training.png in a subdirectory of the stage's name, OUTPUT/1-NAME/, ...;
    a stage's own directory, its plot alone. With several SOURCES, each one's plots
    go into a subdirectory named after it (NAME-1, NAME-2, ... in their order where
    names repeat, as r1/summary.json and r2/summary.json do). All plots are written,
    or none. Needs matplotlib (pip install 'dnaembed[plot]').
    """
    from pathlib import Path

    from dnaembed.io.atomic import OutputSet
    from dnaembed.log import logger
    from dnaembed.report.plots import figures_of, require_matplotlib, save_figures

    require_matplotlib()
    names = _subdirectories(sources)
    with OutputSet({}, inputs={f"SOURCE {s}": s for s in sources},
                   directories=(out_dir,)) as out:
        for source, name in zip(sources, names, strict=True):
            where = Path(out_dir) / name if len(sources) > 1 else Path(out_dir)
            if where != Path(out_dir):
                out.directory(where)
            for path in save_figures(figures_of(source), where, out):
                logger.info("plot: %s", path)


def _subdirectories(sources: tuple[str, ...]) -> list[str]:
    """Each source's subdirectory: its name without suffix, numbered in order where two
    sources share it (their plots went to one directory, the last one's kept)."""
    from collections import Counter
    from pathlib import Path

    stems = [Path(source).stem for source in sources]
    shared = {stem for stem, count in Counter(stems).items() if count > 1}
    taken = set(stems) - shared
    names, seen = [], Counter()
    for stem in stems:
        name = stem
        while stem in shared and (name == stem or name in taken):
            seen[stem] += 1
            name = f"{stem}-{seen[stem]}"
        taken.add(name)
        names.append(name)
    return names
