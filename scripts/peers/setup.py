"""``--setup``: install the peers (as root on Debian 12; never run by the tests).

* vsearch, CD-HIT (cd-hit-est), MMseqs2 and GNU time: Debian packages, through
  ``apt-get update`` and ``apt-get install -y``.
* Clover: PyPI ``dna-clover`` in its own virtual environment (``bench-out/peers-venv``
  by default) so it cannot disturb the project's dependencies. Its package does not
  declare its one dependency, ``tqdm``, so that is installed beside it.
* Starcode: used if a ``starcode`` binary is on PATH. Debian 12 has no package and
  PyPI no source distribution of it, so the setup says so and leaves it out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

APT_PACKAGES = ["vsearch", "cd-hit", "mmseqs2", "time"]
CLOVER_PACKAGES = ["dna-clover==1.2", "tqdm"]


def _run(cmd: list[str], **kw) -> int:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, **kw).returncode


def install_peers(peers_venv: Path) -> dict[str, str]:
    """Install what can be installed; return a status line per peer."""
    status: dict[str, str] = {}
    missing = [
        p
        for p, exe in zip(APT_PACKAGES, ["vsearch", "cd-hit-est", "mmseqs", "/usr/bin/time"])
        if not shutil.which(exe)
    ]
    if missing:
        if shutil.which("apt-get") is None:
            status["apt"] = f"apt-get not found: install {' '.join(missing)} by hand"
        else:
            sudo = [] if os.geteuid() == 0 else ["sudo"]
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            rc = _run([*sudo, "apt-get", "update"], env=env)
            rc = rc or _run([*sudo, "apt-get", "install", "-y", *missing], env=env)
            status["apt"] = f"apt-get install {' '.join(missing)}: " + (
                "ok" if rc == 0 else f"failed (exit {rc})"
            )
    else:
        status["apt"] = "vsearch, cd-hit, mmseqs2, time: already installed"
    python = peers_venv / "bin" / "python"
    if not python.exists():
        peers_venv.parent.mkdir(parents=True, exist_ok=True)
        rc = _run([sys.executable, "-m", "venv", str(peers_venv)])
        if rc != 0:
            rc = _run(["python3", "-m", "venv", str(peers_venv)])
        if rc != 0:
            status["clover"] = f"could not create {peers_venv}"
            return status
    rc = _run([str(python), "-m", "pip", "install", "-q", *CLOVER_PACKAGES])
    status["clover"] = f"{' '.join(CLOVER_PACKAGES)} in {peers_venv}: " + (
        "ok" if rc == 0 else f"failed ({rc})"
    )
    if shutil.which("starcode"):
        status["starcode"] = f"found {shutil.which('starcode')}"
    else:
        status["starcode"] = (
            "not installed: no Debian 12 package and no PyPI source package; put a starcode "
            "binary on PATH to include it"
        )
    return status
