"""Stand-in for ``dnaembed cluster READS -o OUT`` while that command is being written.

Runs the same library chain with its defaults (``dnaembed.pipeline.cluster_reads``:
graph method, bundled model, both strands) and writes the same table. The benchmark
uses it only when the CLI is missing, and says so in the settings column; once the
command exists the benchmark calls the command.

    python scripts/peers/dnaembed_lib.py READS OUT
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Cluster ``argv[0]`` into ``argv[1]``."""
    from dnaembed.io.clusters import write_clusters
    from dnaembed.io.sequences import read_sequences
    from dnaembed.log import configure
    from dnaembed.model.checkpoint import load_model
    from dnaembed.pipeline import cluster_reads

    reads_path, out_path = argv
    configure()
    reads = read_sequences(reads_path)
    model = load_model(None).model
    result = cluster_reads(reads.seqs, model)
    write_clusters(out_path, reads.ids, result)
    print(
        "timings " + " ".join(f"{k}={v:.2f}s" for k, v in result.timings.items()),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
