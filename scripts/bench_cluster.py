#!/usr/bin/env python
"""Benchmark `dnaembed cluster`: accuracy, time per stage and peak memory.

Simulates the issue's sets (10,000 strands of 150 nt, negative-binomial
coverage of mean 10, per channel preset), clusters each with every method
(graph, kmeans, dbscan) on default settings, and prints one Markdown table:
A_0.8 / A_0.9 / A_1.0, ARI, NMI, clusters, wall time split into stages
(read, embed, search, check, link/fit, split, rescue, write) and peak memory. Also,
on request, the real ldpc-exp7 set (``--real``), related design pools
(``--related``: ``related-partners``, 2,000 designs of 110 nt, 30% of them in
pairs shifted by 14 nt, and ``related-windows``, 2,000 overlapping windows 14 nt
apart, nanopore, coverage 27; and 2,000 designs of 150 nt in partners 6-40
substitutions apart, :data:`RELATED_SETS`) and a scaling series
(``--scaling 10000,100000,1000000`` reads; graph, ``--strand plus`` and
``both``; ``--scaling-strands plus`` for one).

Every run happens in a fresh subprocess of this script (``--worker``), so the
peak memory reported is that run's own (``resource.getrusage``), and it runs
the same library calls as ``dnaembed cluster`` (read the FASTQ, cluster, write
the TSV), timed stage by stage: for ``graph``, the partitioned method in one
process (``graph:in_memory=true``: the in-memory ``GraphClusterer`` of
``dnaembed.pipeline.cluster_reads``).

    python scripts/bench_cluster.py                      # all presets x methods
    python scripts/bench_cluster.py --strands 1000 --methods graph   # quick
    python scripts/bench_cluster.py --real --presets none --methods graph
    python scripts/bench_cluster.py --presets none --scaling 10000,100000,1000000
    python scripts/bench_cluster.py --methods kmeans,kmeans:refine=true,dbscan --real \
        --baseline ../main-snapshot            # the same runs with another checkout's code

A method may carry hyper-parameters, ``NAME:key=value:key=value`` (values:
integers, numbers, true, false, none), e.g. ``dbscan:min_cluster_size=none``.
``--baseline DIR`` runs every method a second time with the ``dnaembed`` package
found in DIR (a checkout of another commit), in the same script run, so that the
two are measured side by side.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REAL_READS, REAL_TRUTH, add_write_docs, finish

ROOT = Path(__file__).resolve().parent.parent


def simulate_set(prefix: Path, preset: str, strands: int, length: int, coverage: float,
                 realistic: bool, seed: int, related: dict | None = None) -> None:
    """Write PREFIX.fastq.gz and PREFIX.truth.tsv like `dnaembed simulate` does."""
    from dnaembed.sim.simulate import SimulationPlan, run_simulation

    layout = {}
    if realistic:
        layout = {"reverse_fraction": 0.5, "truncate_fraction": 0.1, "contaminant_fraction": 0.01}
    plan = SimulationPlan(
        n_strands=strands, length=(length, length), preset=preset, seed=seed,
        primer_length=25 if realistic else 0,
        coverage={"model": "negbin", "mean": coverage, "dispersion": 5.0}, layout=layout,
        related=related or {},
    )
    run_simulation(plan, prefix)


def method_spec(spec: str) -> tuple[str, dict[str, object]]:
    """``NAME:key=value:...`` -> the method's name and its hyper-parameters."""
    name, *pairs = spec.split(":")
    words = {"true": True, "false": False, "none": None}
    params: dict[str, object] = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        if text.lower() in words:
            params[key] = words[text.lower()]
        else:
            params[key] = float(text) if any(c in text for c in ".e") else int(text)
    return name, params


