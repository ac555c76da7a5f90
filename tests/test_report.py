"""The JSON summary (`--json FILE`) and the plots (`--plot DIR`, `dnaembed report`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import assert_clean_error, run_cli, train_tiny_model

from dnaembed.model.checkpoint import load_search_model, weights_digest
from dnaembed.report.plots import (
    cluster_sizes_figure,
    consensus_support_figure,
    distance_histogram_figure,
    read_metrics,
    training_figure,
)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """A simulated set, `run` on it with --json and --plot, and a short real training run."""
    d = tmp_path_factory.mktemp("report")
    run_cli("simulate", "-o", str(d / "s"), "--strands", "30", "--length", "110", "--preset",
            "illumina-array", "--reverse-fraction", "0.5", "--seed", "2", "-q", check=True)
    run_cli("run", str(d / "s.fastq.gz"), "-o", str(d / "out"), "--json",
            str(d / "out" / "summary.json"), "--plot", str(d / "plots"), "--truth",
            str(d / "s.truth.tsv"), "--seed", "3", "-q", check=True)
    train_tiny_model(d / "train", steps=12, val_every=4)
    return d


def test_run_summary_holds_threshold_counts_times_model_versions_seed(done):
    summary = json.loads((done / "out" / "summary.json").read_text())
    assert summary["command"] == "run" and summary["seed"] == 3
    threshold = summary["threshold"]
    assert threshold["source"] == "data"
    assert threshold["same_peak"] < threshold["max_dist"] < threshold["unrelated_peak"]
    assert sum(threshold["histogram"]) == threshold["pairs"] > 0
    counts = summary["counts"]
    assert counts["reads"] == sum(
        s * n for s, n in zip(summary["cluster_sizes"]["size"],
                              summary["cluster_sizes"]["clusters"]))
    assert counts["clusters"] == sum(summary["cluster_sizes"]["clusters"]) == 30
    assert counts["strands"] == summary["consensus"]["strands"] == 30
    assert counts["singletons"] == 0
    assert {"model", "read", "embed", "consensus", "write"} <= set(summary["timings"])
    model = load_search_model(None, "graph")  # what run searches with
    assert summary["model"]["sha256"] == weights_digest(model.model.state_dict())
    assert {"dnaembed", "python", "numpy", "torch"} <= set(summary["versions"])
    assert summary["scores"]["clustering"]["A_0.9"] >= 0.95
    assert sum(summary["consensus"]["confidence"]["strands"]) == 30


def test_plot_pngs_are_written_and_have_the_expected_axes(done):
    summary = json.loads((done / "out" / "summary.json").read_text())
    names = sorted(p.name for p in (done / "plots").iterdir())
    assert names == ["cluster-sizes.png", "consensus-support.png", "distances.png"]
    from matplotlib.image import imread

    for name in names:
        data = (done / "plots" / name).read_bytes()
        assert data.startswith(PNG)
        assert imread(done / "plots" / name).shape[0] > 100
    fig = distance_histogram_figure(summary["threshold"])
    (ax,) = fig.axes
    assert ax.get_xlabel().startswith("edit distance") and ax.get_ylabel() == "pairs"
    marked = {round(line.get_xdata()[0]) for line in ax.lines}
    t = summary["threshold"]
    assert marked == {t["max_dist"], t["same_peak"], t["unrelated_peak"]}
    assert sum(p.get_height() for p in ax.patches) == t["pairs"]
    (ax,) = cluster_sizes_figure(summary["cluster_sizes"]).axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("reads per cluster", "clusters")
    left, right = consensus_support_figure(summary["consensus"]).axes
    assert left.get_xlabel().startswith("reads that voted") and left.get_ylabel() == "strands"
    assert right.get_xlabel().startswith("confidence")
    assert sum(p.get_height() for p in left.patches) == 30


def test_report_draws_a_summary_and_training_curves(done, tmp_path):
    out = tmp_path / "plots"
    run_cli("report", str(done / "out" / "summary.json"), str(done / "train"), "-o", str(out),
            "-q", check=True)
    assert sorted(p.name for p in (out / "summary").iterdir()) == [
        "cluster-sizes.png", "consensus-support.png", "distances.png"]
    assert (out / "train" / "training.png").read_bytes().startswith(PNG)
    rows = read_metrics(done / "train")
    assert [r["step"] for r in rows] == [4, 8, 12]
    left, right = training_figure(rows).axes
    assert left.get_xlabel() == right.get_xlabel() == "step"
    assert left.get_ylabel().startswith("training loss")
    assert right.get_ylabel().startswith("validation error")
    assert list(left.lines[0].get_xdata()) == [4, 8, 12]
    assert {line.get_label() for line in right.lines} >= {"MAE, all pairs", "MAE, near pairs"}
    assert_clean_error(run_cli("report", str(tmp_path), "-o", str(tmp_path / "x")),
                       "metrics.jsonl: no such file")


def test_sources_of_one_name_get_a_directory_each(done, tmp_path):
    # r1/summary.json and r2/summary.json both went to OUT/summary: the first one's plots lost.
    import shutil

    for run in ("r1", "r2"):
        (tmp_path / run).mkdir()
        shutil.copy(done / "out" / "summary.json", tmp_path / run / "summary.json")
    out = tmp_path / "plots"
    run_cli("report", str(tmp_path / "r1" / "summary.json"), str(tmp_path / "r2" / "summary.json"),
            "-o", str(out), "-q", check=True)
    assert sorted(p.name for p in out.iterdir()) == ["summary-1", "summary-2"]
    for name in ("summary-1", "summary-2"):
        assert (out / name / "distances.png").read_bytes().startswith(PNG)
    # Two names: each directory had its plots made, but only the last one's were kept
    # (the plots were known by their file name alone).
    shutil.copy(done / "out" / "summary.json", tmp_path / "a.json")
    shutil.copy(done / "out" / "summary.json", tmp_path / "b.json")
    run_cli("report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o",
            str(tmp_path / "two"), "-q", check=True)
    for name in ("a", "b"):
        assert (tmp_path / "two" / name / "distances.png").read_bytes().startswith(PNG)


def test_cluster_and_consensus_summaries(done, tmp_path):
    reads = str(done / "s.fastq.gz")
    proc = run_cli("cluster", reads, "-o", str(tmp_path / "c.tsv"), "--json", "-q",
                   "--seed", "4", check=True)
    summary = json.loads(proc.stdout)
    assert summary["command"] == "cluster" and summary["parameters"]["seed"] == 4
    assert summary["counts"]["clusters"] == 30 and summary["threshold"]["histogram"]
    proc = run_cli("consensus", reads, str(tmp_path / "c.tsv"), "-o", str(tmp_path / "s.fa"),
                   "--json", str(tmp_path / "k.json"), "--plot", str(tmp_path / "p"), check=True)
    summary = json.loads((tmp_path / "k.json").read_text())
    assert summary["counts"]["strands"] == summary["counts"]["clusters"] == 30
    assert "consensus" in summary["timings"]
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "cluster-sizes.png", "consensus-support.png"]


def test_missing_matplotlib_is_one_clear_line_before_the_work(done, tmp_path):
    args = ["cluster", str(done / "s.fastq.gz"), "-o", str(tmp_path / "c.tsv"), "--plot",
            str(tmp_path / "p")]
    # As if matplotlib were not installed: its import fails.
    code = ("import sys; sys.modules['matplotlib'] = None; from dnaembed.cli import main; "
            f"main({args!r})")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    err = assert_clean_error(proc, "matplotlib", "pip install 'dnaembed[plot]'")
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


STAGES = ("1-two-ends", "2-two-ends-48k", "3-complement")


def _staged_run(done, where, stages=STAGES):
    """A staged run's directory as `train -c configs/default.toml` leaves it: recipe.json,
    model.pt and one directory per stage with its metrics.jsonl (a real run's rows, the
    steps of each stage after the one before's), no metrics.jsonl of its own."""
    where.mkdir()
    rows = (done / "train" / "metrics.jsonl").read_text().splitlines()
    for k, name in enumerate(stages):
        (where / name).mkdir()
        shifted = [json.dumps({**json.loads(r), "step": json.loads(r)["step"] + 12 * k})
                   for r in rows]
        (where / name / "metrics.jsonl").write_text("\n".join(shifted) + "\n")
        (where / name / "stage.json").write_text("{}\n")
    plan = [{"name": n.split("-", 1)[1]} for n in stages]
    (where / "recipe.json").write_text(json.dumps({"stages": plan}) + "\n")
    (where / "model.pt").write_bytes(b"not read")
    return where


def test_report_of_a_staged_run_draws_each_stage_into_a_directory_of_its_name(done, tmp_path):
    # A staged run has no metrics.jsonl at its top: report failed on it ("no such file").
    run = _staged_run(done, tmp_path / "default")
    out = tmp_path / "plots"
    proc = run_cli("report", str(run), "-o", str(out), check=True)
    assert sorted(p.name for p in out.iterdir()) == list(STAGES)
    err = proc.stderr.decode()
    assert "a staged training run, 3 of 3 stages drawn: " + ", ".join(STAGES) in err
    logged = [line.split("plot: ", 1)[1] for line in err.splitlines() if "plot: " in line]
    assert logged == [str(out / name / "training.png") for name in STAGES]
    for name in STAGES:
        assert [p.name for p in (out / name).iterdir()] == ["training.png"]
        # The stage's own directory, a single run, draws the same bytes straight into -o.
        single = tmp_path / f"single-{name}"
        run_cli("report", str(run / name), "-o", str(single), "-q", check=True)
        assert [p.name for p in single.iterdir()] == ["training.png"]
        assert (out / name / "training.png").read_bytes() == (
            single / "training.png").read_bytes()
    # Beside a summary: the run's stages under the run's name.
    run_cli("report", str(done / "out" / "summary.json"), str(run), "-o", str(tmp_path / "two"),
            "-q", check=True)
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["default", "summary"]
    assert sorted(p.name for p in (tmp_path / "two" / "default").iterdir()) == list(STAGES)
    # In stage order, by number: 10-NAME after 9-NAME.
    from dnaembed.report.plots import stage_directories

    (tmp_path / "ten").mkdir()
    for name in ("10-b", "9-a", "notes"):
        (tmp_path / "ten" / name).mkdir()
    assert [p.name for p in stage_directories(tmp_path / "ten")] == ["9-a", "10-b"]


def test_a_staged_run_is_drawn_whole_or_not_at_all(done, tmp_path):
    # A stage that has not validated yet (no metrics.jsonl) is skipped, and said so.
    run = _staged_run(done, tmp_path / "partial", STAGES[:2])
    (run / STAGES[2]).mkdir()
    proc = run_cli("report", str(run), "-o", str(tmp_path / "p"), check=True)
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == list(STAGES[:2])
    assert f"{run / STAGES[2]}: no metrics.jsonl yet" in proc.stderr.decode()
    # A broken stage: one line naming it, and no plots at all, of any stage or source (a
    # summary's directory was removed, but not the -o directory that held it).
    with open(run / STAGES[1] / "metrics.jsonl", "a") as fh:
        fh.write("{not json\n")
    for sources in ([run], [done / "out" / "summary.json", run]):
        out = tmp_path / "broken"
        err = assert_clean_error(run_cli("report", *map(str, sources), "-o", str(out)),
                                 f"{STAGES[1]}/metrics.jsonl: line 4: not JSON")
        *before, last = err.strip().splitlines()
        assert last.startswith("dnaembed: error: ")
        assert all("dnaembed: plot: " in line for line in before)  # the summary's
        assert not out.exists()
    # Stage directories, none with metrics: one line, the directory and its stages named.
    (tmp_path / "new" / "1-two-ends").mkdir(parents=True)
    assert_clean_error(run_cli("report", str(tmp_path / "new"), "-o", str(tmp_path / "x")),
                       "no metrics.jsonl, nor in its stage directories (1-two-ends)")
    assert not (tmp_path / "x").exists()


def test_a_summary_not_as_json_writes_it_is_one_line_naming_the_section(done, tmp_path):
    # Each was "internal error: AttributeError / KeyError / TypeError" from inside the
    # plotting: a hand-edited summary, or another program's JSON with a "command" key.
    summary = json.loads((done / "out" / "summary.json").read_text())
    cases = {
        "threshold is int, not an object": {"threshold": 5},
        "threshold has no 'max_dist'": {"threshold": {"histogram": [1, 2, 3]}},
        "cluster_sizes has no 'clusters'": {"cluster_sizes": {"size": [1]}},
        "cluster_sizes is list, not an object": {"cluster_sizes": [1, 2]},
        "consensus has no 'support'": {"consensus": {"strands": 3}},
        "consensus.confidence.edges is \"a\", not numbers": {"consensus": {
            **summary["consensus"], "confidence": {"edges": "a", "strands": [1]}}},
    }
    for number, (message, broken) in enumerate(cases.items()):
        path = tmp_path / f"s{number}.json"
        path.write_text(json.dumps({**summary, **broken}))
        proc = run_cli("report", str(path), "-o", str(tmp_path / f"p{number}"))
        err = assert_clean_error(proc, f"{path}: {message} (not a summary as --json writes it)")
        assert err.count("\n") == 1 and "internal error" not in err, err
        assert not (tmp_path / f"p{number}").exists()
    # evaluate's --json ("not a dnaembed summary (written by --json)", which it was).
    scores = tmp_path / "scores.json"
    run_cli("evaluate", str(done / "out" / "clusters.tsv"), "--truth",
            str(done / "s.truth.tsv"), "--json", str(scores), "-q", check=True)
    assert_clean_error(run_cli("report", str(scores), "-o", str(tmp_path / "sc")),
                       f"{scores}: not a summary of cluster, consensus or run (their --json)")
    # What --json writes for an empty input (a null threshold, no sizes) still draws.
    empty = {**summary, "threshold": None, "cluster_sizes": {"size": [], "clusters": []}}
    (tmp_path / "empty.json").write_text(json.dumps(empty))
    run_cli("report", str(tmp_path / "empty.json"), "-o", str(tmp_path / "e"), "-q",
            check=True)
    assert sorted(p.name for p in (tmp_path / "e").iterdir()) == [
        "cluster-sizes.png", "consensus-support.png"]


def test_metrics_rows_that_are_odd_are_named_or_drawn_without_warnings(tmp_path):
    # Rows without validation errors drew with matplotlib's "UserWarning: No artists with
    # labels found to put in legend" and its source line on standard error; a step that
    # is not a number was drawn as categories, exit 0.
    import os

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 4, "loss": 2.0}\n{"step": 8, "loss": 1.5}\n')
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    proc = subprocess.run([sys.executable, "-m", "dnaembed", "report", str(run), "-o",
                           str(tmp_path / "p"), "-q"], capture_output=True, env=env,
                          timeout=300)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode()
    assert (tmp_path / "p" / "training.png").read_bytes().startswith(PNG)
    (run / "metrics.jsonl").write_text('{"step": 4, "loss": 2.0}\n{"step": "8", "loss": 1}\n')
    err = assert_clean_error(run_cli("report", str(run), "-o", str(tmp_path / "q")),
                             "metrics.jsonl: line 2: step is \"8\", not a number")
    assert err.count("\n") == 1 and not (tmp_path / "q").exists()


def test_a_training_run_directory_as_model_names_its_model_file(done, tmp_path):
    # `embed -m runs/x` (the run, not its best.pt) was "runs/x: no such model file".
    run = done / "train"
    proc = run_cli("embed", str(done / "s.fastq.gz"), "-o", str(tmp_path / "e.npy"), "-m",
                   str(run))
    err = assert_clean_error(proc, f"{run}: a directory, not a model file: give its model, "
                             f"{run / 'best.pt'}")
    assert err.count("\n") == 1 and list(tmp_path.iterdir()) == []
    run_cli("embed", str(done / "s.fastq.gz"), "-o", str(tmp_path / "e.npy"), "-m",
            str(run / "best.pt"), "-q", check=True)
