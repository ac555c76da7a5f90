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

With ``--cost``, instead: what such a search would cost on one thread (the lists' fit,
finding a read's lists, scanning them), against round 1's own exact search of a cell.

    python scripts/check_fine_lists.py --sizes 1000000,3000000 --lists 256 --probes 8,16,32
    python scripts/check_fine_lists.py --sizes 1000000,3000000 --lists 256 --cost
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
            f"{pieces_per_strand(met, lo, hi, strand):.4f} | {part.cells:,} |")


def nearest_of(index, y: np.ndarray, k: int) -> np.ndarray:
    """Each row's ``k`` nearest in ``index`` (int32), searched in blocks (the distances of
    3 x 10^6 reads to their 128 nearest lists at once would be 1.5 GB)."""
    out = np.empty((len(y), k), dtype=np.int32)
    for start in range(0, len(y), 1 << 18):
        _, found = index.search(y[start : start + (1 << 18)], k)
        out[start : start + len(found)] = found
    return out


def fine_rows(y: np.ndarray, per_list: int, probes: list[int], lo, hi, strand: np.ndarray,
              seed: int, groups: list[int] = (), efs: list[int] = ()) -> list[str]:
    """Fine lists of ``per_list`` reads, each read probing its nearest ``probes`` lists;
    for each of ``groups``, the same lists found in two levels (:func:`two_level`); for
    each of ``efs``, through an HNSW graph of the lists' centroids (:func:`through_graph`)."""
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
    wide = min(lists, max(probes) * WIDE_FACTOR) if groups else max(probes)
    nearest = nearest_of(index, y, wide)
    home = nearest[:, 0]
    size = np.bincount(home, minlength=lists)
    ways = [("", nearest, lists)]
    for count in groups:
        found, measured = two_level(kmeans.centroids, nearest, y, count, seed)
        ways.append((f", found through the nearest {count} of {group_count(lists)} groups",
                     found, measured))
    for ef in efs:
        found, measured = through_graph(kmeans.centroids, y, max(probes), ef)
        ways.append((f", found through an HNSW graph of the lists (ef {ef})", found, measured))
    rows = []
    for label, found, measured in ways:
        for p in probes:
            probed = found[:, :p]
            met = ((probed[lo] == home[hi][:, None]).any(1)
                   | (probed[hi] == home[lo][:, None]).any(1))
            searched = np.where(probed >= 0, size[np.maximum(probed, 0)], 0).sum(1).mean()
            rows.append(f"| {n:,} | fine lists of {per_list:,} ({lists:,}), {p} probed{label} | "
                        f"{searched:,.0f} | {1 - met.mean():.4f} | "
                        f"{pieces_per_strand(met, lo, hi, strand):.4f} | {measured:,.0f} |")
    return rows


#: The lists a two-level search may return are taken from this many times the probes
#: nearest lists (exact), so that a read's choice among its groups' lists can be read off.
WIDE_FACTOR = 4


#: Links per node of the lists' HNSW graph, and the breadth of its construction.
GRAPH_LINKS = 32
GRAPH_BUILD_EF = 80


def through_graph(centroids: np.ndarray, y: np.ndarray, k: int, ef: int
                  ) -> tuple[np.ndarray, float]:
    """Each read's ``k`` nearest lists as an HNSW graph of their centroids finds them
    (faiss, ``ef`` candidates kept while searching), and the centroids a read is measured
    against on average (faiss's own count)."""
    from dnaembed.cluster.search import faiss_module

    faiss = faiss_module()
    graph = faiss.IndexHNSWFlat(centroids.shape[1], GRAPH_LINKS)
    graph.hnsw.efConstruction = GRAPH_BUILD_EF
    graph.add(centroids)
    graph.hnsw.efSearch = max(ef, k)
    faiss.cvar.hnsw_stats.reset()
    found = nearest_of(graph, y, k)
    return found, faiss.cvar.hnsw_stats.ndis / max(len(y), 1)


def group_count(lists: int) -> int:
    """Groups of fine lists for the two-level search: about the square root of the lists."""
    return max(1, int(round(np.sqrt(lists))))


def two_level(centroids: np.ndarray, nearest: np.ndarray, y: np.ndarray, count: int,
              seed: int) -> tuple[np.ndarray, float]:
    """Each read's nearest lists among those of its ``count`` nearest groups (k-means of
    the lists' centroids), in order; -1 where fewer were among ``nearest`` (the exact
    nearest lists, wide enough that this is rare). Also the centroids a read is measured
    against: the groups' and their lists' (on average)."""
    from dnaembed.cluster.search import faiss_module

    faiss = faiss_module()
    groups = group_count(len(centroids))
    kmeans = faiss.Kmeans(centroids.shape[1], groups, niter=ITERATIONS, seed=seed)
    kmeans.train(centroids)
    _, group_of = kmeans.index.search(centroids, 1)
    group_of = group_of[:, 0]
    index = faiss.IndexFlatL2(centroids.shape[1])
    index.add(kmeans.centroids)
    chosen = nearest_of(index, y, count)
    lists_in = np.bincount(group_of, minlength=groups)
    measured = groups + lists_in[chosen].sum(1).mean()
    found = np.full(nearest.shape, -1, dtype=np.int32)
    for start in range(0, len(y), 65_536):
        block = slice(start, start + 65_536)
        inside = (group_of[nearest[block]][:, :, None] == chosen[block][:, None, :]).any(2)
        # The lists inside, nearest first (a stable sort keeps their order).
        order = np.argsort(~inside, axis=1, kind="stable")
        picked = np.take_along_axis(nearest[block], order, axis=1)
        found[block] = np.where(np.take_along_axis(inside, order, axis=1), picked, -1)
    return found, measured


