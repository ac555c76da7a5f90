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
