"""The threshold: the upper tail of the same-strand distances, robust to related designs
and to outlier pairs."""

import numpy as np

from dnaembed.cluster.populations import MIN_TAIL_PAIRS, TAIL_DECADES, tail_points
from dnaembed.cluster.threshold import Threshold, estimate_threshold, fallback_threshold
from dnaembed.cluster.threshold_sample import SAMPLE_PAIRS


def sample(rng, same=6000, related=0, unrelated=3000, peak=12, related_at=36, unrelated_at=54):
    """Distances of candidate pairs: same-strand (Poisson), related designs, unrelated."""
    parts = [rng.poisson(peak, same), rng.normal(related_at, 4, related).round(),
             rng.normal(unrelated_at, 4, unrelated).round()]
    return np.concatenate(parts).clip(0).astype(np.int64)


def test_cut_at_the_same_strand_tail_not_the_middle_of_the_gap():
    rng = np.random.default_rng(0)
    same = rng.poisson(12, 4000)
    t = estimate_threshold(np.concatenate([same, rng.normal(75, 4, 3000).astype(int)]), 150)
    assert t.source == "data" and t.rule == "tail"
    assert t.same_peak in range(10, 14) and t.unrelated_peak in range(70, 81)
    # Beyond all but ~1 in 1,000 same-strand pairs, far below the middle of the gap (~43).
    assert np.percentile(same, 99.9) <= t.max_dist <= 28 < t.valley
    x10, x1 = t.tail
    assert t.max_dist == int(x1 + TAIL_DECADES * (x1 - x10))
    assert t.cuts(np.array([150, 75])).tolist() == [t.max_dist, t.max_dist // 2]
    assert abs(t.error_rate - t.same_peak / 300) < 1e-12


def test_related_designs_inside_the_gap_stay_beyond_the_cut():
    """110-nt designs, 30% with a partner shifted by 14 nt: reads of partners ~36 apart.

    Few related pairs reach the sample (a read's nearest neighbours are its own
    strand's), so the gap looks empty: the middle of it would merge them.
    """
    rng = np.random.default_rng(1)
    for related in (40, 3000):
        t = estimate_threshold(sample(rng, related=related), 110)
        assert t.rule == "tail" and t.same_peak in range(10, 14), related
        assert (rng.normal(36, 4, 100_000).round() <= t.max_dist).mean() < 0.01, related
        assert (rng.poisson(12, 100_000) > t.max_dist).mean() < 0.002, related
    line = t.describe()
    assert "upper tail of the same-strand distances" in line and f"peak {t.same_peak}" in line
    assert "errors per read" in line and "1% beyond" in line and "unrelated peak at" in line


def test_a_related_population_with_an_empty_gap_after_it_stays_beyond_the_cut():
    """Windows shifted by 14 nt: related pairs as common as half the same-strand ones (few
    reads per strand, so a read's neighbour list runs into its neighbouring windows), and
    the gap between them and the unrelated reads emptier than the one before them."""
    rng = np.random.default_rng(2)
    t = estimate_threshold(sample(rng, same=3000, related=1500, related_at=36,
                                  unrelated_at=64), 110)
    assert t.rule in ("tail", "trough") and t.same_peak in range(10, 14)
    assert t.max_dist < 28 and (rng.poisson(12, 100_000) > t.max_dist).mean() < 0.002


def test_a_heavy_same_strand_tail_moves_the_cut_out_to_the_valley():
    """Real reads: a few carry many errors, so the tail decays slowly (exponentially)."""
    rng = np.random.default_rng(2)
    heavy = (1 + rng.exponential(4, 5000)).astype(int)
    light = rng.poisson(4, 5000)
    unrelated = rng.normal(50, 3, 5000).round().astype(int)
    t_heavy = estimate_threshold(np.concatenate([heavy, unrelated]), 149)
    t_light = estimate_threshold(np.concatenate([light, unrelated]), 149)
    assert t_light.max_dist <= 13 < t_heavy.max_dist
    assert (heavy > t_heavy.max_dist).mean() < 0.002
    assert t_heavy.max_dist <= t_heavy.valley


def test_outlier_pairs_do_not_move_the_cut():
    rng = np.random.default_rng(3)
    d = sample(rng)
    longer = np.full(len(d), 150)
    base = estimate_threshold(d, 150, longer)
    # One 10,000-nt read: each of its pairs is ~9,850 edits from a 150-nt read.
    outliers = np.full(40, 9850)
    with_long = estimate_threshold(np.concatenate([d, outliers]), 150,
                                   np.concatenate([longer, np.full(40, 10_000)]))
    assert with_long.max_dist == base.max_dist and with_long.unrelated_peak == base.unrelated_peak
    # Without lengths, the pairs farther apart than a read is long are left out as well.
    assert estimate_threshold(np.concatenate([d, outliers]), 150).max_dist == base.max_dist
    # Twenty reads of 1,000 nt: their 1,000-nt pairs, as rates per base, land among the others.
    twenty = estimate_threshold(np.concatenate([d, np.full(300, 530)]), 150,
                                np.concatenate([longer, np.full(300, 1000)]))
    assert twenty.max_dist == base.max_dist


def test_rates_per_base_put_longer_pairs_on_the_reference_scale():
    rng = np.random.default_rng(4)
    d = sample(rng)
    base = estimate_threshold(d, 150)
    # The same pairs between reads twice as long: twice the edits, the same rate per base.
    doubled = estimate_threshold(2 * d, 150, np.full(len(d), 300))
    assert abs(doubled.max_dist - base.max_dist) <= 1


def test_tail_points_interpolate_within_bins():
    # 1,000 pairs, 10 at each distance 0..99: 10% exceed 89.5, 1% exceed 98.5.
    x10, x1 = tail_points(np.full(100, 10.0))
    assert abs(x10 - 89.5) < 1e-9 and abs(x1 - 98.5) < 1e-9
    assert tail_points(np.full(10, (MIN_TAIL_PAIRS - 1) / 10)) is None


def test_too_few_same_strand_pairs_leave_the_valley_rule():
    rng = np.random.default_rng(5)
    d = np.concatenate([rng.poisson(12, 300), rng.normal(75, 4, 3000).round().astype(int)])
    t = estimate_threshold(d, 150)
    assert t.rule == "valley" and t.tail is None and t.max_dist == t.valley
    assert "valley" in t.describe()


def test_no_second_peak_or_too_few_pairs_falls_back():
    rng = np.random.default_rng(6)
    flat = estimate_threshold(rng.normal(70, 4, 3000).astype(int), 150)
    assert flat.source == "fallback" and flat.max_dist == fallback_threshold(150) == 45
    assert "fallback" in flat.describe()
    assert estimate_threshold(np.array([1, 2, 3]), 100).source == "fallback"
    assert Threshold(30, "user").describe() == "max distance 30 (set by the user)"
    user = Threshold(43, "user", data_cut=21)
    assert user.same_strand().max_dist == 21 and "the data's own cut: 21" in user.describe()


def real_like_sample(rng, n):
    """Half same-strand pairs with a real run's long tail (a quarter of them a geometric
    number of edits more, as a few reads carry many errors), half unrelated."""
    same = rng.poisson(3, n // 2)
    tail = rng.random(len(same)) < 0.25
    same[tail] += rng.geometric(1 / 5.0, tail.sum())
    return np.concatenate([same, rng.normal(75, 5, n - n // 2).round().astype(np.int64)])


def test_a_sample_of_the_chosen_size_gives_one_cut_whatever_the_seed():
    """The cut extrapolates the tail from its 1% point: from 20,000 pairs of this
    distribution eight seeds gave cuts 26 to 29; from SAMPLE_PAIRS, within one edit."""
    cuts = {estimate_threshold(real_like_sample(np.random.default_rng(seed), SAMPLE_PAIRS),
                               150).max_dist for seed in range(8)}
    assert max(cuts) - min(cuts) <= 1, cuts
    small = {estimate_threshold(real_like_sample(np.random.default_rng(seed), 20_000),
                                150).max_dist for seed in range(8)}
    assert max(small) - min(small) >= 2, small  # the spread the larger sample removes


def test_few_same_strand_pairs_below_two_unrelated_populations_set_the_cut():
    # A sparse run (few reads per strand; strands sharing primers): unrelated pairs at ~53
    # and ~73 edits of 145 nt outweigh 40 same-strand pairs at a few edits. The split fell
    # between the unrelated two: a "same-strand" peak at 52 and a cut of 65 that merged
    # nearly everything.
    rng = np.random.default_rng(9)
    d = np.concatenate([rng.poisson(3, 40), rng.normal(54, 3.5, 12000).round(),
                        rng.normal(74, 3, 900).round()]).astype(np.int64)
    t = estimate_threshold(d, 145)
    assert t.source == "data" and t.same_peak <= 6 and 50 <= t.unrelated_peak <= 56
    assert 15 < t.max_dist < 40
    # Without those few pairs there is no same-strand peak to find: the fallback, saying so.
    alone = estimate_threshold(d[40:], 145)
    assert alone.source == "fallback" and alone.max_dist == fallback_threshold(145)
    assert "no reads of one strand" in alone.describe()


def test_a_sample_of_one_strand_population_is_cut_at_its_tail_not_the_fallback():
    # High coverage: every neighbour of a read is its own strand's and the sample holds no
    # unrelated pair. The fallback (45 of 150 nt) merged designs 20 edits apart.
    rng = np.random.default_rng(11)
    t = estimate_threshold(rng.poisson(4, 5000), 150)
    assert t.source == "data" and t.rule == "tail" and t.same_peak <= 5
    assert t.unrelated_peak is None and 8 <= t.max_dist <= 15
    assert "no unrelated peak in the sample" in t.describe()
    # One population whose tail reaches past the fallback keeps the fallback.
    wide = estimate_threshold(rng.poisson(35, 5000), 150)
    assert wide.source == "fallback" and wide.max_dist == fallback_threshold(150)


def test_related_designs_close_to_the_same_strand_pairs_set_the_cut_below_them():
    # Illumina-like rates (~4 edits a same-strand pair) and designs 8 substitutions apart:
    # the related pairs (8 + both reads' errors) overlap the same-strand tail, with a
    # trough at 22% of the peak that a 5-edit smoothing blurred away. The tail was measured
    # over both populations: a cut of 18 that joined every pair of partners.
    rng = np.random.default_rng(12)
    same, related = rng.poisson(4, 15000), 8 + rng.poisson(3.5, 12000)
    d = np.concatenate([same, related, rng.normal(79, 4, 8000).round()]).astype(np.int64)
    t = estimate_threshold(d, 150)
    assert t.source == "data" and t.rule in ("trough", "related") and t.same_peak == 4
    assert 5 <= t.max_dist <= 7 and t.related_trough in range(6, 10)
    assert (related <= t.max_dist).mean() < 0.002
    assert "related designs" in t.describe()
    # The same at high coverage, with no unrelated pair in the sample.
    deep = estimate_threshold(np.concatenate([same, related]), 150)
    assert deep.unrelated_peak is None and 5 <= deep.max_dist <= 7, deep


def test_pairs_with_a_read_that_lost_its_end_are_no_related_designs():
    # Illumina rates (~1.5 edits a pair) and reads that lost ~10 of their 150 bases: such
    # a pair lies as far apart as the bases lost, a population of its own, which looked
    # like related designs and cut the threshold to 8 (simulated runs with truncated
    # reads: A_0.9 0.85 against 0.93). Related designs are looked for among pairs of equal
    # lengths only.
    rng = np.random.default_rng(14)
    lost = 8 + rng.poisson(2, 4000)
    d = np.concatenate([rng.poisson(1.5, 12000), lost + rng.poisson(1.5, 4000),
                        rng.normal(79, 4, 8000).round()]).astype(np.int64)
    longer = np.full(len(d), 150)
    shorter = np.concatenate([np.full(12000, 150), 150 - lost, np.full(8000, 150)])
    t = estimate_threshold(d, 150, longer, shorter)
    assert t.related_trough is None and t.rule == "tail" and t.max_dist >= 15, t
    # Without the lengths, every pair counts as of equal lengths: they look related.
    assert estimate_threshold(d, 150).related_trough is not None


def test_a_small_sample_shows_no_related_designs_by_chance():
    # The first 2,000 reads of a real run: ~300 same-strand pairs at a few edits, their
    # bins a few pairs each. Their noise made a "related population" at 5 edits, and the
    # rescue's bound fell from halfway to the unrelated peak to the cut.
    for seed in range(20):
        rng = np.random.default_rng(seed)
        same = rng.poisson(3, 300)
        tail = rng.random(300) < 0.25
        same[tail] += rng.geometric(0.2, tail.sum())
        d = np.concatenate([same, rng.normal(52, 4, 12000).round()]).astype(np.int64)
        t = estimate_threshold(d, 145)
        assert t.related_trough is None, (seed, t)
        assert t.rescue_rate * 145 == (t.max_dist + t.unrelated_peak) / 2


def test_related_designs_past_the_valley_bound_the_rescue_not_the_cut():
    # Partners 40 substitutions apart at nanopore rates (the histogram of 2,000 such
    # designs): same-strand pairs ~16 edits apart, partners' ~49, unrelated ~79. The cut
    # is below the partners, but the rescue's bound, halfway to the unrelated peak (54),
    # was past them: reads of strands read once or twice went to their partners' clusters.
    rng = np.random.default_rng(15)
    same = rng.poisson(16, 60000)
    related = rng.normal(49, 3.5, 6000).round()
    unrelated = rng.normal(79, 4, 60000).round()
    t = estimate_threshold(np.concatenate([same, related, unrelated]).astype(np.int64), 150)
    alone = estimate_threshold(np.concatenate([same, unrelated]).astype(np.int64), 150)
    assert t.rule == alone.rule == "tail" and t.max_dist == alone.max_dist
    assert alone.related_trough is None and t.related_trough in range(30, 41), t
    bound = t.rescue_rate * 150
    assert t.max_dist < bound <= (t.max_dist + t.related_trough) / 2
    assert (related <= bound).mean() < 0.001
    assert f"related designs beyond a trough at {t.related_trough} edits" in t.describe()


def test_a_flat_floor_before_the_unrelated_peak_is_no_related_population():
    # A real run (ldpc-exp7): a few pairs at every distance between the same-strand tail
    # and the unrelated pairs' rising side. Nothing there falls again before the unrelated
    # peak: the rescue's bound stays halfway to it (the rescue is 0.98 against 0.64 there).
    rng = np.random.default_rng(16)
    same = rng.poisson(3, 30000)
    tail = rng.random(30000) < 0.3
    same[tail] += rng.geometric(0.25, tail.sum())
    floor = rng.integers(22, 41, 200)
    unrelated = rng.normal(52, 3, 200000).round()
    t = estimate_threshold(np.concatenate([same, floor, unrelated]).astype(np.int64), 149)
    assert t.related_trough is None and t.rule == "tail", t
    assert abs(t.rescue_rate * 149 - (t.max_dist + t.unrelated_peak) / 2) < 1e-9
