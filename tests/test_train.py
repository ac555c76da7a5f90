import json
import re
from pathlib import Path

import pytest
import torch
from conftest import assert_clean_error, run_cli

from dnaembed.errors import DnaembedError, UsageError
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


def test_config_errors_name_where_the_value_came_from(tmp_path):
    # A config's `train = 5` was reported as "--label-workers 0: train is not a table",
    # `--set train.lr.x=1` as "config: train.lr: ...", `--set =1` as "unknown config
    # entries: " (no name).
    config = tmp_path / "five.toml"
    config.write_text("train = 5\n")
    out = ["-o", str(tmp_path / "run")]
    assert_clean_error(run_cli("train", "-c", str(config), *out, "--label-workers", "0"),
                       f"{config}: train is 5, not a table (so --label-workers 0 cannot set it)",
                       code=2)
    assert_clean_error(run_cli("train", *out, "--set", "train.lr.x=1"),
                       "--set train.lr.x=1: train.lr: expected a number", code=2)
    assert_clean_error(run_cli("train", *out, "--set", "=1"),
                       "--set '=1' must look like section.key=value", code=2)
    assert not (tmp_path / "run").exists()


def test_train_cli_and_bad_device(tmp_path):
    args = ["train", "-o", str(tmp_path / "run"), "--steps", "10", "-q"]
    args += [a for item in TINY + ["train.val_every=10"] for a in ("--set", item)]
    proc = run_cli(*args, check=True)
    assert "best val MAE" in proc.stdout.decode()
    assert_clean_error(run_cli(*args, "--device", "tpu"), "unknown device 'tpu'", code=2)
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


# Issue 15: a config value of the wrong type is refused when the config is loaded, in one
# line naming the file (or the override) and the key, with exit 2, before anything is written.
@pytest.mark.parametrize("value, expected", [
    ("2.5", "train.steps: expected an integer, got 2.5"),
    ('"five"', "train.steps: expected an integer, got 'five'"),
])
def test_config_value_of_the_wrong_type_is_a_usage_error(tmp_path, value, expected):
    config = tmp_path / "bad.toml"
    config.write_text(f"[train]\nsteps = {value}\n")
    out = tmp_path / "run"
    proc = run_cli("train", "-c", str(config), "-o", str(out))
    err = assert_clean_error(proc, f"{config}: {expected}", code=2)
    # One error line (a heartbeat line may precede it on a machine slow enough to take 30 s).
    errors = [line for line in err.splitlines() if line and "working (" not in line]
    assert len(errors) == 1, err
    assert not out.exists()


def test_override_of_the_wrong_type_names_the_override(tmp_path):
    out = tmp_path / "run"
    proc = run_cli("train", "-o", str(out), "--set", "train.steps=2.5")
    assert_clean_error(proc, "--set train.steps=2.5: train.steps: expected an integer, got 2.5",
                       code=2)
    proc = run_cli("train", "-o", str(out), "--set", "model.channels=[8,\"x\"]")
    assert_clean_error(proc, "model.channels: expected a list of integers, got [8, 'x']", code=2)
    assert not out.exists()


def test_out_of_range_value_names_its_sources(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[train]\nsteps = 10\nlr = 0.01\n")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(config))} with --set train.lr=-1: "
                                         r"train.lr must be > 0$"):
        load_config(config, ["train.lr=-1"])
    with pytest.raises(UsageError, match=r"^--set train=1: train: expected a table, got 1$"):
        load_config(None, ["train=1"])


#: A config small enough that a run of one step takes seconds (without the keys the tests
#: below set), so that a conflict the code misses shows as a run, not as a long wait.
ONE_STEP = ["model.window=64", "model.channels=[8,8,8]", "model.embedding_dim=16",
            "pairs.length_min=40", "pairs.length_max=64", "pairs.primer_length_min=8",
            "pairs.primer_length_max=12", "pairs.truncate_max=10", "train.steps=1",
            "train.val_every=1", "train.val_pairs=16", "train.warmup_steps=0",
            "train.prefetch=0"]


def test_an_option_and_a_set_of_one_value_are_refused(tmp_path):
    # --set train.batch_size=abc --batch-size 8 trained with 8: the option replaced the
    # override, and 'abc' was never checked.
    out = tmp_path / "run"
    args = ["train", "-o", str(out), "-q", *[a for item in ONE_STEP for a in ("--set", item)]]
    cases = [
        (["--set", "train.batch_size=abc", "--batch-size", "8"],
         "--set train.batch_size=abc and --batch-size 8 both set train.batch_size (give one)"),
        # A table holding the key, set whole.
        (["--set", "distributed={grad_accum=0}", "--grad-accum", "2"],
         "--set distributed={grad_accum=0} and --grad-accum 2 both set distributed.grad_accum"),
        # Wherever each stands: the option came last whatever the order.
        (["--steps", "3"], "--set train.steps=1 and --steps 3 both set train.steps"),
    ]
    for extra, message in cases:
        assert_clean_error(run_cli(*args, *extra, timeout=120), message, code=2)
    assert not out.exists()