#: Reads whose searches the cost rows time (the first of the set), and the lists probed.
COST_QUERIES = 20_000
COST_PROBES = 32
COST_EF = 64
#: Neighbours a search returns: round 1's 16 and the read itself.
NEAREST = 17


def _cpu_of(fn) -> tuple[float, object]:
    """This thread's CPU seconds for ``fn()``, and its result."""
    import time

    started = time.thread_time()
    out = fn()
    return time.thread_time() - started, out


def _finding_costs(faiss, centroids: np.ndarray, queries: np.ndarray) -> dict:
    """Each query's nearest lists through an HNSW graph of the centroids and exactly: the
    graph's build, both searches' CPU, and the lists the graph found."""
    graph = faiss.IndexHNSWFlat(centroids.shape[1], GRAPH_LINKS)
    graph.hnsw.efConstruction = GRAPH_BUILD_EF
    build, _ = _cpu_of(lambda: graph.add(centroids))
    graph.hnsw.efSearch = COST_EF
    through, (_, probed) = _cpu_of(lambda: graph.search(queries, COST_PROBES))
    flat = faiss.IndexFlatL2(centroids.shape[1])
    flat.add(centroids)
    exact, _ = _cpu_of(lambda: flat.search(queries, COST_PROBES))
    return {"build": build, "graph": through, "exact": exact, "probed": np.maximum(probed, 0),
            "quantizer": flat}


def _scan_cost(faiss, y: np.ndarray, found: dict, queries: np.ndarray) -> tuple[float, int]:
    """CPU of scanning the found lists of every query (faiss's inverted file over all of
    ``y``, the lists given), and the distances it computed."""
    quantizer, probed = found["quantizer"], found["probed"]
    ivf = faiss.IndexIVFFlat(quantizer, y.shape[1], quantizer.ntotal)
    ivf.add(np.ascontiguousarray(y))
    ivf.nprobe = COST_PROBES
    sizes = np.array([ivf.invlists.list_size(i) for i in range(quantizer.ntotal)])
    scan, _ = _cpu_of(lambda: ivf.search_preassigned(
        queries, NEAREST, probed, np.zeros(probed.shape, np.float32)))
    return scan, int(sizes[probed].sum())


