#!/usr/bin/env python
"""dnaembed against the clusterers labs use today, side by side, on the same reads.

For each data set (``--sets``): write the reads once (simulated with dnaembed's
simulator, or the real ldpc-exp7 set), run ``dnaembed cluster READS -o clusters.tsv``
(defaults) and every installed peer with the settings a careful user would give it
(see ``scripts/peers/tools.py``: vsearch ``--cluster_fast``, CD-HIT-EST, MMseqs2
``easy-linclust``, Clover, Starcode), each under ``/usr/bin/time -v`` with a time limit,
score each tool's own output with ``dnaembed evaluate OUTPUT --format uc|clstr|mmseqs|
starcode|tsv --json`` (Clover's, which no library format reads, converted to
``read_id<TAB>cluster_id`` first; reads a tool dropped count as singletons) and print
one Markdown table per set. Results also go to
``bench-out/peers.json`` and ``bench-out/peers.md``; each run's files to
``bench-out/peers-runs/SET/TOOL-K/``.

    # once: install the peers (apt-get as root; Clover into bench-out/peers-venv)
    .venv/bin/python scripts/benchmark_peers.py --setup
    # everything (10,000 strands per simulated set, the full real set)
    nice -n 10 .venv/bin/python scripts/benchmark_peers.py
    # smaller, some sets and tools only
    .venv/bin/python scripts/benchmark_peers.py --strands 500 --sets nanopore,real \\
        --tools dnaembed,vsearch --timeout 120

Wall time is the tool's own run (reading its input, clustering, writing its output),
not converting or scoring; CPU time is its user + system time (all threads), which a
busy machine disturbs less. Peak memory is the maximum resident set size.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from benchlib import add_write_docs, finish
from peers.convert import complete, write_cluster_tsv
from peers.datasets import ALL_SETS, REAL_DESIGNS, DataSet, prepare
from peers.measure import has_gnu_time, run_measured
from peers.report import evaluate_cli_available, markdown_table, score
from peers.setup import install_peers
from peers.tools import DEFAULT_PEERS_VENV, TOOL_NAMES, Tool, all_tools

from dnaembed.errors import DnaembedError

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setup", action="store_true", help="Install the peers, then exit.")
    p.add_argument("--sets", default=",".join(ALL_SETS), help="Comma-separated data sets.")
    p.add_argument("--tools", default=",".join(TOOL_NAMES), help="Comma-separated tools to run.")
    p.add_argument("--strands", type=int, default=10000, help="Strands per simulated set.")
    p.add_argument(
        "--real-designs",
        type=int,
        help="Designs of the real set whose reads are kept (all 13,248 by default; with a "
        "smaller --strands, the same fraction of them).",
    )
    p.add_argument("--coverage", type=float, default=10.0, help="Mean reads per strand.")
    p.add_argument(
        "--reverse-fraction",
        type=float,
        default=0.0,
        help="Simulated reads returned as reverse complements (the real set has both).",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0, help="Seconds per tool run.")
    p.add_argument("--primary-only", action="store_true", help="Only each peer's primary setting.")
    p.add_argument("--out", type=Path, default=ROOT / "bench-out", help="Output directory.")
    p.add_argument("--peers-venv", type=Path, default=DEFAULT_PEERS_VENV)
    p.add_argument("--regenerate", action="store_true", help="Simulate the sets anew.")
    add_write_docs(p, "Against the peers")
    args = p.parse_args(argv)
    if args.real_designs is None:
        args.real_designs = min(REAL_DESIGNS, round(REAL_DESIGNS * args.strands / 10000))
    args.sets = [s for s in args.sets.split(",") if s]
    args.tools = [t for t in args.tools.split(",") if t]
    unknown = [t for t in args.tools if t not in TOOL_NAMES]
    if unknown:
        p.error(f"unknown tool(s) {', '.join(unknown)}: choose from {', '.join(TOOL_NAMES)}")
    return args


def machine() -> dict[str, object]:
    """Where the figures were measured."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": commit + ("+uncommitted changes" if dirty else ""),
        "bundled_model_sha256": bundled_model_digest(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "gnu_time": has_gnu_time(),
    }


def bundled_model_digest() -> str | None:
    """First 12 hex digits of the bundled model file's SHA-256 (which model dnaembed used)."""
    import hashlib

    try:
        from dnaembed.model.checkpoint import bundled_model_path

        return hashlib.sha256(bundled_model_path().read_bytes()).hexdigest()[:12]
    except (ImportError, OSError):
        return None


