"""The peer benchmark's converters, measurement and report, on literal sample outputs.

No peer is needed: each tool's output format is written out here as text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from peers.convert import (  # noqa: E402
    complete,
    parse_cdhit_clstr,
    parse_clover,
    parse_mmseqs_tsv,
    parse_starcode,
    parse_uc,
    write_cluster_tsv,
)
from peers.measure import parse_gnu_time, run_measured  # noqa: E402
from peers.report import _normalise, markdown_table  # noqa: E402
from peers.tools import all_tools, cdhit_word  # noqa: E402

from dnaembed.errors import InputError  # noqa: E402
from dnaembed.io.formats import READ_FORMATS, read_assignments  # noqa: E402

UC = """\
S\t0\t150\t*\t*\t*\t*\t*\tr1\t*
H\t0\t149\t98.7\t+\t0\t0\t80MI69M\tr2\tr1
S\t1\t150\t*\t*\t*\t*\t*\tr3\t*
H\t1\t150\t97.3\t-\t0\t0\t150M\tr4\tr3
C\t0\t2\t*\t*\t*\t*\t*\tr1\t*
C\t1\t2\t*\t*\t*\t*\t*\tr3\t*
"""

CLSTR = """\
>Cluster 0
0\t150nt, >r1... *
1\t149nt, >r2... at +/98.66%
>Cluster 1
0\t150nt, >r3... *
1\t150nt, >r4... at -/97.33%
"""

MMSEQS = "r1\tr1\nr1\tr2\nr3\tr3\nr3\tr4\n"

# Clover's -O file: (read, first read of its cluster); the cluster openers are not listed.
CLOVER = "[('1', '0'),('3', '2')]"

STARCODE_IDS = "ACGTACGT\t2\t1,2\nTTTTGGGG\t2\t4,3\n"
STARCODE_PRINT = "ACGTACGT\t2\tACGTACGT,ACGTACGA\t1,2\nTTTTGGGG\t2\tTTTTGGGG,TTTTGGGC\t4,3\n"

DNAEMBED = "# dnaembed 0.1 cluster model=x\n#read_id\tcluster_id\torientation\nr1\t0\t+\nr2\t0\t-\n"

EXPECTED = {"r1": "A", "r2": "A", "r3": "B", "r4": "B"}


def same_partition(got: dict[str, str], want: dict[str, str]) -> bool:
    """Equal as partitions of the same reads (labels may differ)."""
    if set(got) != set(want):
        return False
    pairs = {(got[r], want[r]) for r in got}
    return len(pairs) == len(set(got.values())) == len(set(want.values()))


@pytest.mark.parametrize(
    "parsed",
    [
        parse_uc(UC.splitlines()),
        parse_cdhit_clstr(CLSTR.splitlines()),
        parse_mmseqs_tsv(MMSEQS.splitlines()),
        parse_clover(CLOVER, ["r1", "r2", "r3", "r4"]),
        parse_starcode(STARCODE_IDS.splitlines(), ["r1", "r2", "r3", "r4"]),
        parse_starcode(STARCODE_PRINT.splitlines(), ["r1", "r2", "r3", "r4"]),
    ],
    ids=["vsearch-uc", "cdhit-clstr", "mmseqs-tsv", "clover", "starcode", "starcode-print"],
)
def test_each_format_gives_the_same_partition(parsed):
    assert same_partition(parsed, EXPECTED)


def test_clover_empty_output_and_dropped_reads():
    assert parse_clover("") == {}
    got, dropped = complete(parse_clover("[('1', '0')]", ["a", "b", "c"]), ["a", "b", "c"])
    assert dropped == 1 and got["a"] == got["b"] != got["c"]


def test_cdhit_ids_with_dots_and_cluster_tsv_header(tmp_path):
    got = parse_cdhit_clstr([">Cluster 7", "0\t90nt, >read.1.a... *"])
    assert got == {"read.1.a": "7"}
    (tmp_path / "c.tsv").write_text(DNAEMBED)
    assert read_assignments(tmp_path / "c.tsv") == {"r1": "0", "r2": "0"}


def test_starcode_without_seq_ids_is_refused():
    with pytest.raises(InputError, match="--seq-id"):
        parse_starcode(["ACGT\t2"], ["r1", "r2"])


def test_each_tool_is_scored_on_its_own_output_by_a_library_format():
    formats = {t.name: t.output_format for t in all_tools()}
    assert formats == {"dnaembed": "tsv", "vsearch": "uc", "cd-hit-est": "clstr",
                       "mmseqs2": "mmseqs", "clover": None, "starcode": "starcode"}
    assert set(formats.values()) - {None} == set(READ_FORMATS)


def test_complete_keeps_input_order_and_rejects_strangers(tmp_path):
    got, dropped = complete({"b": "x", "a": "x"}, ["a", "b", "c", "d"])
    assert list(got) == ["a", "b", "c", "d"] and dropped == 2
    assert got["a"] == got["b"] and len({got["c"], got["d"], got["a"]}) == 3
    with pytest.raises(ValueError, match="not input reads"):
        complete({"zz": "1"}, ["a"])
    write_cluster_tsv(got, tmp_path / "c.tsv")
    assert read_assignments(tmp_path / "c.tsv") == got


def test_gnu_time_fields():
    text = (
        "\tUser time (seconds): 1.50\n\tSystem time (seconds): 0.25\n"
        "\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02.50\n"
        "\tMaximum resident set size (kbytes): 20480\n"
    )
    assert parse_gnu_time(text) == {
        "max_rss_kb": 20480.0,
        "wall_s": 62.5,
        "user_s": 1.5,
        "sys_s": 0.25,
    }


def test_run_measured_times_out_and_kills(tmp_path):
    m = run_measured(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        cwd=tmp_path,
        timeout_s=0.5,
        log_path=tmp_path / "log.txt",
    )
    assert m.timed_out and not m.ok and m.wall_s == 0.5
    ok = run_measured(
        [sys.executable, "-c", "print('hi')"], cwd=tmp_path, timeout_s=30, log_path=tmp_path / "l"
    )
    assert ok.ok and ok.log_tail == "hi"


def test_run_measured_with_relative_paths(tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    m = run_measured(
        [sys.executable, "-c", "print('ok')"], cwd="work", timeout_s=30, log_path="work/log.txt"
    )
    assert m.ok and m.log_tail == "ok"


def test_cdhit_word_sizes():
    assert [cdhit_word(c) for c in (1.0, 0.9, 0.88, 0.85, 0.8)] == [10, 8, 7, 6, 5]


def test_evaluate_json_is_read_flat_or_nested():
    flat = {"A_0.8": 1, "A_0.9": 0.9, "A_1.0": 0.5, "ARI": 0.8, "NMI": 0.9,
            "output_clusters": 3, "true_clusters": 2}  # fmt: skip
    assert _normalise(flat)["A_0.9"] == 0.9
    nested = {"accuracy": {"0.8": 1, "0.9": 0.9, "1.0": 0.5}, "ARI": 0.8, "NMI": 0.9,
              "clusters": {"output_clusters": 3, "true_clusters": 2}}  # fmt: skip
    assert _normalise(nested)["A_1.0"] == 0.5
    assert _normalise({"ARI": 1}) is None


def test_markdown_table_rows_and_ratio():
    record = {
        "name": "tiny",
        "description": "a test",
        "data": {"reads": 4, "true_clusters": 2, "labelled_reads": 4},
        "runs": [
            {"tool": "dnaembed", "settings": "cluster", "status": "ok", "wall_s": 2.0,
             "cpu_s": 3.0, "peak_rss_mib": 100.0, "notes": [],
             "scores": {"A_0.8": 1.0, "A_0.9": 1.0, "A_1.0": 1.0, "ARI": 1.0, "NMI": 1.0,
                        "output_clusters": 2, "true_clusters": 2}},
            {"tool": "vsearch", "settings": "--id 0.9", "status": "ok", "wall_s": 1.0,
             "cpu_s": 1.0, "peak_rss_mib": 8.0, "notes": [],
             "scores": {"A_0.8": 0.5, "A_0.9": 0.5, "A_1.0": 0.5, "ARI": 0.5, "NMI": 0.5,
                        "output_clusters": 3, "true_clusters": 2}},
            {"tool": "cd-hit-est", "settings": "-c 0.8", "status": "timeout", "wall_s": 10.0,
             "timeout_s": 10.0, "notes": []},
            {"tool": "starcode", "settings": "-d 8", "status": "not installed",
             "notes": ["no binary"]},
        ],
    }  # fmt: skip
    table = markdown_table(record)
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(rows) == 5  # header + 4 runs
    assert "| 0.50x | 0.33x |" in rows[2]
    assert "timed out at 10 s" in rows[3] and ">5.0x" in rows[3]
    assert "not installed" in rows[4] and "no binary" in rows[4]
    assert all(row.count("|") == rows[0].count("|") for row in rows)
