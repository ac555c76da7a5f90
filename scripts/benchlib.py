"""What every benchmark script shares: the real data set, the machine's description, the tables.

Each script prints its table and, with ``--write-docs [TITLE]`` (:func:`add_write_docs`,
:func:`finish`), puts it into ``docs/benchmarks.md`` under its own ``## TITLE``,
replacing that section if it is there. New sections go above the file's
``# Earlier measurements`` (the history, which the scripts never touch). A section's
head says once how the table was made: the command, the commit, the date and the CPU
(model, cores, and the vector-instruction flags that decide inference speed: avx2,
avx512*, amx*), plus any ISA emulation set in the environment (``ONEDNN_MAX_CPU_ISA``,
``ATEN_CPU_CAPABILITY``, ``FAISS_OPT_LEVEL``, ``OPENBLAS_CORETYPE``) and the kernels
OpenBLAS chose (numpy's and faiss's matrix products). Scripts that print their tables line by
line keep a :class:`Transcript` and write it as Markdown (:func:`as_markdown`).
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The real, labelled Illumina set (ldpc-exp7): reads, truth and designs.
REAL_SET = ROOT.parent / "shared" / "data" / "ldpc-exp7"
REAL_READS = REAL_SET / "reads.fastq.gz"
REAL_TRUTH = REAL_SET / "truth.tsv.gz"
REAL_REFS = REAL_SET / "refs.fasta.gz"
BENCHMARKS_MD = ROOT / "docs" / "benchmarks.md"
#: The heading above the history in docs/benchmarks.md: fresh sections go before it.
EARLIER = "# Earlier measurements"
#: Environment variables that make a CPU with AVX-512 run as one with AVX2 only. The first
#: three hold torch and faiss's own code; OpenBLAS, whose matrix products numpy and faiss
#: call (faiss's exact search is one), picks AVX-512 kernels unless ``OPENBLAS_CORETYPE``
#: says otherwise (``Haswell``: AVX2). On a Xeon with AVX-512 a faiss search of 46,000
#: vectors among 4,072 (64 dimensions, 17 neighbours, one thread) took 0.57 s with its
#: own choice (SkylakeX) against 0.69 s with Haswell's.
ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "FAISS_OPT_LEVEL",
                 "OPENBLAS_CORETYPE")
_FLAG = re.compile(r"^(avx2|avx512\w*|amx\w*)$")


def cpu_description() -> str:
    """CPU model, cores available, its avx2/avx512*/amx* flags and any ISA emulation."""
    model, flags = "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = {f for f in value.split() if _FLAG.match(f)}
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    shown = ", ".join(sorted(flags)) or "none of avx2/avx512/amx"
    missing = [name for name in ("avx512f", "amx_tile") if name not in flags]
    if missing:
        shown += " (no " + ", no ".join(m.split("_")[0].rstrip("f") for m in missing) + ")"
    emulated = [f"{v}={os.environ[v]}" for v in ISA_VARIABLES if os.environ.get(v)]
    text = f"{model}, {cores} cores, flags: {shown}"
    if emulated:
        text += "; emulated: " + " ".join(emulated)
    kernels = blas_kernels()
    return text + (f"; OpenBLAS kernels: {kernels}" if kernels else "")


def blas_kernels() -> str:
    """The kernels OpenBLAS chose for this CPU (numpy's library), or '' if unknown."""
    try:
        import numpy  # noqa: F401 - loads its OpenBLAS
        from threadpoolctl import threadpool_info
    except ImportError:
        return ""
    found = {info.get("architecture") for info in threadpool_info()
             if info.get("internal_api") == "openblas"}
    return ", ".join(sorted(a for a in found if a))


def gpu_suffix() -> str:
    """``; GPU: `` and the GPUs nvidia-smi lists (name, memory), or '' where there are none."""
    try:
        found = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total",
                                "--format=csv,noheader"], capture_output=True, text=True,
                               timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    gpus = [line.strip() for line in found.stdout.splitlines() if line.strip()]
    return f"; GPU: {'; '.join(gpus)}" if found.returncode == 0 and gpus else ""