def _cell_cost(faiss, y: np.ndarray, sample: np.ndarray, seed: int) -> tuple[float, int, int]:
    """CPU of round 1's exact search of cell 0's home reads among all its members (the
    cells fitted on ``sample`` as round 1 fits them), its home reads and its members."""
    from dnaembed.cluster.partition import fit_partitioner, members_of_cells
    from dnaembed.cluster.partitioned import PartitionPlan

    plan, n = PartitionPlan(), len(y)
    part = fit_partitioner(y[sample], cells=max(1, -(-n // plan.partition_size)), search_dim=0,
                           margin=plan.margin, max_cells=plan.max_cells, seed=seed)
    cells = part.assign(y)
    members = members_of_cells(cells, part.cells)[0]
    home = members[cells[members, 0] == 0]
    cell = faiss.IndexFlatL2(y.shape[1])
    cell.add(np.ascontiguousarray(y[members]))
    search, _ = _cpu_of(lambda: cell.search(np.ascontiguousarray(y[home]), NEAREST))
    return search, max(len(home), 1), len(members)


def cost_rows(y: np.ndarray, sample: np.ndarray, per_list: int, seed: int) -> list[str]:
    """What round 1 on fine lists would cost on one thread, against round 1's own search:
    the lists' fit, finding each read's lists (an HNSW graph of their centroids; exactly),
    scanning them (faiss's inverted file, the lists given), and round 1's exact search of
    one cell among all its members. Rows: ``| reads | step | CPU | per read | per distance |``."""
    from dnaembed.cluster.search import faiss_module

    faiss, n = faiss_module(), len(y)
    faiss.omp_set_num_threads(1)
    lists = max(1, n // per_list)
    rng = np.random.default_rng([seed, 5])
    train = y[np.sort(rng.choice(n, min(n, lists * POINTS_PER_LIST), replace=False))]
    kmeans = faiss.Kmeans(y.shape[1], lists, niter=ITERATIONS, seed=seed,
                          max_points_per_centroid=POINTS_PER_LIST)
    fit, _ = _cpu_of(lambda: kmeans.train(train))
    queries = np.ascontiguousarray(y[:COST_QUERIES])
    found = _finding_costs(faiss, kmeans.centroids, queries)
    scan, scanned = _scan_cost(faiss, y, found, queries)
    search, home, members = _cell_cost(faiss, y, sample, seed)
    q, us = len(queries), 1e6
    return [f"| {n:,} | fit of {lists:,} lists ({ITERATIONS} iterations, {POINTS_PER_LIST} "
            f"points a list) | {fit:.1f} s | | |",
            f"| {n:,} | HNSW graph of the lists' centroids: built | {found['build']:.2f} s | | |",
            f"| {n:,} | a read's {COST_PROBES} nearest lists, through the graph (ef {COST_EF}) "
            f"| | {found['graph'] / q * us:.1f} µs | |",
            f"| {n:,} | a read's {COST_PROBES} nearest lists, exactly (flat) | | "
            f"{found['exact'] / q * us:.1f} µs | |",
            f"| {n:,} | scanning a read's {COST_PROBES} lists (inverted file), nearest "
            f"{NEAREST} | | {scan / q * us:.1f} µs | {scan / max(scanned, 1) * 1e9:.2f} ns |",
            f"| {n:,} | round 1: a read of cell 0 against its {members:,} members (flat), "
            f"nearest {NEAREST} | | {search / home * us:.1f} µs | "
            f"{search / (home * members) * 1e9:.2f} ns |"]


def search_space(prefix: Path, model, seed: int) -> tuple:
    """A bench set's reads, their vectors in round 1's search space (the principal axes of
    the sample round 1 draws), and that sample."""
    from dnaembed.cluster.partition import fit_partitioner
    from dnaembed.cluster.partitioned import PartitionPlan
    from dnaembed.io.sequences import read_sequences
    from dnaembed.model.inference import embed_sequences

    reads = read_sequences(f"{prefix}.fastq.gz")
    vectors = embed_sequences(model, reads.seqs)
    plan, n = PartitionPlan(), len(reads)
    rng = np.random.default_rng([seed, 21])
    cells = max(1, -(-n // plan.partition_size))
    sample = np.sort(rng.choice(n, min(n, max(plan.sample_size, 64 * cells)), replace=False))
    projection = fit_partitioner(vectors[sample], cells=1, search_dim=plan.search_dim,
                                 margin=0.0, max_cells=1, seed=seed)
    return reads, projection.project(vectors), sample


def set_rows(prefix: Path, model, per_lists: list[int], probes: list[int], groups: list[int],
             efs: list[int], seed: int) -> list[str]:
    from dnaembed.io.tables import read_labels

    reads, y, sample = search_space(prefix, model, seed)
    truth = read_labels(f"{prefix}.truth.tsv")
    strand = np.array([truth.get(i, "") for i in reads.ids])
    lo, hi = strand_pairs(strand)
    rows = [coarse_row(y, sample, lo, hi, strand, seed)]
    for per_list in per_lists:
        rows += fine_rows(y, per_list, probes, lo, hi, strand, seed, groups, efs)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000000,3000000", help="bench_scale set sizes")
    p.add_argument("--lists", default="256", help="reads per fine list, comma-separated")
    p.add_argument("--probes", default="8,16,32", help="lists probed per read")
    p.add_argument("--groups", default="", help="also find the lists in two levels, through "
                   "this many nearest groups of lists (comma-separated)")
    p.add_argument("--hnsw", default="", help="also find the lists through an HNSW graph of "
                   "their centroids, keeping this many candidates (comma-separated)")
    p.add_argument("--cost", action="store_true", help="instead, time on one thread what "
                   "round 1 on fine lists would cost against round 1's own search")
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
    lines = (["| reads | step (one thread) | CPU | per read | per distance |",
              "|---:|---|---:|---:|---:|"] if args.cost else
             ["| reads | searched against | distances a read | same-strand pairs met by no "
              "search | pieces per strand | centroids a read is measured against |",
              "|---:|---|---:|---:|---:|---:|"])
    for size in (int(s) for s in args.sizes.split(",") if s):
        prefix = ensure_set(args.workdir, size, args.seed)
        per_lists = [int(x) for x in args.lists.split(",")]
        if args.cost:  # no strands needed: the timings of one list size
            _, y, sample = search_space(prefix, model, args.seed)
            lines += cost_rows(y, sample, per_lists[0], args.seed)
        else:
            lines += set_rows(prefix, model, per_lists, [int(x) for x in args.probes.split(",")],
                              [int(x) for x in args.groups.split(",") if x],
                              [int(x) for x in args.hnsw.split(",") if x], args.seed)
        print("\n".join(lines), flush=True)
    finish(args.write_docs, "\n".join(lines))


if __name__ == "__main__":
    main()