def run_one(tool: Tool, k: int, setting, ds: DataSet, args, use_cli: bool) -> dict:
    """Run one tool with one setting on one set; convert, score; a JSON-able record."""
    record: dict[str, object] = {
        "tool": tool.name,
        "settings": setting.label,
        "why": setting.why,
        "notes": [],
    }
    workdir = args.out / "peers-runs" / ds.name / f"{tool.name}-{k}"
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    if tool.input_kind != "fastq":
        ds.input_file(tool.input_kind)  # written before the clock starts
    cmd = tool.command(setting, ds, workdir)
    record["command"] = " ".join(cmd)
    print(f"  {tool.name}: {setting.label}", file=sys.stderr, flush=True)
    env = dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")
    m = run_measured(
        cmd, cwd=workdir, timeout_s=args.timeout, log_path=workdir / "log.txt", env=env
    )
    record.update(
        wall_s=round(m.wall_s, 2),
        cpu_s=None if m.cpu_s is None else round(m.cpu_s, 2),
        peak_rss_mib=None if m.peak_rss_mib is None else round(m.peak_rss_mib, 1),
        memory_source=m.memory_source,
        timeout_s=args.timeout,
        returncode=m.returncode,
    )
    if m.timed_out:
        record["status"] = "timeout"
        print(f"    timed out at {args.timeout:.0f} s", file=sys.stderr)
        return record
    if m.returncode != 0:
        record["status"] = "failed"
        record["log_tail"] = m.log_tail
        print(f"    failed (exit {m.returncode}):\n{m.log_tail}", file=sys.stderr)
        return record
    score_output(tool, setting, ds, workdir, record, use_cli)
    if record["status"] == "ok":
        s = record["scores"]
        print(
            f"    A_0.9 {s['A_0.9']:.3f}  ARI {s['ARI']:.3f}  {m.wall_s:.1f} s  "
            f"{m.peak_rss_mib or 0:.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
    return record


def score_output(tool: Tool, setting, ds: DataSet, workdir: Path, record: dict,
                 use_cli: bool) -> None:
    """Read a finished run's output and score it; fills ``record`` (status, scores, notes)."""
    ds.load()
    try:
        mapping = tool.parse(setting, ds, workdir)
        filled, dropped = complete(mapping, ds.ids)
    except (OSError, ValueError, SyntaxError, DnaembedError) as e:
        record["status"] = "failed"
        record["log_tail"] = f"could not read its output: {e}"
        print(f"    could not read its output: {e}", file=sys.stderr)
        return
    if dropped:
        record["notes"].append(f"{dropped:,} reads left out by the tool (scored as singletons)")
    record["dropped_reads"] = dropped
    clusters = workdir / "clusters.read_cluster.tsv"
    write_cluster_tsv(filled, clusters)
    record["clusters_tsv"] = str(clusters)
    # The tool's own output, read by `dnaembed evaluate --format` (Clover's: the TSV).
    fmt = tool.output_format
    scored = workdir / tool.output_file if fmt else clusters
    record["scored_file"] = str(scored)
    record["scores"] = score(scored, ds.truth, use_cli, fmt=fmt or "tsv",
                             reads=ds.reads if fmt == "starcode" else None)
    record["status"] = "ok"


def report_header(args, installed: dict[str, tuple[bool, str]], use_cli: bool) -> dict:
    """The JSON record's head: machine, options, tools; its sets are added as they run."""
    return {
        "machine": machine(),
        "options": {
            "sets": args.sets,
            "strands": args.strands,
            "real_designs": args.real_designs,
            "coverage": args.coverage,
            "reverse_fraction": args.reverse_fraction,
            "seed": args.seed,
            "timeout_s": args.timeout,
        },
        "tools": {n: {"available": ok, "version": v} for n, (ok, v) in installed.items()},
        "scored_by": "dnaembed evaluate --format FMT --json" if use_cli
        else "dnaembed.evaluate.clustering.evaluate_files",
        "sets": [],
    }


def run_tool(tool: Tool, installed: tuple[bool, str], ds: DataSet, args, use_cli: bool):
    """Each run record of ``tool`` on ``ds`` (one per setting), as it finishes."""
    ok, why = installed
    settings = tool.settings(ds)
    if args.primary_only:
        settings = settings[:1]
    if not ok:
        yield {"tool": tool.name, "settings": settings[0].label, "status": "not installed",
               "notes": [why]}
        return
    for k, setting in enumerate(settings):
        yield run_one(tool, k, setting, ds, args, use_cli)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.setup:
        for name, line in install_peers(args.peers_venv).items():
            print(f"{name}: {line}")
        return 0
    from dnaembed.log import configure

    configure(quiet=True)
    tools = [t for t in all_tools(args.peers_venv) if t.name in args.tools]
    installed: dict[str, tuple[bool, str]] = {t.name: t.available() for t in tools}
    for name, (ok, what) in installed.items():
        print(f"{name}: {what if ok else 'NOT AVAILABLE: ' + what}", file=sys.stderr)
    use_cli = evaluate_cli_available()
    print(
        "scoring with "
        + ("`dnaembed evaluate --format`" if use_cli else "dnaembed.evaluate.clustering"),
        file=sys.stderr,
    )
    report = report_header(args, installed, use_cli)
    json_path, md_path = args.out / "peers.json", args.out / "peers.md"
    tables: list[str] = []
    for name in args.sets:
        print(f"[{name}] preparing data", file=sys.stderr, flush=True)
        ds = prepare(
            name,
            args.out / "data",
            strands=args.real_designs if name == "real" else args.strands,
            coverage=args.coverage,
            reverse_fraction=args.reverse_fraction,
            seed=args.seed,
            regenerate=args.regenerate,
        )
        set_record = {
            "name": name,
            "description": ds.spec.description,
            "data": ds.summary(),
            "runs": [],
        }
        report["sets"].append(set_record)
        for tool in tools:
            for run in run_tool(tool, installed[tool.name], ds, args, use_cli):
                set_record["runs"].append(run)
                json_path.write_text(json.dumps(report, indent=1) + "\n")
        table = markdown_table(set_record)
        tables.append(table)
        print("\n" + table, flush=True)
        json_path.write_text(json.dumps(report, indent=1) + "\n")
        md_path.write_text("\n".join(tables))
    print(f"wrote {json_path} and {md_path}", file=sys.stderr)
    finish(args.write_docs, "How the peers are run and what the columns mean: "
           "[peers.md](peers.md).\n\n" + "\n\n".join(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