def test_seed_zero_given_is_a_seed(tmp_path):
    # `--seed 0` counted as not given: a config's seed = 5 trained with seed 5.
    config = tmp_path / "c.toml"
    config.write_text("seed = 5\n")
    out = tmp_path / "run"
    args = ["train", "-c", str(config), "-o", str(out), "-q", "-t", "1",
            *[a for item in ONE_STEP for a in ("--set", item)]]
    assert_clean_error(run_cli(*args, "--set", "seed=3", "--seed", "0", timeout=120),
                       "--set seed=3 and --seed 0 both set seed (give one)", code=2)
    run_cli(*args, "--seed", "0", check=True, timeout=120)
    assert "seed = 0\n" in (out / "config.toml").read_text()


@pytest.fixture
def one_thread():
    """Torch on one thread for the test (the recipe tests' tiny steps gain nothing from two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _weights(path: Path) -> dict:
    return load_checkpoint(path).model.state_dict()


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _metrics(path: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock figures (the rest is a function of the run)."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return [{k: v for k, v in m.items()
             if not k.startswith(("time_", "comm_", "sampler_", "train_seqs")) and k != "seconds"}
            for m in lines]


def test_resumed_run_reproduces_an_uninterrupted_one(tmp_path, one_thread):
    # The batches are a function of (seed, stage, step): 8 steps straight and 4 + 4 resumed
    # (the second half drawn by a worker process) end with the same weights, bit for bit, on
    # CPU (same thread count, same arithmetic in the same order; nothing else is random).
    base = TINY + ["train.val_every=4", "train.val_pairs=200"]
    train(load_config(None, base + ["train.steps=8"]), tmp_path / "straight", device="cpu")
    train(load_config(None, base + ["train.steps=4"]), tmp_path / "halves", device="cpu")
    train(load_config(None, base + ["train.steps=8", "train.label_workers=1"]),
          tmp_path / "halves", device="cpu", resume=True)
    assert _same_weights(_weights(tmp_path / "straight" / "last.pt"),
                         _weights(tmp_path / "halves" / "last.pt"))
    straight = _metrics(tmp_path / "straight" / "metrics.jsonl")
    assert [m["step"] for m in straight] == [4, 8]
    assert straight == _metrics(tmp_path / "halves" / "metrics.jsonl")


#: configs/default.toml's recipe at toy size: the stages' steps, warm-up and validation
#: intervals scaled by --steps-scale, a tiny encoder and a small validation set.
TOY_RECIPE = ["model.channels=[8,8,8,8,8]", "model.window=128", "pairs.length_min=60",
              "pairs.length_max=100", "train.batch_size=32", "train.val_pairs=200"]


def test_default_recipe_runs_every_stage_end_to_end(tmp_path):
    out = tmp_path / "default"
    args = ["train", "-c", str(CONFIGS / "default.toml"), "-o", str(out), "-t", "1",
            "--steps-scale", "0.00025", *[a for s in TOY_RECIPE for a in ("--set", s)]]
    proc = run_cli(*args, check=True)
    assert "3 of 3 stages complete" in proc.stdout.decode()
    log = proc.stderr.decode()
    stages = [out / "1-two-ends", out / "2-two-ends-48k", out / "3-complement"]
    # 24,000 / 48,000 / 12,000 steps scaled by 0.00025; stage 2 continues stage 1's last.pt
    # (from its step 6, with its best so far), stage 3 starts from stage 2's best weights.
    assert [json.loads((d / "stage.json").read_text())["steps"] for d in stages] == [6, 12, 3]
    assert [m["step"] for m in _metrics(stages[1] / "metrics.jsonl")][0] == 7
    assert f"resuming from {stages[0] / 'last.pt'} at step 6" in log
    assert f"starting from the weights of {stages[1] / 'best.pt'}" in log
    assert f'init = "{stages[1] / "best.pt"}"' in (stages[2] / "config.toml").read_text()
    first = load_checkpoint(stages[0] / "best.pt").metrics["mae_near"]
    assert load_checkpoint(stages[1] / "best.pt").metrics["mae_near"] <= first
    # The final model is the last stage's best, with the complement view, and its card.
    model = load_checkpoint(out / "model.pt")
    assert model.model.config.views == 2 and model.model.config.embedding_dim == 512
    assert _same_weights(model.model.state_dict(), _weights(stages[2] / "best.pt"))
    card = json.loads((out / "model-card.json").read_text())
    assert [s["name"] for s in card["stages"]] == ["two-ends", "two-ends-48k", "complement"]
    assert [s["start"] for s in card["stages"]] == ["scratch", "resume", "init"]
    assert card["steps_scale"] == 0.00025 and card["data"]["pairs"]["group_size"] == 8
    assert card["metrics"] == model.metrics
    assert card["sha256"] in (out / "model-card.md").read_text()
    # Rerun with another plan (the last --steps-scale counts): refused.
    proc = run_cli(*args, "--steps-scale", "0.0005")
    assert_clean_error(proc, f"{out} holds a run of another recipe (stage 1 steps: 6 there, "
                             "12 here)", code=2)


def test_interrupted_recipe_resumes_at_the_right_stage_and_step(tmp_path, one_thread):
    # Scaled to 2 + (to step 4) + 1 steps. A budget of 0 s stops after one step, so the
    # first call stops in stage 1 at step 1 and the second completes stage 1 and stops in
    # stage 2 at step 3; the third continues stage 2 from its own last.pt, not stage 1's.
    from dnaembed.train.recipe import train_recipe
    from dnaembed.train.stages import load_recipe

    recipe = load_recipe(CONFIGS / "default.toml", TOY_RECIPE, steps_scale=1 / 12000)
    assert [s.steps for s in recipe.stages] == [2, 4, 1]
    assert train_recipe(recipe, tmp_path / "cut", device="cpu", max_seconds=0).complete is False
    second = train_recipe(recipe, tmp_path / "cut", device="cpu", max_seconds=0)
    assert not second.complete and [s["name"] for s in second.stages] == ["two-ends"]
    assert load_checkpoint(tmp_path / "cut" / "2-two-ends-48k" / "last.pt").training["step"] == 3
    assert train_recipe(recipe, tmp_path / "cut", device="cpu").complete
    train_recipe(recipe, tmp_path / "whole", device="cpu")
    for name in ("1-two-ends/last.pt", "2-two-ends-48k/last.pt", "model.pt"):
        assert _same_weights(_weights(tmp_path / "cut" / name), _weights(tmp_path / "whole" / name))
    assert [m["step"] for m in _metrics(tmp_path / "cut" / "2-two-ends-48k" / "metrics.jsonl")] == [
        3, 4]


def test_stage_errors_name_the_stage(tmp_path):
    from dnaembed.train.stages import load_recipe

    def recipe(text: str) -> Path:
        path = tmp_path / "r.toml"
        path.write_text("[train]\nsteps = 10\n" + text)
        return path

    cases = [
        ('[[stage]]\nname = "a"\nresume = true\n', "stage 'a': the first stage has no stage"),
        ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nresume = true\nsteps = 5\n',
         "stage 'b': steps 5 must exceed stage 'a''s 10"),
        ('[[stage]]\nname = "a"\n[[stage]]\nname = "b"\nresume = true\nsteps = 20\n'
         '[stage.model]\nembedding_dim = 64\n', "stage 'b': resume = true continues stage 'a'"),
        ('[[stage]]\nname = "a"\nsteps = 2.5\n', "stage 'a': train.steps: expected an integer"),
        ('[[stage]]\nname = "a"\ncolour = 1\n', "stage 'a': unknown stage settings: colour"),
        ('[[stage]]\nname = "a/b"\n', "stage 'a/b': a stage name must be unique"),
    ]
    for text, message in cases:
        with pytest.raises(UsageError, match=re.escape(message)):
            load_recipe(recipe(text))
    with pytest.raises(UsageError, match=r"--init x.pt: .* has stages, each with its own init$"):
        # No "(scale the steps with --steps-scale)": that hint is for --steps.
        load_recipe(recipe('[[stage]]\nname = "a"\n'), flags={"train.init": "x.pt"})
    with pytest.raises(UsageError, match=r"--steps 5: .* own steps \(scale the steps with"):
        load_recipe(recipe('[[stage]]\nname = "a"\n'), flags={"train.steps": 5})


def test_a_run_into_an_earlier_runs_directory_needs_resume(tmp_path):
    # Without --resume it replaced the checkpoints and appended its steps to the earlier
    # run's metrics.jsonl: two runs in one file.
    from conftest import train_tiny_model

    from dnaembed.errors import UsageError

    out = train_tiny_model(tmp_path / "run", steps=4, val_every=2)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(UsageError, match=r"holds a training run \(last.pt, best.pt, "
                       r"metrics.jsonl\): --resume to go on with it"):
        train_tiny_model(out, steps=4, val_every=2)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_resume_at_or_past_its_steps_is_refused(tmp_path):
    # It printed "best val MAE nan ... at step None" and rewrote config.toml with --steps 2.
    from conftest import tiny_config, train_tiny_model

    from dnaembed.errors import UsageError

    out = train_tiny_model(tmp_path / "run", steps=4, val_every=2)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for steps in (2, 4):
        config = tiny_config(steps, val_every=2)
        with pytest.raises(UsageError, match=rf"is at step 4, not below --steps {steps}: "
                           "nothing to train"):
            train(config, out, device="cpu", resume=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
