import Levenshtein
import numpy as np
import pytest

from dnaembed.errors import DnaembedError
from dnaembed.train.pairs import KINDS, PairConfig, PairSampler


def test_labels_are_exact_levenshtein_and_kinds_cover_the_range():
    batch = PairSampler(PairConfig(), seed=1).sample(2000)
    for a, b, d in list(zip(batch.a, batch.b, batch.distance))[:300]:
        assert Levenshtein.distance(a, b) == d
    kinds = {KINDS[k] for k in batch.kind}
    assert kinds == set(KINDS)
    unrelated = batch.distance[batch.kind == KINDS.index("unrelated")]
    near = batch.distance[batch.kind != KINDS.index("unrelated")]
    assert np.median(unrelated) > 50 and np.median(near) < 35
    assert (batch.distance == 0).any() or (batch.distance <= 2).sum() > 10
    lengths = [len(s) for s in batch.a]
    assert min(lengths) < 120 and max(lengths) > 180


def test_shared_primers_bring_unrelated_pairs_closer():
    plain = PairConfig(primer_fraction=0.0, mix={"unrelated": 1.0}, length_min=150,
                       length_max=150, max_error=0.0, truncate_fraction=0.0)
    flanked = PairConfig(primer_fraction=1.0, primer_length_min=25, primer_length_max=25,
                         mix={"unrelated": 1.0}, length_min=150, length_max=150, max_error=0.0,
                         truncate_fraction=0.0)
    d_plain = PairSampler(plain, seed=2).sample(500).distance.mean()
    d_flanked = PairSampler(flanked, seed=2).sample(500).distance.mean()
    assert d_plain == pytest.approx(82, abs=4)
    assert d_flanked == pytest.approx(55, abs=5)


def test_same_seed_same_pairs():
    a = PairSampler(PairConfig(), seed=[3, 0]).sample(100)
    b = PairSampler(PairConfig(), seed=[3, 0]).sample(100)
    c = PairSampler(PairConfig(), seed=[3, 1]).sample(100)
    assert a.a == b.a and (a.distance == b.distance).all()
    assert a.a != c.a


def test_padded_windows():
    batch = PairSampler(PairConfig(length_min=100, length_max=120), seed=4).sample(10)
    x, y = batch.padded(128)
    assert x.shape == (10, 128) and x.dtype == np.uint8


def test_bad_config():
    with pytest.raises(DnaembedError, match="unknown pair kinds"):
        PairConfig(mix={"cousins": 1.0})
    with pytest.raises(DnaembedError, match="length_min"):
        PairConfig(length_min=0)


def test_group_sampler_pairs_within_and_across_groups():
    from dnaembed.train.pairs import GroupSampler, make_sampler

    cfg = PairConfig(group_size=6)
    sampler = make_sampler(cfg, seed=5)
    assert isinstance(sampler, GroupSampler)
    batch = sampler.sample_train(60)
    assert len(batch.seqs) == 60
    # 10 groups x 15 pairs within, plus one cross pair per sequence.
    assert batch.pairs == 10 * 15 + 60
    for i, j, d in zip(batch.left.tolist(), batch.right.tolist(), batch.distance.tolist()):
        assert Levenshtein.distance(batch.seqs[i], batch.seqs[j]) == d
    within = batch.left[:150] // 6 == batch.right[:150] // 6
    across = batch.left[150:] // 6 != batch.right[150:] // 6
    assert within.all() and across.all()
    assert np.median(batch.distance[150:]) > np.median(batch.distance[:150])


def test_independent_sampler_in_training_format():
    batch = PairSampler(PairConfig(), seed=6).sample_train(40)
    assert len(batch.seqs) == 40 and batch.pairs == 20
    assert (batch.right - batch.left == 20).all()


@pytest.mark.parametrize("group_size", [0, 8])
def test_batches_are_the_same_whoever_draws_them(group_size):
    # Batch i is a function of (seed, stage, rank, i) only: drawn in this process, by a
    # background thread, or by one or two worker processes, from the start or resumed at 3.
    from dnaembed.train.batches import BatchSource, open_stream

    source = BatchSource(PairConfig(group_size=group_size), seed=7, stage=1, rank=0,
                         batch_size=48, window=400)

    def drawn(start: int, **how) -> list:
        stream = open_stream(source, start, 6, **how)
        try:
            return [stream.next() for _ in range(start, 6)]
        finally:
            stream.close()

    inline = drawn(0)
    fields = ("codes", "left", "right", "distance")
    for other in (drawn(0, prefetch=2), drawn(0, workers=1), drawn(0, workers=2, prefetch=1),
                  [None] * 3 + drawn(3, workers=2)):
        for a, b in zip(inline, other):
            if b is not None:
                assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields)
    assert not np.array_equal(inline[0].codes, inline[1].codes)
    other_stage = BatchSource(PairConfig(group_size=group_size), 7, 2, 0, 48, 400).draw(0)
    assert not np.array_equal(inline[0].codes, other_stage.codes)
    for batch in inline[:2]:
        seqs = ["".join("ACGTN"[c] for c in row if c < 5) for row in batch.codes]
        for i, j, d in list(zip(batch.left.tolist(), batch.right.tolist(),
                                batch.distance.tolist()))[:50]:
            assert Levenshtein.distance(seqs[i], seqs[j]) == d
