import json
from pathlib import Path

import pytest
import torch
from conftest import assert_clean_error, run_cli

from dnaembed.errors import DnaembedError
from dnaembed.model.checkpoint import load_checkpoint
from dnaembed.model.encoder import Encoder
from dnaembed.train.config import load_config
from dnaembed.train.loop import train

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
TINY = [
    "model.window=128", "model.channels=[16,16,16,16]", "model.embedding_dim=32",
    "pairs.length_min=80", "pairs.length_max=110", "train.batch_size=64",
    "train.val_pairs=400", "train.warmup_steps=20", "train.prefetch=0", "train.lr=0.003",
]


@pytest.mark.parametrize("precision, ends", [("float32", 1), ("bfloat16", 1), ("float32", 2)])
def test_short_training_run_lowers_validation_error(tmp_path, precision, ends):
    config = load_config(None, TINY + ["train.steps=240", "train.val_every=40",
                                       "train.loss=\"poisson\"",
                                       f"train.precision=\"{precision}\"",
                                       f"model.ends={ends}"])
    result = train(config, tmp_path, device="cpu")
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    first, best = lines[0]["mae_near"], min(x["mae_near"] for x in lines)
    assert best < 0.75 * first, (first, best)
    assert result.best["mae_near"] == best
    for name in ("best.pt", "last.pt", "config.toml", "validation.png"):
        assert (tmp_path / name).is_file()
    assert load_checkpoint(tmp_path / "best.pt").metrics["mae_near"] == best


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_configs_load_and_build(path):
    config = load_config(path)
    model = Encoder(config.model).eval()
    assert model(torch.full((2, config.model.window), 5, dtype=torch.uint8)).shape == (
        2, config.model.embedding_dim)


def test_resume_continues_from_last_step(tmp_path):
    config = load_config(None, TINY + ["train.steps=40", "train.val_every=20"])
    train(config, tmp_path, device="cpu")
    config = load_config(None, TINY + ["train.steps=60", "train.val_every=20"])
    result = train(config, tmp_path, device="cpu", resume=True)
    steps = [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [20, 40, 60]
    assert result.steps == 60


def test_config_errors_are_clear(tmp_path):
    with pytest.raises(DnaembedError, match=r"unknown \[model\] settings: colour"):
        load_config(None, ["model.colour=1"])
    with pytest.raises(DnaembedError, match="unknown train.precision 'float8'"):
        load_config(None, ['train.precision="float8"'])
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\nwindow=3")
    with pytest.raises(DnaembedError, match="not valid TOML"):
        load_config(bad)


def test_train_cli_and_bad_device(tmp_path):
    args = ["train", "-o", str(tmp_path / "run"), "--steps", "10", "-q"]
    args += [a for item in TINY + ["train.val_every=10"] for a in ("--set", item)]
    proc = run_cli(*args, check=True)
    assert "best val MAE" in proc.stdout.decode()
    assert_clean_error(run_cli(*args, "--device", "tpu"), "unknown device 'tpu'")
    assert_clean_error(run_cli("train", "--config", str(tmp_path / "nope.toml")),
                       "no such config file")


def test_cli_precision_choices_match_the_library():
    from dnaembed.cli.base import PRECISION_CHOICE
    from dnaembed.model.inference import PRECISIONS

    assert tuple(PRECISION_CHOICE.choices) == PRECISIONS


def test_init_starts_from_another_runs_weights(tmp_path):
    # A fine-tune from a trained run (here also adding the complement view, which has no
    # weights of its own) starts where that run ended, far below a fresh start.
    base = TINY + ["train.loss=\"poisson\"", "train.val_every=10"]
    train(load_config(None, base + ["train.steps=200"]), tmp_path / "a", device="cpu")
    trained = load_checkpoint(tmp_path / "a" / "best.pt").metrics["mae_near"]
    fine = base + ["train.steps=10", "model.views=2", "model.embedding_dim=64", "train.lr=1e-5"]
    tuned = train(load_config(None, fine + [f"train.init=\"{tmp_path / 'a' / 'best.pt'}\""]),
                  tmp_path / "b", device="cpu")
    fresh = train(load_config(None, fine), tmp_path / "c", device="cpu")
    assert tuned.best["mae_near"] < 1.2 * trained < fresh.best["mae_near"], (
        trained, tuned.best, fresh.best)


def test_init_from_a_different_architecture_is_refused(tmp_path):
    train(load_config(None, TINY + ["train.steps=5", "train.val_every=5"]), tmp_path / "a",
          device="cpu")
    other = load_config(None, TINY + ["train.steps=5", "model.channels=[8,8,8,8]",
                                      f"train.init=\"{tmp_path / 'a' / 'last.pt'}\""])
    with pytest.raises(DnaembedError, match="train.init: .*last.pt has other weights"):
        train(other, tmp_path / "b", device="cpu")
    assert not (tmp_path / "b").exists()
    args = ["train", "-o", str(tmp_path / "c"), "-q", "--init", "nope.pt"]
    assert_clean_error(run_cli(*args, *[a for item in TINY for a in ("--set", item)]),
                       "train.init: nope.pt: no such model file")
