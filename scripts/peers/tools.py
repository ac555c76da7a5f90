"""The clusterers compared, how each is called, and the settings a careful user would pick.

Settings follow each tool's documentation and the data set's error rate (``SetSpec.error``):

* vsearch ``--cluster_fast`` (greedy, centroids by decreasing length): ``--id`` is the
  identity a read needs to its centroid. Two reads of one strand at per-base error
  rate e differ by about 2e, so ``--id`` is 0.9 at Illumina rates (1.5% at most: reads
  99-97% identical), 0.8 at nanopore rates (~6%: reads ~88% identical, with a tail),
  0.7 at ~12% (reads ~76% identical). A second ``--id`` one step lower (higher for the
  real set, whose shared primers make unrelated reads ~70% identical) is run too, and
  both rows are shown. ``--strand both`` (reads may be reverse complements),
  ``--threads 2``, ``--iddef 2`` (vsearch's default: terminal gaps are not counted, so
  truncated reads can join).
* CD-HIT-EST: ``-c`` is identity over the shorter sequence; cd-hit-est refuses
  ``-c`` below 0.8, so 0.8 is used where the error rate calls for less. Word size by
  the user guide: ``-n 8`` for 0.90, ``-n 5`` for 0.80. ``-r 1`` (both strands),
  ``-T 2 -M 0`` (two threads, no memory cap), ``-d 0`` (whole ids in the ``.clstr``).
* MMseqs2 ``easy-linclust`` (linear-time k-mer grouping, then alignment to the group's
  centre): ``--min-seq-id`` as vsearch's ``--id``; ``-c 0.8 --cov-mode 1`` (80% of the
  member covered by the alignment: the documented choice that lets fragments join
  full-length sequences); ``--kmer-per-seq-scale 0.3`` (the documented setting for
  nucleotides); ``--threads 2``; at nanopore rates also ``-k 10 --kmer-per-seq 80``
  (shorter and more k-mers: with the default k-mer length almost no read of a strand
  shares a k-mer with its group's centre at 6-12% errors, and nearly every read stays
  a singleton; measured here). Linclust has no strand option; it matches reverse
  complements of nucleotide input by itself (checked on the real set: its clusters
  hold reads of both orientations).
* Clover (``python -m clover.main``; its ``clover`` console script runs nothing):
  ``-L`` the strand length (reads shorter than L-5 are skipped by design), ``-P 0`` (one
  process: its ``-P k`` splits the reads by their first k bases into 4^k processes,
  more than this machine's 2 cores), ``--no-tag -O`` to write the assignment. It keys
  its trees on read prefixes, suffixes and two middle windows and has no
  reverse-complement handling. A second run with ``-H 5`` (a looser tree match than
  the default 3) at nanopore rates.
* Starcode: ``-d`` 1.5 times the mean distance of two reads of one strand (2eL), at
  least 2 and at most 8 (its maximum); ``--sphere`` (sphere clustering: the default
  message passing needs count ratios, and in DNA-storage reads almost every sequence
  occurs once); ``-t 2``; ``--seq-id`` to get the members' line numbers.
* dnaembed: ``dnaembed cluster READS -o clusters.tsv`` with nothing else: the default
  ``graph`` method, the bundled model, both strands, the threshold chosen from the data.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from peers.convert import parse_clover
from peers.datasets import DataSet

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PEERS_VENV = ROOT / "bench-out" / "peers-venv"
THREADS = 2


@dataclass
class Setting:
    """One way of running a tool: the shown option string, its values, and why."""

    label: str
    values: dict[str, object] = field(default_factory=dict)
    why: str = ""


class Tool:
    """A clusterer: how to find it, its settings for a data set, its command and output.

    ``output_file`` in ``output_format`` (one of ``dnaembed evaluate --format``'s) is
    what the command leaves in its working directory; ``None``: a format only
    :meth:`parse` reads.
    """

    name = ""
    input_kind = "fasta"
    output_file = ""
    output_format: str | None = None

    def available(self) -> tuple[bool, str]:
        """(installed, version or the reason it is not)."""
        raise NotImplementedError

    def settings(self, ds: DataSet) -> list[Setting]:
        """The settings to run on ``ds`` (first: the primary one)."""
        raise NotImplementedError

    def command(self, setting: Setting, ds: DataSet, workdir: Path) -> list[str]:
        """The command line, run in ``workdir``."""
        raise NotImplementedError

    def parse(self, setting: Setting, ds: DataSet, workdir: Path) -> dict[str, str]:
        """Read id -> cluster, from the files the command left in ``workdir``."""
        from dnaembed.io.formats import read_assignments

        ds.load()
        return read_assignments(workdir / self.output_file, self.output_format, ds.ids)


def _version(cmd: list[str], marker: str = "") -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"? ({e})"
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        if line.strip() and marker in line:
            return line.strip()
    return "?"


# Identity thresholds per data set: (primary, second), see the module docstring.
IDENTITY = {
    "illumina": (0.9, 0.8),
    "illumina-array": (0.9, 0.8),
    "nanopore": (0.8, 0.7),
    "nanopore-hard": (0.7, 0.6),
    "nanopore-110": (0.8, 0.7),
    "real": (0.8, 0.9),
}


def identities(ds: DataSet) -> tuple[float, float]:
    """The primary and second identity threshold for ``ds`` (by its error rate if unnamed)."""
    if ds.name in IDENTITY:
        return IDENTITY[ds.name]
    e = ds.spec.error
    return (0.9, 0.8) if e <= 0.02 else (0.8, 0.7) if e <= 0.08 else (0.7, 0.6)


class Vsearch(Tool):
    name = "vsearch"
    output_file = "out.uc"
    output_format = "uc"

    def available(self) -> tuple[bool, str]:
        if not shutil.which("vsearch"):
            return False, "no vsearch on PATH (apt-get install vsearch)"
        return True, _version(["vsearch", "--version"], "vsearch v")

    def settings(self, ds: DataSet) -> list[Setting]:
        return [
            Setting(
                f"--cluster_fast --id {x:g} --strand both --threads {THREADS}",
                {"id": x},
                "primary" if k == 0 else "second id",
            )
            for k, x in enumerate(identities(ds))
        ]

    def command(self, setting: Setting, ds: DataSet, workdir: Path) -> list[str]:
        return [
            "vsearch", "--cluster_fast", str(ds.input_file("fasta")),
            "--id", f"{setting.values['id']:g}", "--strand", "both",
            "--threads", str(THREADS), "--uc", "out.uc",
        ]  # fmt: skip



# cd-hit-est word size for an identity threshold (cd-hit user's guide).
def cdhit_word(c: float) -> int:
    """``-n`` for ``-c``: 10 at >= 0.95, 8 at >= 0.90, 7 at >= 0.88, 6 at >= 0.85, else 5."""
    for limit, n in ((0.95, 10), (0.90, 8), (0.88, 7), (0.85, 6)):
        if c >= limit - 1e-9:
            return n
    return 5


class CdHitEst(Tool):
    name = "cd-hit-est"
    output_file = "out.clstr"
    output_format = "clstr"

    def available(self) -> tuple[bool, str]:
        if not shutil.which("cd-hit-est"):
            return False, "no cd-hit-est on PATH (apt-get install cd-hit)"
        return True, _version(["cd-hit-est", "-h"], "CD-HIT version").strip("= ")

    def settings(self, ds: DataSet) -> list[Setting]:
        wanted = [max(0.8, x) for x in identities(ds)]
        out = []
        for k, c in enumerate(dict.fromkeys(wanted)):  # 0.8 twice -> once
            n = cdhit_word(c)
            why = "primary" if k == 0 else "second threshold"
            if c > min(identities(ds)) and c == 0.8:
                why += "; cd-hit-est refuses -c < 0.8"
            out.append(
                Setting(f"-c {c:g} -n {n} -r 1 -T {THREADS} -M 0 -d 0", {"c": c, "n": n}, why)
            )
        return out

    def command(self, setting: Setting, ds: DataSet, workdir: Path) -> list[str]:
        return [
            "cd-hit-est", "-i", str(ds.input_file("fasta")), "-o", "out",
            "-c", f"{setting.values['c']:g}", "-n", str(setting.values["n"]),
            "-r", "1", "-T", str(THREADS), "-M", "0", "-d", "0",
        ]  # fmt: skip



class MMseqs(Tool):
    name = "mmseqs2"
    output_file = "out_cluster.tsv"
    output_format = "mmseqs"

    def available(self) -> tuple[bool, str]:
        if not shutil.which("mmseqs"):
            return False, "no mmseqs on PATH (apt-get install mmseqs2)"
        return True, "MMseqs2 " + _version(["mmseqs", "version"])

    @staticmethod
    def sensitivity(ds: DataSet) -> list[str]:
        """Shorter, more numerous k-mers at nanopore rates (default k finds almost nothing)."""
        return ["-k", "10", "--kmer-per-seq", "80"] if ds.spec.error > 0.03 else []

    def settings(self, ds: DataSet) -> list[Setting]:
        extra = " ".join(self.sensitivity(ds))
        return [
            Setting(
                f"easy-linclust --min-seq-id {x:g} -c 0.8 --cov-mode 1 "
                f"--kmer-per-seq-scale 0.3 {extra + ' ' if extra else ''}--threads {THREADS}",
                {"id": x},
                "primary" if k == 0 else "second id",
            )
            for k, x in enumerate(identities(ds))
        ]

    def command(self, setting: Setting, ds: DataSet, workdir: Path) -> list[str]:
        return [
            "mmseqs", "easy-linclust", str(ds.input_file("fasta")), "out", "tmp",
            "--min-seq-id", f"{setting.values['id']:g}", "-c", "0.8", "--cov-mode", "1",
            "--kmer-per-seq-scale", "0.3", *self.sensitivity(ds), "--threads", str(THREADS),
        ]  # fmt: skip



class Clover(Tool):
    name = "clover"
    input_kind = "clover"

    def __init__(self, venv: Path = DEFAULT_PEERS_VENV) -> None:
        self.python = Path(venv) / "bin" / "python"

    def available(self) -> tuple[bool, str]:
        if not self.python.exists():
            return False, f"no Clover venv at {self.python.parent.parent} (run --setup)"
        proc = subprocess.run(
            [str(self.python), "-c", "import clover.main, tqdm; "
             "from importlib.metadata import version; print(version('dna-clover'))"],
            capture_output=True, text=True, input="",
        )  # fmt: skip
        if proc.returncode != 0:
            return False, "dna-clover (or tqdm) not importable in its venv (run --setup)"
        return True, f"dna-clover {proc.stdout.strip()}"

    def settings(self, ds: DataSet) -> list[Setting]:
        base = f"-L {ds.spec.length} -P 0"
        out = [Setting(base, {"H": None}, "primary: strand length, defaults otherwise")]
        if ds.spec.error > 0.03:
            out.append(Setting(base + " -H 5", {"H": 5}, "looser tree match at nanopore rates"))
        return out

    def command(self, setting: Setting, ds: DataSet, workdir: Path) -> list[str]:
        cmd = [
            str(self.python), "-m", "clover.main", "-I", str(ds.input_file("clover")),
            "-L", str(ds.spec.length), "-P", "0", "-O", "out", "--no-tag",
        ]  # fmt: skip
        if setting.values.get("H") is not None:
            cmd += ["-H", str(setting.values["H"])]
        return cmd

    def parse(self, setting: Setting, ds: DataSet, workdir: Path) -> dict[str, str]:
        ds.load()
        return parse_clover((workdir / "out.txt").read_text(), ds.ids)


class Starcode(Tool):
    name = "starcode"
    output_file = "out.txt"
    output_format = "starcode"
    input_kind = "lines"

    def available(self) -> tuple[bool, str]:
        if not shutil.which("starcode"):
            return False, "no starcode binary on PATH (not packaged in Debian 12 nor on PyPI)"
        return True, _version(["starcode", "--version"]) or "starcode"

    def settings(self, ds: DataSet) -> list[Setting]:
        d = min(8, max(2, math.ceil(1.5 * 2 * ds.spec.error * ds.spec.length)))
        return [Setting(f"-d {d} --sphere -t {THREADS} --seq-id", {"d": d}, "primary")]

    def command(self, setting: Setting, ds: DataSet, workdir: Path) -> list[str]:
        return [
            "starcode", "-i", str(ds.input_file("lines")), "-o", "out.txt",
            "-d", str(setting.values["d"]), "--sphere", "-t", str(THREADS), "--seq-id",
        ]  # fmt: skip



class Dnaembed(Tool):
    """``dnaembed cluster`` with its defaults (the project's own CLI, this checkout).

    Until the command exists, the same chain through the library
    (``scripts/peers/dnaembed_lib.py``), marked as such in the settings column.
    """

    name = "dnaembed"
    output_file = "clusters.tsv"
    output_format = "tsv"
    input_kind = "fastq"

    def __init__(self) -> None:
        self.cli = False

    def available(self) -> tuple[bool, str]:
        proc = subprocess.run(
            [sys.executable, "-m", "dnaembed", "cluster", "--help"],
            capture_output=True, text=True, env=_quiet_env(),
        )  # fmt: skip
        version = subprocess.run(
            [sys.executable, "-m", "dnaembed", "--version"], capture_output=True, text=True
        ).stdout.strip()
        self.cli = proc.returncode == 0
        if self.cli:
            return True, version or "dnaembed"
        lib = subprocess.run(
            [sys.executable, "-c", "import dnaembed.pipeline as p; p.cluster_reads; "
             "from dnaembed.model.checkpoint import load_model; load_model(None)"],
            capture_output=True, text=True, env=_quiet_env(),
        )  # fmt: skip
        if lib.returncode != 0:
            return False, "neither `dnaembed cluster` nor dnaembed.pipeline.cluster_reads works"
        return True, f"{version} (library stand-in: `dnaembed cluster` not available yet)"

    def settings(self, ds: DataSet) -> list[Setting]:
        label = "cluster (defaults: graph, bundled model, --strand both)"
        if not self.cli:
            label = "pipeline.cluster_reads (defaults; CLI not available yet)"
        return [Setting(label, {}, "default")]

    def command(self, setting: Setting, ds: DataSet, workdir: Path) -> list[str]:
        if not self.cli:
            script = Path(__file__).with_name("dnaembed_lib.py")
            return [sys.executable, str(script), str(ds.reads), "clusters.tsv"]
        return [sys.executable, "-m", "dnaembed", "cluster", str(ds.reads), "-o", "clusters.tsv"]



def _quiet_env() -> dict[str, str]:
    return dict(os.environ, DNAEMBED_NO_PROGRESS="1", PYTHONWARNINGS="ignore")


def all_tools(peers_venv: Path = DEFAULT_PEERS_VENV) -> list[Tool]:
    """dnaembed first, then the peers."""
    return [Dnaembed(), Vsearch(), CdHitEst(), MMseqs(), Clover(peers_venv), Starcode()]


TOOL_NAMES = [t.name for t in all_tools()]
