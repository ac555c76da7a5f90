"""scripts/bench_scale.py: sets in lanes, stopped runs' stage times, the tables' heads."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_scale  # noqa: E402
import benchlib  # noqa: E402

from dnaembed.io.sequences import read_sequences  # noqa: E402
from dnaembed.io.tables import read_labels  # noqa: E402


def test_a_set_in_lanes_is_whole_with_distinct_ids_and_one_truth(tmp_path):
    prefix = bench_scale.simulate_lanes(tmp_path, 400, seed=3, lanes=2)
    files = bench_scale.set_files(prefix)
    assert [Path(f).name for f in files] == [f"{prefix.name}.lane00.fastq.gz",
                                             f"{prefix.name}.lane01.fastq.gz"]
    ids = [i for f in files for i in read_sequences(f).ids]
    truth = read_labels(f"{prefix}.truth.tsv")
    assert len(ids) == len(set(ids)) == len(truth) > 300
    assert set(truth) == set(ids)
    # Each lane its own strands: no strand id is shared between lanes.
    lanes = {label[:3] for label in truth.values()}
    assert lanes == {"L00", "L01"}
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob("*.tmp"))
    # Made once: asked again, the same files are not simulated again.
    before = Path(files[0]).stat().st_mtime_ns
    assert bench_scale.ensure_set(tmp_path, 400, 3, lanes=2) == prefix
    assert Path(files[0]).stat().st_mtime_ns == before


def test_a_stopped_run_gives_the_stages_its_log_reached():
    started = datetime.datetime(2026, 12, 4, 23, 59, 50)
    log = ("23:59:55 dnaembed: working (5s elapsed)\n"
           "00:00:20 dnaembed: 10007407 reads in 16 files, 10007407 distinct (either "
           "orientation)\n"
           "00:02:47 dnaembed: 10007407 distinct reads in 2444 partitions (each read in 3.28 "
           "on average; search in 64 dimensions)\n"
           "00:03:30 dnaembed: searching partitions: 537 partitions, 18 partitions/s\n")
    assert bench_scale.stage_marks(log, started) == {"read": 30.0, "embed": 177.0}
    row = {"name": "one process", "reads": 10_000_000, "error": "stopped",
           "marks": {"read": 30.0, "embed": 177.0}}
    line = bench_scale.stage_table([row]).splitlines()[-1]
    assert line == "| one process | 10,000,000 | 30.0 | 147.0 | 68,027 | - | stopped |"


def test_a_table_head_names_the_commit_it_is_given(monkeypatch):
    monkeypatch.setenv("BENCH_COMMIT", "abc1234")
    assert " · commit abc1234 · " in benchlib.table_head("cmd")
    monkeypatch.delenv("BENCH_COMMIT")
    assert " · commit abc1234 · " not in benchlib.table_head("cmd")


def test_budget_runs_are_compared_with_the_largest_size_run_by_run():
    pairs = [({"seconds": 70.0, "reads": 1_000_000}, {"seconds": 231.0, "reads": 3_000_000}),
             ({"seconds": 60.0, "reads": 1_000_000}, {"seconds": 216.0, "reads": 3_000_000}),
             ({"error": "stopped"}, {"seconds": 1.0, "reads": 3_000_000})]
    assert bench_scale.pair_ratios(pairs) == "; run by run 1.10x, 1.20x"
    assert bench_scale.pair_ratios(pairs[:1]) == ""  # one pair: the median ratio says it all
    assert bench_scale.numbered("one process", "", 1, 3) == ("one process, run 2", "-run2")
    assert bench_scale.numbered("one process", "-budget", 0, 1) == ("one process", "-budget")
