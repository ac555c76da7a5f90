"""Run one command with a time limit; measure its wall time, CPU time and peak memory.

CPU time (user + system, the process and the descendants it waited for) comes from
``/usr/bin/time -v`` too: on a machine shared with other jobs it moves less than the
wall time does.

Peak memory is the maximum resident set size that GNU ``/usr/bin/time -v`` reports
(Debian package ``time``): the largest of the process and the descendants it waited
for. Without ``/usr/bin/time`` the fallback is ``resource.getrusage(RUSAGE_CHILDREN)``,
whose ``ru_maxrss`` is a high-water mark over *all* children so far: a lower bound
that is only exact for the largest run, so the report marks it.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

GNU_TIME = "/usr/bin/time"


@dataclass
class Measured:
    """What one run cost. ``timed_out``: killed at the limit (``wall_s`` is the limit)."""

    returncode: int | None
    wall_s: float
    peak_rss_mib: float | None
    timed_out: bool
    memory_source: str
    cpu_s: float | None = None
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


def has_gnu_time() -> bool:
    """True where ``/usr/bin/time -v`` works (GNU time, not a shell keyword)."""
    if not os.access(GNU_TIME, os.X_OK):
        return False
    try:
        proc = subprocess.run([GNU_TIME, "-v", "true"], capture_output=True, text=True)
    except OSError:
        return False
    return "Maximum resident set size" in proc.stderr


def parse_gnu_time(text: str) -> dict[str, float]:
    """Fields of ``/usr/bin/time -v`` output: ``max_rss_kb``, ``wall_s``, ``user_s``, ``sys_s``."""
    out: dict[str, float] = {}
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        out["max_rss_kb"] = float(m.group(1))
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    if m:
        seconds = 0.0
        for part in m.group(1).split(":"):
            seconds = seconds * 60 + float(part)
        out["wall_s"] = seconds
    for key, label in (("user_s", "User time (seconds)"), ("sys_s", "System time (seconds)")):
        m = re.search(re.escape(label) + r": ([\d.]+)", text)
        if m:
            out[key] = float(m.group(1))
    return out


def run_measured(
    cmd: list[str],
    *,
    cwd: str | Path,
    timeout_s: float,
    log_path: str | Path,
    env: dict[str, str] | None = None,
) -> Measured:
    """Run ``cmd`` in ``cwd``; stdout+stderr to ``log_path``; kill its process group at the limit.

    The command runs in a new session, so a tool's own worker processes are
    killed with it when it times out.
    """
    cwd = Path(cwd).resolve()
    log_path = Path(log_path).resolve()
    time_file = log_path.with_suffix(".time")
    gnu = has_gnu_time()
    full = [GNU_TIME, "-v", "-o", str(time_file), *cmd] if gnu else list(cmd)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    timed_out = False
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            full, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
    wall = time.perf_counter() - start
    peak: float | None = None
    cpu: float | None = None
    source = "none"
    if gnu and time_file.exists():
        fields = parse_gnu_time(time_file.read_text(errors="replace"))
        if "max_rss_kb" in fields:
            peak = fields["max_rss_kb"] / 1024
            source = "time -v"
        if "user_s" in fields and "sys_s" in fields:
            cpu = fields["user_s"] + fields["sys_s"]
    elif not gnu:
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if after > before:
            peak = after / 1024
            source = "getrusage"
    tail = _tail(log_path)
    return Measured(
        returncode=None if timed_out else proc.returncode,
        wall_s=timeout_s if timed_out else wall,
        peak_rss_mib=peak,
        timed_out=timed_out,
        memory_source=source,
        cpu_s=cpu,
        log_tail=tail,
    )


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the run's process group, SIGKILL after 5 s if it is still there."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    # Progress bars rewrite one line with carriage returns: keep the last state.
    rows = [row.rsplit("\r", 1)[-1] for row in text.splitlines()]
    kept = [row for row in rows if row.strip()]
    return "\n".join(kept[-lines:])[-2000:]
