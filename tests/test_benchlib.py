"""scripts/benchlib.py: sections of docs/benchmarks.md and printouts as Markdown."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import benchlib  # noqa: E402


def test_write_section_replaces_its_own_and_keeps_the_history_last(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text("# Benchmarks\n\nintro\n\n# Earlier measurements\n\n## Old\n\nold table\n")
    benchlib.write_section("Old", "| a |\n|---|\n| 1 |", command="cmd one", path=path)
    benchlib.write_section("Other", "second", command="cmd two", path=path)
    benchlib.write_section("Old", "| b |\n|---|\n| 2 |", command="cmd three", path=path)
    text = path.read_text()
    fresh, earlier = text.split("# Earlier measurements")
    assert fresh.count("## Old") == 1 and "| 2 |" in fresh and "| 1 |" not in fresh
    assert fresh.index("## Old") < fresh.index("## Other")
    assert "`cmd three` · commit " in fresh and "cmd one" not in text
    assert earlier == "\n\n## Old\n\nold table\n"


def test_as_markdown_keeps_tables_and_repeats_a_head_after_a_note():
    printed = ("pairs: 10\n\n| a | b |\n|---|---|\n| 1 | 2 |\n  (note)\n| 3 | 4 |\n"
               "\nlast line\nand another\n")
    assert benchlib.as_markdown(printed) == (
        "pairs: 10\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n(note)\n\n"
        "| a | b |\n|---|---|\n| 3 | 4 |\n\nlast line\n\nand another"
    )


def test_transcript_prints_and_keeps(capsys):
    printed = benchlib.Transcript()
    try:
        print("| x |\n|---|\n| 1 |")
    finally:
        text = printed.text()
        printed.restore()
    assert capsys.readouterr().out == "| x |\n|---|\n| 1 |\n"
    assert text == "| x |\n|---|\n| 1 |"


def test_cpu_description_names_the_emulation_and_the_blas_kernels_it_led_to():
    """The head of a table says which OpenBLAS kernels ran: OPENBLAS_CORETYPE is read when
    the library loads, so the description is made in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in benchlib.ISA_VARIABLES}
    env.update(OPENBLAS_CORETYPE="Haswell", FAISS_OPT_LEVEL="avx2")
    code = "import benchlib; print(benchlib.cpu_description())"
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(benchlib.__file__).parent,
                         env=env, capture_output=True, text=True, check=True).stdout
    assert "emulated: FAISS_OPT_LEVEL=avx2 OPENBLAS_CORETYPE=Haswell" in out
    assert out.strip().endswith("OpenBLAS kernels: Haswell")


def test_check_at_least_is_a_usage_error_naming_the_option(capsys):
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--dask-repeat", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 4])
    minimums = {"dask_repeat": 1, "sizes": 2}
    benchlib.check_at_least(parser, parser.parse_args([]), minimums)  # within: no error
    for argv, message in ((["--dask-repeat", "0"], "--dask-repeat must be at least 1, not 0"),
                          (["--sizes", "9", "1", "5"], "--sizes must be at least 2, not 1")):
        with pytest.raises(SystemExit) as stop:
            benchlib.check_at_least(parser, parser.parse_args(argv), minimums)
        assert stop.value.code == 2
        assert message in capsys.readouterr().err