def use_code(directory: str) -> None:
    """Import ``dnaembed`` from DIRECTORY instead of this checkout (an editable install's
    import hook would take precedence over ``sys.path``)."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if "__editable__" not in getattr(f, "__module__", "")]
    sys.path.insert(0, str(Path(directory).resolve()))


#: The related pools of ``--related``: name -> (preset, designs, length, mean coverage,
#: RelatedDesigns options). Issue 15's two; then partners a few substitutions apart, whose
#: pairs overlap the same-strand ones' tail (fifty-sixth session): at illumina-array rates,
#: at illumina rates read 20 times (most reads exact copies), at nanopore rates 20 and 40
#: apart (the 40 beyond the valley, where the rescue's bound reached them).
RELATED_SETS = {
    "related-partners": ("nanopore", 2000, 110, 27.0,
                         {"partner_fraction": 0.3, "partner_shift": 14}),
    "related-windows": ("nanopore", 2000, 110, 27.0, {"window_shift": 14}),
    "partners-8-illumina-array": ("illumina-array", 2000, 150, 10.0,
                                  {"partner_fraction": 1.0, "partner_edits": 8}),
    "partners-6-illumina-x20": ("illumina", 2000, 150, 20.0,
                                {"partner_fraction": 1.0, "partner_edits": 6}),
    "partners-20-nanopore": ("nanopore", 2000, 150, 10.0,
                             {"partner_fraction": 1.0, "partner_edits": 20}),
    "partners-40-nanopore": ("nanopore", 2000, 150, 10.0,
                             {"partner_fraction": 1.0, "partner_edits": 40}),
}


def worker(args: argparse.Namespace) -> None:
    """One run, in this process: read, cluster, write, score; JSON on stdout."""
    if args.code:
        use_code(args.code)
    from dnaembed.evaluate.clustering import evaluate_files
    from dnaembed.io.clusters import write_clusters
    from dnaembed.io.sequences import read_sequences
    from dnaembed.io.tables import command_header
    from dnaembed.log import set_threads
    from dnaembed.model.checkpoint import load_search_model
    from dnaembed.pipeline import cluster_reads

    threads = set_threads(args.threads)
    load_before = os.getloadavg()[0]
    method, params = method_spec(args.method)
    model = load_search_model(args.model, method).model
    gc.freeze()  # as `dnaembed cluster` does once the model is loaded (log.freeze_long_lived)
    t0 = time.perf_counter()
    if method == "graph" and not params.pop("in_memory", False):
        # What `dnaembed cluster` runs: the partitioned graph method, in this process.
        result, ids, seconds_write = command_graph(args, model, params, threads)
        seconds_read = result.timings.pop("read", 0.0)
        reads_count = len(ids)
    else:
        reads = read_sequences(args.reads)
        seconds_read = time.perf_counter() - t0
        params.update(threads=threads, seed=args.seed)
        if args.index_dim is not None:
            params["index_dim"] = args.index_dim
        result = cluster_reads(reads.seqs, model, method=method, strand=args.strand,
                               params=params)
        t1 = time.perf_counter()
        write_clusters(args.output, reads.ids, result, orientation=args.strand == "both",
                       header=command_header("cluster", {"method": method}))
        seconds_write = time.perf_counter() - t1
        reads_count = len(reads)
    total = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
    out = {
        "reads": reads_count,
        "clusters": result.n_clusters,
        "seconds": total,
        "stages": {"read": seconds_read, **result.timings, "write": seconds_write},
        "peak_mib": peak,
        # Other jobs on the machine slow every stage: the 1-minute load average, before/after.
        "load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "threshold": result.threshold.max_dist if result.threshold else None,
        "stats": {k: v for k, v in result.stats.items() if isinstance(v, int | float)},
    }
    if args.truth:
        out["scores"] = evaluate_files(args.output, args.truth)
    print(json.dumps(out))


def command_graph(args: argparse.Namespace, model, params: dict, threads: int):
    """The graph method as `dnaembed cluster` runs it; the result, the ids, seconds writing."""
    from dnaembed.execute.inline import InlineExecutor
    from dnaembed.io.clusters import write_clusters
    from dnaembed.io.tables import command_header
    from dnaembed.pipeline import clustered_files

    if args.index_dim is not None:
        params["search_dim"] = args.index_dim
    with (InlineExecutor(threads) as executor,
          clustered_files([args.reads], model, executor, strand=args.strand, params=params,
                          seed=args.seed) as (result, store)):
        start = time.perf_counter()
        write_clusters(args.output, store.ids, result, orientation=args.strand == "both",
                       header=command_header("cluster", {"method": "graph"}))
        return result, list(store.ids), time.perf_counter() - start


def run_worker(reads: Path, truth: Path | None, method: str, strand: str, args,
               workdir: Path, index_dim: int | None = None, code: str | None = None) -> dict:
    tag = f"{method}{'' if index_dim is None else index_dim}{'.baseline' if code else ''}"
    cmd = [sys.executable, __file__, "--worker", "--reads", str(reads), "--method", method,
           "--strand", strand, "--output",
           str(workdir / f"{reads.stem}.{tag.replace(':', '_')}.tsv"),
           "--threads", str(args.threads), "--seed", str(args.seed)]
    if index_dim is not None:
        cmd += ["--index-dim", str(index_dim)]
    if code is not None:
        cmd += ["--code", code]
    if truth is not None:
        cmd += ["--truth", str(truth)]
    if args.model:
        cmd += ["--model", args.model]
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


STAGES = ("read", "dedupe", "embed", "partition", "search", "check", "link", "kmeans", "dbscan",
          "split", "rescue", "write")


def table(rows: list[dict]) -> str:
    head = ("| set | method | strand | reads | A_0.8 | A_0.9 | A_1.0 | ARI | NMI | clusters "
            "(true) | time s | " + " | ".join(STAGES) + " | peak MiB | load |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        res = r["result"]
        if "error" in res:
            lines.append(f"| {r['set']} | {r['method']} | {r['strand']} | error: {res['error']} |")
            continue
        s = res.get("scores", {})
        f = {k: (f"{s[k]:.4f}" if k in s else "-") for k in ("A_0.8", "A_0.9", "A_1.0", "ARI",
                                                          "NMI")}.get

        stages = " | ".join(f"{res['stages'].get(k, 0):.1f}" for k in STAGES)
        true = s.get("true_clusters", "-")
        lines.append(
            f"| {r['set']} | {r['method']} | {r['strand']} | {res['reads']:,} | {f('A_0.8')} | "
            f"{f('A_0.9')} | {f('A_1.0')} | {f('ARI')} | {f('NMI')} | {res['clusters']:,} "
            f"({true}) | {res['seconds']:.1f} | {stages} | {res['peak_mib']:.0f} | "
            f"{res['load'][0]:.1f}/{res['load'][1]:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", default="illumina-array,nanopore,nanopore-hard",
                   help="comma-separated presets, or 'none'")
    p.add_argument("--methods", default="graph,kmeans,dbscan")
    p.add_argument("--strand", default="both", choices=["both", "plus"])
    p.add_argument("--strands", type=int, default=10_000)
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--coverage", type=float, default=10.0)
    p.add_argument("--realistic", action="store_true",
                   help="also reverse complements (50%%), truncated reads (10%%), "
                        "contaminants (1%%) and 25-nt primers")
    p.add_argument("--real", action="store_true", help="also the real ldpc-exp7 set")
    p.add_argument("--related", action="store_true",
                   help=f"also the related design pools ({', '.join(RELATED_SETS)})")
    p.add_argument("--scaling", default="",
                   help="comma-separated read counts for a graph-method scaling series")
    p.add_argument("--scaling-strands", default="plus,both",
                   help="strand modes of the scaling series (comma-separated)")
    p.add_argument("--model", help="model file or bundled model's name (default: cluster's, "
                   "candidates for graph, default for kmeans and dbscan)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--index-dims", default="",
                   help="comma-separated --index-dim values to run every set with, side by "
                        "side (0: HNSW on the full vectors; default: cluster's default only)")
    p.add_argument("--baseline", help="also run every method with the dnaembed package of "
                   "this directory (a checkout of another commit), side by side")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--json", dest="json_out", help="write all results here as JSON")
    p.add_argument("--workdir", help="keep the simulated sets and outputs here")
    add_write_docs(p, "Clustering")
    # Worker mode (internal).
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--reads", help=argparse.SUPPRESS)
    p.add_argument("--truth", help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    p.add_argument("--index-dim", type=int, help=argparse.SUPPRESS)
    p.add_argument("--code", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return

    sys.path.insert(0, str(ROOT))
    from dnaembed.log import configure

    configure(quiet=True)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_cluster."))
    workdir.mkdir(parents=True, exist_ok=True)
    methods = [m for m in args.methods.split(",") if m]
    presets = [] if args.presets == "none" else args.presets.split(",")
    rows: list[dict] = []
    from dnaembed.model.checkpoint import load_search_model

    model = load_search_model(args.model, methods[0] if methods else "graph")
    print(f"# bench_cluster: {os.cpu_count()} CPUs, model {model.path} "
          f"({model.model.config.name}, D={model.model.config.embedding_dim}), "
          f"workdir {workdir}; load = 1-minute load average before/after each run",
          flush=True)

    index_dims = [int(x) for x in args.index_dims.split(",") if x] or [None]

    codes = [None] + ([args.baseline] if args.baseline else [])

    def record(name, method, strand, reads, truth):
        for dim in index_dims:
            # Hyper-parameters of this checkout's methods may be unknown to the baseline's.
            for code in codes if ":" not in method else [None]:
                result = run_worker(reads, truth, method, strand, args, workdir, dim, code)
                label = method if dim is None else f"{method}, index-dim {dim}"
                label += " (baseline)" if code else ""
                rows.append({"set": name, "method": label, "strand": strand, "result": result})
                print(table(rows[-1:]).splitlines()[-1], flush=True)

    for preset in presets:
        name = f"{preset}{'-realistic' if args.realistic else ''}"
        prefix = workdir / name
        if not Path(f"{prefix}.fastq.gz").exists():
            simulate_set(prefix, preset, args.strands, args.length, args.coverage,
                         args.realistic, args.seed)
        for method in methods:
            record(name, method, args.strand, Path(f"{prefix}.fastq.gz"),
                   Path(f"{prefix}.truth.tsv"))
    for name, (preset, strands, length, coverage, related) in (
            RELATED_SETS.items() if args.related else ()):
        prefix = workdir / name
        if not Path(f"{prefix}.fastq.gz").exists():
            simulate_set(prefix, preset, strands, length, coverage, False, args.seed, related)
        for method in methods:
            record(name, method, args.strand, Path(f"{prefix}.fastq.gz"),
                   Path(f"{prefix}.truth.tsv"))
    if args.real:
        for method in methods:
            record("ldpc-exp7 (real)", method, "both", REAL_READS,
                   REAL_TRUTH)
    for count in [int(float(x)) for x in args.scaling.split(",") if x]:
        prefix = workdir / f"scale-{count}"
        if not Path(f"{prefix}.fastq.gz").exists():
            simulate_set(prefix, "nanopore", max(1, count // 10), args.length, 10.0, False,
                         args.seed)
        for strand in args.scaling_strands.split(","):
            record(f"scaling {count:,}", "graph", strand, Path(f"{prefix}.fastq.gz"),
                   Path(f"{prefix}.truth.tsv"))

    print("\n" + table(rows))
    finish(args.write_docs, "load: the 1-minute load average before/after each run.\n\n"
           + table(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
