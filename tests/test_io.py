import gzip
from pathlib import Path

import numpy as np
import pytest

from dnaembed.errors import DnaembedError, InputError
from dnaembed.io.atomic import atomic_path
from dnaembed.io.sequences import (
    iter_read_blocks,
    iter_read_chunks,
    read_sequences,
    write_sequences,
)
from dnaembed.io.spill import SpillArray
from dnaembed.io.tables import command_header, read_table, write_tsv
from dnaembed.io.vectors import save_npy


def test_fasta_and_fastq_are_read_upper_cased_with_n(write):
    fa = write("r.fa", ">a desc\nacgtN\nAC\n>b\nGGGG\n")
    reads = read_sequences(fa)
    assert reads.ids == ["a", "b"]
    assert reads.seqs == ["ACGTNAC", "GGGG"]
    assert reads.quals is None
    fq = write("r.fq", "@x\nACGT\n+\nIIII\n@y\ntt\n+\nII\n")
    reads = read_sequences(fq)
    assert reads.seqs == ["ACGT", "TT"] and reads.quals == ["IIII", "II"]


def test_gzip_detected_from_content(tmp_path):
    path = tmp_path / "reads.fastq.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("@a\nACGT\n+\nIIII\n")
    assert read_sequences(path).seqs == ["ACGT"]
    # Content decides, not the name.
    other = tmp_path / "reads.dat"
    other.write_bytes(path.read_bytes())
    assert read_sequences(other).seqs == ["ACGT"]


def test_invalid_character_names_file_record_and_id(write):
    fa = write("bad.fa", ">ok\nACGT\n>r2\nACXT\n")
    with pytest.raises(InputError) as e:
        read_sequences(fa)
    msg = str(e.value)
    assert "bad.fa" in msg and "record 2" in msg and "r2" in msg and "'X'" in msg
    assert "position 3" in msg


def test_blocks_report_the_first_fault_in_file_order(write):
    # Records are validated in blocks; a fault deep in a later block, lower case in
    # another, a character outside ASCII and a truncated record must still be reported
    # as record by record: the first fault in file order, with its own record number
    # (dnaio refuses characters outside ASCII itself).
    good = "".join(f">r{i}\n{'acgt' if i % 3 else 'ACGN'}\n" for i in range(20))
    reads = list(iter_read_blocks(write("ok.fa", good), 6))
    assert [len(ids) for ids, _, _ in reads] == [6, 6, 6, 2]
    assert reads[1][1][:2] == ["ACGN", "ACGT"]
    bad = good + ">r20\nACéT\n>r21\nAXGT\n"
    with pytest.raises(InputError, match=r"bad.fa: record 21: .*ASCII"):
        list(iter_read_blocks(write("bad.fa", bad), 6))
    empty_id = good.replace(">r13\n", ">  \n") + ">r20\nAXGT\n"
    with pytest.raises(InputError, match=r"record 14: empty read id"):
        list(iter_read_blocks(write("id.fa", empty_id), 6))
    # Record 3's qualities are too short: a fault of the reader, after record 2's own.
    records = "@a\nAC\n+\nII\n@b\nAX\n+\nII\n@c\nACGT\n+\nII\n"
    with pytest.raises(InputError, match=r"record 2 \(b\): invalid character 'X'"):
        list(iter_read_blocks(write("cut.fq", records), 8))
    with pytest.raises(InputError, match=r"cut2.fq: record 3: "):
        list(iter_read_blocks(write("cut2.fq", records.replace("AX", "AA")), 8))


def test_a_character_outside_ascii_is_reported_at_its_record(tmp_path):
    # dnaio refuses the whole buffer, before its first record: the message said record 1.
    records = [f"@r{i}\nACGT\n+\nIIII\n" for i in range(300)] + ["@r300 caf\u00e9\nACGT\n+\nIIII\n"]
    text = "".join(records).encode()
    plain, packed = tmp_path / "x.fastq", tmp_path / "x.fastq.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    for path in (plain, packed):
        with pytest.raises(InputError, match=rf"^{path}: record 301 \(line 1201\): a character "
                           r"outside ASCII \(byte 0xc3; FASTA and FASTQ files are ASCII\)$"):
            read_sequences(path)
    bom = tmp_path / "bom.fastq"
    bom.write_bytes(b"\xef\xbb\xbf" + text[:40])
    with pytest.raises(InputError, match=r"record 1 \(line 1\): a character outside ASCII"):
        read_sequences(bom)


