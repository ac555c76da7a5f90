"""Model files: weights and JSON-able data, loaded without running code.

A checkpoint is a plain dict of tensors and JSON-able data (the encoder's
config, training metrics, dnaembed version), loaded with
``torch.load(weights_only=True)`` (a model file cannot run code) and checked
against a SHA-256 of its weights (a tampered file is refused). The bundled
model ships in ``dnaembed/model/bundled/``."""

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


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Checkpoint:
    """Load a checkpoint without running code from it; refuse foreign or tampered files."""
    name = str(path)
    p = Path(path)
    if not p.is_file():
        raise DnaembedError(f"{name}: no such model file")
    try:
        payload = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means "not our file"
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
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


def bundled_model_path() -> Path:
    """Path of the default model shipped inside the package."""
    return Path(str(resources.files("dnaembed.model") / "bundled" / "default.pt"))


def load_model(path: str | Path | None = None, device: str | torch.device = "cpu") -> Checkpoint:
    """Load ``path``, or the bundled default model when ``path`` is None."""
    if path is None:
        path = bundled_model_path()
        if not path.is_file():
            raise DnaembedError(
                f"the bundled model is missing from the installation ({path}); "
                "reinstall dnaembed or pass -m/--model"
            )
    return load_checkpoint(path, device)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DnaembedError("--device cuda requested but no CUDA device is available")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise DnaembedError(f"unknown device {device!r} (use auto, cpu or cuda)")
    return torch.device(device)
