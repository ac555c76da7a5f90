import dataclasses
import re

import numpy as np
import pytest

from dnaembed.encoding import decode_flat, encode_flat
from dnaembed.errors import DnaembedError
from dnaembed.sim.channel import PRESETS, Channel, calibrated, get_preset, transmit
from dnaembed.sim.coverage import Coverage
from dnaembed.sim.simulate import ReadLayout, simulate_reads
from dnaembed.sim.strands import random_strands


@pytest.fixture(scope="module")
def strands():
    return random_strands(400, 150, np.random.default_rng(5))


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_aligned_rates_within_10_percent(strands, name):
    channel = PRESETS[name]
    # Low-rate presets need more bases for a 10% precision on their rarest event.
    coverage = 30 if channel.total_rate < 0.01 else 6
    sim = simulate_reads(strands, channel, Coverage("fixed", coverage), ReadLayout(0.5), seed=11)
    obs = sim.aligned_error_rates()
    assert obs["bases"] >= 1e5
    assert obs["substitution"] == pytest.approx(channel.substitution, rel=0.10)
    assert obs["insertion"] == pytest.approx(channel.insertion, rel=0.10)
    assert obs["deletion"] == pytest.approx(channel.deletion_total, rel=0.10)


def test_error_free_channel_is_identity():
    seqs = ["ACGTACGT", "GGGCCCAAATTT", ""]
    codes, lengths = encode_flat(seqs)
    out = transmit(codes, lengths, Channel(), np.random.default_rng(0))
    assert decode_flat(out.codes, out.lengths) == seqs
    assert out.substitutions.sum() == out.insertions.sum() == out.deletions.sum() == 0


def test_substitution_only_channel_keeps_length_and_changes_bases():
    codes, lengths = encode_flat(["ACGT" * 250])
    out = transmit(codes, lengths, Channel(substitution=0.5), np.random.default_rng(1))
    assert out.lengths.tolist() == [1000]
    changed = int((out.codes != codes).sum())
    assert changed == int(out.substitutions[0])
    assert 400 < changed < 600


def test_bursts_delete_runs():
    codes, lengths = encode_flat(["A" * 20000])
    ch = Channel(burst_rate=0.01, burst_mean_length=4.0)
    out = transmit(codes, lengths, ch, np.random.default_rng(2))
    lost = 20000 - int(out.lengths[0])
    assert lost == pytest.approx(20000 * ch.deletion_total, rel=0.2)


def test_homopolymer_bias_concentrates_deletions_in_runs():
    # Long runs and isolated bases alternate; with bias, run bases are deleted more often.
    seq = ("AAAAAAAA" + "CGTC") * 2000
    codes, lengths = encode_flat([seq])
    rng = np.random.default_rng(3)
    plain = transmit(codes, lengths, Channel(deletion=0.05), rng)
    biased = transmit(codes, lengths, Channel(deletion=0.05, homopolymer_bias=2.0), rng)
    def a_fraction(out):
        return decode_flat(out.codes, out.lengths)[0].count("A") / len(seq)
    # Same total deletion rate, fewer A's survive with the bias.
    assert biased.deletions[0] == pytest.approx(plain.deletions[0], rel=0.1)
    assert a_fraction(biased) < a_fraction(plain) - 0.01


def test_same_seed_same_reads_different_seed_different(strands):
    ch = PRESETS["nanopore"]
    a = simulate_reads(strands[:50], ch, Coverage("poisson", 5), seed=1)
    b = simulate_reads(strands[:50], ch, Coverage("poisson", 5), seed=1)
    c = simulate_reads(strands[:50], ch, Coverage("poisson", 5), seed=2)
    assert a.seqs == b.seqs and a.quals == b.quals and (a.strand == b.strand).all()
    assert a.seqs != c.seqs


def test_rates_out_of_range_are_refused():
    with pytest.raises(DnaembedError, match="substitution rate must be in"):
        Channel(substitution=1.5)
    with pytest.raises(DnaembedError, match="insertion rate"):
        Channel(insertion=-0.1)
    with pytest.raises(DnaembedError, match="unknown channel preset 'foo'"):
        get_preset("foo")


def test_overrides_replace_preset_rates():
    ch = get_preset("illumina").with_overrides(substitution=0.02, insertion=None)
    assert ch.substitution == 0.02 and ch.insertion == PRESETS["illumina"].insertion


def test_calibration_is_deterministic_and_runs_hotter_at_high_rates():
    ch = PRESETS["nanopore-hard"]
    gen = calibrated(ch)
    assert gen == calibrated(dataclasses.replace(ch))
    assert gen.insertion > ch.insertion and gen.deletion > ch.deletion
    low = PRESETS["illumina"]
    assert calibrated(low) == low


@pytest.mark.parametrize("model", ["fixed", "poisson", "negbin", "lognormal"])
def test_coverage_models_mean_and_variance(model):
    cov = Coverage(model, mean=8, dispersion=4, sigma=0.6)
    counts = cov.draw(100_000, np.random.default_rng(4))
    assert counts.mean() == pytest.approx(8, rel=0.02)
    assert counts.var() == pytest.approx(cov.expected_variance(), rel=0.05, abs=0.01)


def test_coverage_dropout_and_bad_model():
    counts = Coverage("fixed", 5, dropout=0.25).draw(1000, np.random.default_rng(0))
    assert (counts == 0).sum() == 250
    with pytest.raises(DnaembedError, match="unknown coverage model"):
        Coverage("uniform")


def test_strand_constraints_hold():
    rng = np.random.default_rng(9)
    seqs = random_strands(300, (120, 160), rng, max_homopolymer=2, gc_min=0.4, gc_max=0.6,
                          gc_window=20)
    assert all(120 <= len(s) <= 160 for s in seqs)
    for s in seqs:
        assert max(len(m.group()) for m in re.finditer(r"(.)\1*", s)) <= 2
        for i in range(len(s) - 19):
            gc = sum(c in "GC" for c in s[i : i + 20])
            assert 8 <= gc <= 12


def test_layout_reverse_truncate_contaminants(strands):
    layout = ReadLayout(reverse_fraction=0.5, truncate_fraction=0.3, truncate_mean=20,
                        contaminant_fraction=0.1)
    sim = simulate_reads(strands[:200], Channel(), Coverage("fixed", 10), layout, seed=3)
    assert sim.reverse.mean() == pytest.approx(0.5, abs=0.05)
    assert sim.truncated.mean() == pytest.approx(0.3, abs=0.05)
    assert (sim.strand < 0).sum() == round(0.1 * 2000 / 0.9)
    # Error-free channel: untruncated forward reads are their strand; reverse ones its RC.
    from dnaembed.encoding import reverse_complement

    for seq, s, rev, cut in zip(sim.seqs, sim.strand, sim.reverse, sim.truncated):
        if s < 0:
            continue
        ref = sim.strand_seqs[s]
        expect = reverse_complement(ref) if rev else ref
        if cut:
            assert expect.startswith(seq) and len(seq) < len(ref)
        else:
            assert seq == expect