def test_duplicate_ids_are_an_error(write):
    fa = write("dup.fa", ">a\nAC\n>b\nGG\n>a\nTT\n")
    expected = r"record 3 \(a\): duplicate read id \(first seen at record 1\)"
    with pytest.raises(InputError, match=expected):
        read_sequences(fa)


def test_empty_records_kept_for_reads_refused_for_refs(write):
    fa = write("e.fa", ">a\n\n>b\nAC\n")
    assert read_sequences(fa).seqs == ["", "AC"]
    with pytest.raises(InputError, match="record 1 \\(a\\): empty sequence"):
        read_sequences(fa, allow_empty=False)


def test_empty_file_has_no_reads(write):
    assert len(read_sequences(write("empty.fq", ""))) == 0


def test_not_sequence_file_and_missing_file(write, tmp_path):
    with pytest.raises(InputError, match="not a FASTA or FASTQ file"):
        read_sequences(write("x.txt", "hello\n"))
    with pytest.raises(InputError, match="no such file"):
        read_sequences(tmp_path / "missing.fq")
    with pytest.raises(InputError, match="record 1.*qualities"):
        read_sequences(write("trunc.fq", "@a\nACGT\n+\nII\n"))


def test_chunks_stream_all_reads(write):
    fa = write("c.fa", "".join(f">r{i}\nACGT\n" for i in range(10)))
    chunks = list(iter_read_chunks(fa, 3))
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    assert sum((c.ids for c in chunks), []) == [f"r{i}" for i in range(10)]


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    dest = tmp_path / "out.tsv"
    with pytest.raises(RuntimeError), atomic_path(dest) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("boom")
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_to_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(DnaembedError, match="does not exist"):
        write_tsv(tmp_path / "no" / "x.tsv", ["a"], [])


def test_tsv_round_trip_with_header(tmp_path):
    path = tmp_path / "t.tsv"
    header = command_header("cluster", {"method": "graph", "seed": 1})
    write_tsv(path, ["read_id", "cluster_id"], [("r1", 0), ("r2", 1)], header=header)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# dnaembed ") and "cluster method=graph seed=1" in lines[0]
    assert lines[1] == "#read_id\tcluster_id"
    assert read_table(path) == [["r1", "0"], ["r2", "1"]]


def test_sequences_gzip_by_extension(tmp_path):
    path = tmp_path / "o.fastq.gz"
    write_sequences(path, ["a"], ["ACGT"], ["IIII"])
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert read_sequences(path).quals == ["IIII"]
    plain = tmp_path / "o.fasta"
    write_sequences(plain, ["a"], ["ACGT"])
    assert plain.read_text() == ">a\nACGT\n"


