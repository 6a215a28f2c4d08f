"""Statistics of the timing bench: summaries, percentiles and the two comparisons."""

import math

import pytest

from magi_bench import stats


def test_summarize_known_samples():
    summary = stats.summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert summary.n == 5
    assert summary.median == 3.0
    assert summary.mean == 3.0
    assert (summary.min, summary.max) == (1.0, 5.0)
    assert summary.max_over_min == 5.0
    assert math.isclose(summary.stdev, math.sqrt(2.5))
    assert math.isclose(summary.p10, 1.4)
    assert math.isclose(summary.p90, 4.6)
    assert set(summary.as_dict()) == {
        "n",
        "median",
        "mean",
        "min",
        "max",
        "max_over_min",
        "stdev",
        "p10",
        "p90",
        "blocks",
        "block_median_spread",
        "block_p25_spread",
    }


def test_summarize_even_count_median_and_single_sample():
    assert stats.summarize([1.0, 2.0, 3.0, 10.0]).median == 2.5
    single = stats.summarize([7.0])
    assert (single.median, single.max_over_min, single.stdev, single.p10, single.p90) == (7.0, 1.0, 0.0, 7.0, 7.0)


@pytest.mark.parametrize("samples", [[], [1.0, 0.0], [2.0, -1.0]])
def test_summarize_rejects_empty_or_non_positive(samples):
    with pytest.raises(ValueError):
        stats.summarize(samples)


def test_percentile_bounds_and_interpolation():
    assert stats.percentile([10.0, 20.0], 0) == 10.0
    assert stats.percentile([10.0, 20.0], 100) == 20.0
    assert stats.percentile([10.0, 20.0], 25) == 12.5
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)
    with pytest.raises(ValueError):
        stats.percentile([], 50)


def test_speedup_and_ratio_use_medians():
    eager = stats.summarize([10.0, 10.0, 100.0])
    compiled = stats.summarize([5.0, 5.0, 1.0])
    baseline = stats.summarize([4.0, 4.0, 4.0])
    assert stats.speedup(eager, compiled) == 2.0
    assert stats.ratio(compiled, baseline) == 1.25


def test_block_spreads_ignore_single_outliers_but_not_drift():
    steady = [1.0] * 40
    steady[7] = steady[23] = 50.0  # two preempted calls
    summary = stats.summarize(steady)
    assert summary.max_over_min == 50.0
    assert (summary.blocks, summary.block_median_spread, summary.block_p25_spread) == (4, 1.0, 1.0)
    drifting = [1.0 + i // 10 * 0.25 for i in range(40)]  # every block 25% slower than the last
    assert [list(b) for b in stats.blocks(drifting)] == [[1.0 + k * 0.25] * 10 for k in range(4)]
    assert stats.summarize(drifting).block_median_spread == 1.75
    assert stats.summarize(drifting).block_p25_spread == 1.75
    # a burst of load slowing 6 of 10 calls of one block moves its median, not its lower quartile
    burst = [1.0] * 30 + [1.0] * 4 + [3.0] * 6
    assert stats.summarize(burst).block_median_spread == 3.0
    assert stats.summarize(burst).block_p25_spread == 1.0
    assert [list(b) for b in stats.blocks([3.0, 1.0], count=4)] == [[3.0], [1.0]]
    assert [len(b) for b in stats.blocks(list(range(1, 26)), count=4)] == [6, 6, 6, 6]
    with pytest.raises(ValueError):
        stats.blocks([1.0], count=0)


def test_relative_block_p25_spread_cancels_shared_load():
    reference = [1.0] * 20 + [2.0] * 20  # the machine slowed down halfway through
    slowed_alike = [0.5] * 20 + [1.0] * 20
    assert stats.summarize(slowed_alike).block_p25_spread == 2.0
    assert stats.relative_block_p25_spread(slowed_alike, reference) == 1.0
    own_drift = [0.5] * 30 + [1.5] * 10
    assert stats.relative_block_p25_spread(own_drift, [1.0] * 40) == 3.0
    with pytest.raises(ValueError, match="same rounds"):
        stats.relative_block_p25_spread([1.0], [1.0, 2.0])
