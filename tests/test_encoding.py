import numpy as np

from dnaembed.encoding import (
    PAD_CODE,
    decode_flat,
    encode_flat,
    kmer_codes,
    reverse_complement,
    reverse_complement_codes,
    reverse_complement_flat,
    to_padded,
)


def test_round_trip_and_lower_case():
    seqs = ["ACGTN", "", "acg"]
    codes, lengths = encode_flat(seqs)
    assert lengths.tolist() == [5, 0, 3]
    assert decode_flat(codes, lengths) == ["ACGTN", "", "ACG"]


def test_reverse_complement_flat_matches_string_version():
    seqs = ["AACGTN", "G", "TTGCA"]
    codes, lengths = encode_flat(seqs)
    which = np.array([True, False, True])
    out = decode_flat(reverse_complement_flat(codes, lengths, which), lengths)
    assert out == [reverse_complement("AACGTN"), "G", reverse_complement("TTGCA")]
    assert reverse_complement("AACGTN") == "NACGTT"


def test_reverse_complement_flat_of_reads_of_any_lengths_matches_one_by_one():
    # Reads of similar lengths (gathered as rows of one width), empty ones, and one far
    # longer than the rest (gathered one by one); all of them or some flipped.
    rng = np.random.default_rng(5)
    for trial in range(60):
        n = int(rng.integers(0, 40))
        lengths = rng.integers(140, 151, n) if trial % 2 else rng.integers(0, 9, n)
        if trial % 5 == 0 and n:
            lengths[int(rng.integers(0, n))] = 3_000
        seqs = ["".join(rng.choice(list("ACGTN"), int(m))) for m in lengths]
        codes, lengths = encode_flat(seqs)
        for which in (None, rng.random(n) < 0.5):
            flip = np.ones(n, bool) if which is None else which
            want = [reverse_complement(s) if f else s for s, f in zip(seqs, flip)]
            out = reverse_complement_flat(codes, lengths, which)
            assert decode_flat(out, lengths) == want, trial


def test_kmer_codes_reverse_complement_as_the_reversed_reads_do():
    rng = np.random.default_rng(0)
    for k in range(1, 13):
        seqs = ["".join(rng.choice(list("ACGTN"), int(rng.integers(k, 40)))) for _ in range(30)]
        forward, _ = kmer_codes(seqs, k)
        reverse, _ = kmer_codes([reverse_complement(s) for s in seqs], k)
        assert sorted(reverse_complement_codes(forward, k).tolist()) == sorted(reverse.tolist())


def test_kmer_codes_are_each_window_without_n_as_base_4_digits():
    # k-mers of 1 to 20 bases (int32 codes and int64 ones), reads shorter than k, empty
    # reads and N's; against each window's digits read one by one.
    rng = np.random.default_rng(1)
    seqs = ["".join(rng.choice(list("ACGTN"), int(m), p=[0.24] * 4 + [0.04]))
            for m in rng.integers(0, 60, 40)]
    for k in range(1, 21):
        want_codes, want_seq = [], []
        for i, s in enumerate(seqs):
            for start in range(len(s) - k + 1):
                window = s[start : start + k]
                if "N" not in window:
                    want_codes.append(int(window.translate(str.maketrans("ACGT", "0123")), 4))
                    want_seq.append(i)
        codes, seq_of = kmer_codes(seqs, k)
        assert codes.dtype == seq_of.dtype == np.int64
        assert codes.tolist() == want_codes and seq_of.tolist() == want_seq, k


def test_padding_and_window_cut():
    codes, lengths = encode_flat(["ACGT", "AAAAAAA"])
    m = to_padded(codes, lengths, 5)
    assert m.shape == (2, 5)
    assert m[0].tolist() == [0, 1, 2, 3, PAD_CODE]
    assert m[1].tolist() == [0, 0, 0, 0, 0]


def test_encode_padded_matches_flat_path():
    from dnaembed.encoding import encode_padded

    seqs = ["ACGTN", "", "acgtacgtacgt", "T" * 9]
    assert (encode_padded(seqs, 8) == to_padded(*encode_flat(seqs), 8)).all()