def test_save_npy(tmp_path):
    path = tmp_path / "e.npy"
    save_npy(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.load(path).shape == (2, 3)


def test_output_set_renames_all_together_or_nothing(tmp_path):
    from dnaembed.io.atomic import OutputSet

    (tmp_path / "b.txt").write_text("old b")
    with OutputSet({"a": tmp_path / "a.txt", "b": tmp_path / "b.txt"}) as out:
        Path(out.path("a")).write_text("new a")
        assert not (tmp_path / "a.txt").exists()  # nothing in place before the end
        Path(out.path("b")).write_text("new b")
    assert (tmp_path / "a.txt").read_text() == "new a"
    assert (tmp_path / "b.txt").read_text() == "new b"
    with pytest.raises(RuntimeError), OutputSet({"a": tmp_path / "a.txt",
                                                 "b": tmp_path / "b.txt"}) as out:
        Path(out.path("a")).write_text("newer a")
        raise RuntimeError("boom")
    assert (tmp_path / "a.txt").read_text() == "new a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def test_output_set_creates_and_removes_its_directories(tmp_path):
    from dnaembed.io.atomic import OutputSet

    out_dir = tmp_path / "x" / "y"
    with pytest.raises(KeyboardInterrupt), OutputSet(
            {"t": out_dir / "t.tsv"}, directories=(out_dir,)):
        assert out_dir.is_dir()
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_output_set_refuses_inputs_and_twins(tmp_path):
    from dnaembed.errors import UsageError
    from dnaembed.io.atomic import OutputSet

    src = tmp_path / "r.fa"
    src.write_text(">a\nAC\n")
    (tmp_path / "ln.fa").symlink_to(src)
    for outputs in ({"-o": tmp_path / "ln.fa"}, {"-o": tmp_path / "sub" / ".." / "r.fa"},
                    {"-o": "-", "--json": "-"}, {"-o": tmp_path / "x", "--c": tmp_path / "x"}):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(UsageError), OutputSet(outputs, inputs={"READS": src}):
            pass
    assert src.read_text() == ">a\nAC\n"


def test_write_errors_name_the_destination(tmp_path):
    import errno

    dest = tmp_path / "out.tsv"
    with pytest.raises(DnaembedError, match=r"out\.tsv: cannot write: No space left"), \
            atomic_path(dest):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rows", [4, 100_000], ids=["buffered", "written"])
def test_a_full_tmpdir_names_the_spilled_file(rows):
    # /dev/full refuses every write with ENOSPC, as a full --tmpdir does: the error said
    # only "No space left on device" (a write's OSError names no file).
    spilled = SpillArray((4,), np.float32, spill_to=Path("/dev/full"))
    with pytest.raises(OSError) as raised:
        spilled.append(np.zeros((rows, 4), np.float32))
        spilled.finish()  # the last buffered rows go out here
    assert raised.value.filename == "/dev/full"
    assert "No space left on device (the data spilled to --tmpdir" in raised.value.strerror
    spilled.close()


def test_only_the_header_block_is_comments(write):
    path = write("c.tsv", "# dnaembed 0.1 cluster\n#read_id\tcluster_id\n#r1\t0\n"
                          "r2\t0\n#read_id\t1\n# x\t2\n")
    assert read_table(path) == [["#r1", "0"], ["r2", "0"], ["#read_id", "1"], ["# x", "2"]]
    assert read_table(write("d.tsv", "#\n# free text\n\n#c1\tc2\na\tb\n")) == [["a", "b"]]
    assert read_table(write("e.tsv", "a\tb\n#c\td\n")) == [["a", "b"], ["#c", "d"]]


def test_tables_and_json_compressed_by_name(tmp_path):
    path = tmp_path / "t.tsv.gz"
    write_tsv(path, ["read_id", "cluster_id"], [("r1", 0)])
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert read_table(path) == [["r1", "0"]]
    plain = tmp_path / "p.gz"  # compression is read from the content, not the name
    plain.write_text("a\tb\n")
    assert read_table(plain) == [["a", "b"]]


@pytest.mark.parametrize("width", [150, 3_000])  # masks looked up by length, and computed
def test_gathered_rows_are_the_slices_joined(width):
    # Rows of mixed lengths (empty ones too), in any order and repeated, some ending at the
    # buffer's last byte (shifted back into a full-width window), some of the widest length.
    from dnaembed.arrays import gather_padded, gather_rows

    rng = np.random.default_rng(width)
    buffer = rng.integers(0, 256, 5 * width, dtype=np.uint8)
    for _ in range(40):
        n = int(rng.integers(1, 30))
        lengths = rng.integers(width // 2, width + 1, n)
        lengths[rng.random(n) < 0.1] = 0
        lengths[int(rng.integers(0, n))] = width
        starts = rng.integers(0, len(buffer) - lengths + 1)
        ends_last = rng.random(n) < 0.2
        starts[ends_last] = len(buffer) - lengths[ends_last]
        want = b"".join(buffer[s : s + m].tobytes() for s, m in zip(starts, lengths))
        assert gather_rows(buffer, starts, lengths).tobytes() == want
        # As rows of one width: each row's own bytes first.
        padded = gather_padded(buffer, starts, lengths)
        if width * n > 2 * lengths.sum():  # GATHER_SLACK: mostly empty rows
            assert padded is None
            continue
        assert padded.shape == (n, width)
        assert [bytes(row[:m]) for row, m in zip(padded, lengths)] == [
            buffer[s : s + m].tobytes() for s, m in zip(starts, lengths)]
    # Rows far wider than most: not as rows of one width.
    assert gather_padded(buffer, np.array([0, 1, 2]), np.array([width, 1, 1])) is None
    assert gather_padded(buffer, np.zeros(0, np.int64), np.zeros(0, np.int64)) is None


def test_a_character_outside_ascii_in_a_pipe_is_not_looked_for_again(tmp_path):
    # A pipe (`<(zcat ...)`) is read once: opening it again to find the byte would wait for
    # a writer that is gone, or read on from where the reader stopped.
    import os
    import threading

    pipe = tmp_path / "reads.pipe"
    os.mkfifo(pipe)
    text = b"@r0\nACGT\n+\nIIII\n@r1 caf\xc3\xa9\nACGT\n+\nIIII\n"
    writer = threading.Thread(target=lambda: pipe.write_bytes(text), daemon=True)
    writer.start()
    with pytest.raises(InputError, match=r"a character outside ASCII at or after record 1"):
        read_sequences(pipe)