def commit() -> str:
    """Short hash of HEAD, marked ``+changes`` when the tree has uncommitted edits; or
    ``BENCH_COMMIT`` where that is set (a copy of the tree on another machine, whose
    repository, if any, is not the one the tree came from)."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True,
                                  text=True).stdout.strip()
        except OSError:
            return ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "dnaembed", "scripts")
    return head + ("+changes" if dirty else "")


def command_line() -> str:
    """How this script was run, as a shell command from the repository root."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(ROOT):
        script = script.relative_to(ROOT)
    return "python " + " ".join(shlex.quote(a) for a in [str(script), *sys.argv[1:]])


def table_head(command: str | None = None) -> str:
    """The one line that heads a table: command, commit, date, CPU."""
    today = datetime.date.today().isoformat()
    return (f"`{command or command_line()}` · commit {commit()} · {today} · "
            f"{cpu_description()}{gpu_suffix()}")


def write_section(title: str, body: str, *, command: str | None = None,
                  path: Path = BENCHMARKS_MD) -> None:
    """Put ``body`` (Markdown) under ``## title`` in ``docs/benchmarks.md``, headed once.

    Only the part above ``# Earlier measurements`` is searched and extended, so a fresh
    section never replaces, nor lands among, the earlier ones.
    """
    section = f"## {title}\n\n{table_head(command)}\n\n{body.strip()}\n"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    split = re.search(rf"^{re.escape(EARLIER)}$", text, re.M)
    fresh, earlier = (text[: split.start()], text[split.start():]) if split else (text, "")
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^#{{1,2}} |\Z)", re.S | re.M)
    if pattern.search(fresh):
        fresh = pattern.sub(lambda _: section + "\n", fresh, count=1)
    else:
        fresh = fresh.rstrip("\n") + "\n\n" + section + "\n"
    text = fresh.rstrip("\n") + ("\n\n" + earlier if earlier else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text.rstrip("\n") + "\n")
    os.replace(tmp, path)


def add_write_docs(parser: argparse.ArgumentParser, title: str) -> None:
    """The ``--write-docs [TITLE]`` option every benchmark script has."""
    parser.add_argument(
        "--write-docs", nargs="?", const=title, metavar="TITLE",
        help=f"also write the table(s) into docs/benchmarks.md under '## TITLE' "
             f"(default: {title!r}); give each kind of run its own title")


def check_at_least(parser: argparse.ArgumentParser, args: argparse.Namespace,
                   minimums: dict[str, int]) -> None:
    """A usage error (exit 2) for the first option below its minimum; a list option's
    smallest value counts."""
    for name, least in minimums.items():
        value = getattr(args, name)
        smallest = min(value) if isinstance(value, list) else value
        if smallest < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}, not {smallest}")


def finish(title: str | None, body: str) -> None:
    """Print the CPU beside the figures; with a title (``--write-docs``), write the section."""
    print(f"\nCPU: {cpu_description()}{gpu_suffix()}", flush=True)
    if title:
        write_section(title, body)
        print(f"wrote '## {title}' in {BENCHMARKS_MD.relative_to(ROOT)}", file=sys.stderr)


class Transcript:
    """From construction on, everything printed to stdout is also kept (``text()``)."""

    def __init__(self) -> None:
        self._stdout, self._kept = sys.stdout, io.StringIO()
        sys.stdout = self

    def write(self, s: str) -> int:
        self._kept.write(s)
        return self._stdout.write(s)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding...
        return getattr(self._stdout, name)

    def text(self) -> str:
        """What was printed, as Markdown (see ``as_markdown``)."""
        return as_markdown(self._kept.getvalue())

    def restore(self) -> None:
        """Stop keeping: stdout is the real one again."""
        sys.stdout = self._stdout


_SEPARATOR = re.compile(r"^\|[-:| ]+\|$")


def as_markdown(printed: str) -> str:
    """A script's printout as Markdown: table lines kept together, each other line a
    paragraph; a table row printed after other lines gets its table's head again."""
    lines = [line.strip() for line in printed.splitlines()]
    blocks: list[str] = []
    table: list[str] = []
    head: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("|"):
            if i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
                blocks.append("\n".join(table))
                table, head = [], [line, lines[i + 1]]
            elif not table and head and not _SEPARATOR.match(line):
                table = list(head)
            table.append(line)
        else:
            blocks.append("\n".join(table))
            table = []
            blocks.append(line)
    blocks.append("\n".join(table))
    return "\n\n".join(b for b in blocks if b)
