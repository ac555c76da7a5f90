import gzip

import numpy as np
import pytest

from dnaembed.errors import DnaembedError, InputError
from dnaembed.io.atomic import atomic_path
from dnaembed.io.sequences import iter_read_chunks, read_sequences, write_sequences
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
