"""Round 1's coarse cells against fine lists probed from each read: distances and pieces.

For each bench_scale set (nanopore, 150 nt, coverage 10), the reads are embedded with
the cluster command's search encoder and projected as round 1 projects them. Two ways
of choosing the reads each read is searched against are compared, before any search:

* round 1's: the read's nearest cell of ~4,096 reads, whose members are every read
  within the margin of its boundary (up to 4 cells a read);
* fine lists (an inverted file): every read in the list of its nearest of ~n / L
  centroids (L reads a list, k-means on a sample), each read searched against the
  members of its P nearest lists.

Printed per set and way: the distances a read's search computes (members searched, on
average), the same-strand pairs that no search meets (neither read's searched reads
hold the other), and the pieces per strand that the pairs met leave (connected
components of each strand's met pairs: what a search that keeps every strand mate
among its nearest would leave for the rounds). Round 1's pieces predicted this way
were the pieces round 1 left (docs/scaling.md). No search, no exact check: the cost
of a design, not a run.

    python scripts/check_fine_lists.py --sizes 1000000,3000000 --lists 256 --probes 8,16,32
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_scale import ensure_set  # noqa: E402
from benchlib import add_write_docs, finish  # noqa: E402

#: k-means iterations and training points per list for the fine lists.
ITERATIONS = 10
POINTS_PER_LIST = 40


def strand_pairs(strand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of reads of one strand (unlabelled reads left out)."""
    order = np.argsort(strand, kind="stable")
    labels = strand[order]
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    sizes = np.diff(np.r_[starts, len(labels)])
    lo, hi = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for size in range(2, int(sizes.max(initial=0)) + 1):
        first = starts[(sizes == size) & (labels[starts] != "")]
        a, b = np.triu_indices(size, 1)
        lo.append((first[:, None] + a).ravel())
        hi.append((first[:, None] + b).ravel())
    return order[np.concatenate(lo)], order[np.concatenate(hi)]


def pieces_per_strand(met: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                      labelled: np.ndarray) -> float:
    """Connected components of the met pairs over the labelled reads (a strand of one read
    is one piece), per strand."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(labelled)
    graph = coo_matrix((np.ones(int(met.sum())), (lo[met], hi[met])), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    strands = len(np.unique(labelled[labelled != ""]))
    return len(np.unique(component[labelled != ""])) / strands


def coarse_row(y: np.ndarray, sample: np.ndarray, lo, hi, strand: np.ndarray, seed: int) -> str:
    """Round 1's cells, as the run fits them."""
    from dnaembed.cluster.partition import fit_partitioner, pairs_sharing_a_partition
    from dnaembed.cluster.partitioned import PartitionPlan

    plan, n = PartitionPlan(), len(y)
    part = fit_partitioner(y[sample], cells=max(1, -(-n // plan.partition_size)), search_dim=0,
                           margin=plan.margin, max_cells=plan.max_cells, seed=seed)
    cells = part.assign(y)
    size = np.bincount(cells[cells >= 0], minlength=part.cells)
    met = pairs_sharing_a_partition(lo, hi, cells)
    return (f"| {n:,} | round 1: cells of {plan.partition_size:,}, margin {plan.margin}, "
            f"up to {plan.max_cells} | {size[cells[:, 0]].mean():,.0f} | {1 - met.mean():.4f} | "
            f"{pieces_per_strand(met, lo, hi, strand):.4f} |")


def fine_rows(y: np.ndarray, per_list: int, probes: list[int], lo, hi, strand: np.ndarray,
              seed: int) -> list[str]:
    """Fine lists of ``per_list`` reads, each read probing its nearest ``probes`` lists."""
    from dnaembed.cluster.search import faiss_module

    faiss, n = faiss_module(), len(y)
    lists = max(1, n // per_list)
    rng = np.random.default_rng([seed, 5])
    train = y[np.sort(rng.choice(n, min(n, lists * POINTS_PER_LIST), replace=False))]
    kmeans = faiss.Kmeans(y.shape[1], lists, niter=ITERATIONS, seed=seed,
                          max_points_per_centroid=POINTS_PER_LIST)
    kmeans.train(train)
    index = faiss.IndexFlatL2(y.shape[1])
    index.add(kmeans.centroids)
    _, nearest = index.search(y, max(probes))
    home = nearest[:, 0]
    size = np.bincount(home, minlength=lists)
    rows = []
    for p in probes:
        probed = nearest[:, :p]
        met = (probed[lo] == home[hi][:, None]).any(1) | (probed[hi] == home[lo][:, None]).any(1)
        rows.append(f"| {n:,} | fine lists of {per_list:,} ({lists:,}), {p} probed | "
                    f"{size[probed].sum(1).mean():,.0f} | {1 - met.mean():.4f} | "
                    f"{pieces_per_strand(met, lo, hi, strand):.4f} |")
    return rows


def set_rows(prefix: Path, model, per_lists: list[int], probes: list[int], seed: int
             ) -> list[str]:
    from dnaembed.cluster.partition import fit_partitioner
    from dnaembed.cluster.partitioned import PartitionPlan
    from dnaembed.io.sequences import read_sequences
    from dnaembed.io.tables import read_labels
    from dnaembed.model.inference import embed_sequences

    reads = read_sequences(f"{prefix}.fastq.gz")
    truth = read_labels(f"{prefix}.truth.tsv")
    strand = np.array([truth.get(i, "") for i in reads.ids])
    lo, hi = strand_pairs(strand)
    vectors = embed_sequences(model, reads.seqs)
    plan, n = PartitionPlan(), len(reads)
    rng = np.random.default_rng([seed, 21])
    cells = max(1, -(-n // plan.partition_size))
    sample = np.sort(rng.choice(n, min(n, max(plan.sample_size, 64 * cells)), replace=False))
    # The search space as round 1's: the sample's principal axes.
    projection = fit_partitioner(vectors[sample], cells=1, search_dim=plan.search_dim,
                                 margin=0.0, max_cells=1, seed=seed)
    y = projection.project(vectors)
    del vectors
    rows = [coarse_row(y, sample, lo, hi, strand, seed)]
    for per_list in per_lists:
        rows += fine_rows(y, per_list, probes, lo, hi, strand, seed)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000000,3000000", help="bench_scale set sizes")
    p.add_argument("--lists", default="256", help="reads per fine list, comma-separated")
    p.add_argument("--probes", default="8,16,32", help="lists probed per read")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/dnaembed-bench-scale"))
    p.add_argument("--model", default=None, help="search encoder (default: cluster's own)")
    p.add_argument("--seed", type=int, default=0)
    add_write_docs(p, "Round 1's coarse cells against fine lists probed from each read")
    args = p.parse_args()

    from dnaembed.log import set_threads
    from dnaembed.model.checkpoint import load_search_model

    set_threads(0)
    args.workdir.mkdir(parents=True, exist_ok=True)
    model = load_search_model(args.model, "graph").model
    lines = ["| reads | searched against | distances a read | same-strand pairs met by no "
             "search | pieces per strand |", "|---:|---|---:|---:|---:|"]
    for size in (int(s) for s in args.sizes.split(",") if s):
        prefix = ensure_set(args.workdir, size, args.seed)
        lines += set_rows(prefix, model, [int(x) for x in args.lists.split(",")],
                          [int(x) for x in args.probes.split(",")], args.seed)
        print("\n".join(lines), flush=True)
    finish(args.write_docs, "\n".join(lines))


if __name__ == "__main__":
    main()
