"""Model files: weights and JSON-able data, loaded without running code.

A checkpoint is a plain dict of tensors and JSON-able data (the encoder's
config, training metrics, dnaembed version), loaded with
``torch.load(weights_only=True)`` (a model file cannot run code) and checked
against a SHA-256 of its weights (a tampered file is refused). The bundled
models ship in ``dnaembed/model/bundled/``: the full model (``embed``) and the
candidate encoder of the neighbour search (``cluster``, ``run``;
:func:`load_search_model`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from dnaembed import __version__
from dnaembed.errors import DnaembedError
from dnaembed.model.encoder import Encoder, EncoderConfig

CHECKPOINT_FORMAT = "dnaembed-encoder"


CHECKPOINT_VERSION = 1


def weights_digest(state_dict: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the weights (names, shapes, dtypes, bytes) in a fixed order."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().cpu().contiguous()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(str(t.dtype).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def save_checkpoint(
    path: str | Path,
    model: Encoder,
    *,
    metrics: dict | None = None,
    training: dict | None = None,
    extra_state: dict | None = None,
) -> None:
    """Save weights + config + metrics + training settings, atomically.

    ``extra_state`` (optimizer, step, RNG) is for ``--resume``; it must itself
    be plain tensors and containers.
    """
    from dnaembed.io.atomic import atomic_path

    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    payload = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "dnaembed_version": __version__,
        "config": json.dumps(model.config.to_dict()),
        "metrics": json.dumps(metrics or {}),
        "training": json.dumps(training or {}),
        "state_dict": state,
        "sha256": weights_digest(state),
    }
    if extra_state is not None:
        payload["extra_state"] = extra_state
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode) and its recorded metadata."""

    model: Encoder
    metrics: dict
    training: dict
    path: str
    extra_state: dict | None = None


def _looks_like_torch_file(path: Path) -> bool:
    """Whether ``path`` begins as torch.save writes: a zip archive, or (before torch 1.6)
    a pickle. Anything else (reads, text) got the safe loader's error about pickles."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as e:
        raise DnaembedError(f"{path}: cannot read: {e.strerror or e}") from None
    return head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Checkpoint:
    """Load a checkpoint without running code from it; refuse foreign or tampered files."""
    name = str(path)
    p = Path(path)
    if p.is_dir():
        # A training run's directory was "no such model file", which it is not.
        best = p / "best.pt"
        hint = f": give its model, {best}" if best.is_file() else ""
        raise DnaembedError(f"{name}: a directory, not a model file{hint}")
    if not p.is_file():
        raise DnaembedError(f"{name}: no such model file")
    if not _looks_like_torch_file(p):
        raise DnaembedError(f"{name}: not a loadable dnaembed model: not a PyTorch checkpoint "
                            "(a model is the .pt file that dnaembed train writes, or a bundled "
                            "model's name)")
    try:
        payload = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means "not our file"
        # Its first sentence: torch's own goes on about its defaults across versions.
        reason = str(e).splitlines()[0].split(". ")[0] if str(e) else type(e).__name__
        raise DnaembedError(
            f"{name}: not a loadable dnaembed model (refused by the safe loader: {reason[:200]})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise DnaembedError(f"{name}: not a dnaembed model file")
    if payload.get("format_version") != CHECKPOINT_VERSION:
        raise DnaembedError(
            f"{name}: model file format version {payload.get('format_version')} is not "
            f"supported (this dnaembed reads version {CHECKPOINT_VERSION})"
        )
    state = payload.get("state_dict")
    if not isinstance(state, dict) or payload.get("sha256") != weights_digest(state):
        raise DnaembedError(f"{name}: model weights do not match their checksum (file modified?)")
    try:
        config = EncoderConfig.from_dict(json.loads(payload["config"]))
        model = Encoder(config)
        model.load_state_dict(state)
        metrics = json.loads(payload.get("metrics", "{}"))
        training = json.loads(payload.get("training", "{}"))
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise DnaembedError(f"{name}: inconsistent model file: {str(e).splitlines()[0]}") from None
    model.eval().to(device)
    return Checkpoint(model, metrics, training, name, payload.get("extra_state"))


#: The models shipped in ``dnaembed/model/bundled/``, by the name that selects them.
#: ``default``: the full, accurate encoder (``dnaembed embed``; configs/default.toml).
#: ``candidates``: the cheap encoder of the neighbour search, ~15x fewer operations
#: per read (configs/candidates.toml, docs/candidates-model.md).
BUNDLED_MODELS = {"default": "default.pt", "candidates": "candidates.pt"}
FULL_MODEL = "default"
CANDIDATE_MODEL = "candidates"
#: Clustering methods that decide on the vectors themselves (distances in edits), so
#: that the accuracy of the vectors matters; the graph method only takes candidates
#: from them and checks every one exactly.
VECTOR_METHODS = ("kmeans", "dbscan")


def bundled_model_path(name: str = FULL_MODEL) -> Path:
    """Path of a model shipped inside the package (default: the full model)."""
    if name not in BUNDLED_MODELS:
        known = ", ".join(BUNDLED_MODELS)
        raise DnaembedError(f"unknown bundled model {name!r} (known: {known})")
    return Path(str(resources.files("dnaembed.model") / "bundled" / BUNDLED_MODELS[name]))


def load_model(path: str | Path | None = None, device: str | torch.device = "cpu") -> Checkpoint:
    """Load ``path``, a bundled model by name (:data:`BUNDLED_MODELS`), or the bundled
    full model when ``path`` is None."""
    name = FULL_MODEL if path is None else str(path)
    if name in BUNDLED_MODELS:
        path = bundled_model_path(name)
        if not path.is_file():
            raise DnaembedError(
                f"the bundled model {name} is missing from the installation ({path}); "
                "reinstall dnaembed or pass -m/--model"
            )
    return load_checkpoint(path, device)


def search_model_name(spec: str | Path | None, method: str = "graph") -> str:
    """What :func:`load_search_model` loads: ``spec`` itself, else the bundled default."""
    if spec is not None:
        return str(spec)
    return FULL_MODEL if method in VECTOR_METHODS else CANDIDATE_MODEL


def load_search_model(
    spec: str | Path | None, method: str = "graph", device: str | torch.device = "cpu"
) -> Checkpoint:
    """The encoder of ``dnaembed cluster`` and ``run``: ``spec`` (a path or a bundled
    model's name), else the candidate encoder for the graph method, whose exact check
    decides, and the full model for kmeans and dbscan, which decide on the vectors."""
    return load_model(search_model_name(spec, method), device)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DnaembedError(f"--device {device} requested but no CUDA device is available")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise DnaembedError(f"unknown device {device!r} (use auto, cpu or cuda)")
    return torch.device(device)
