"""Summary statistics of timing samples and the comparisons between contenders.

Speedup vs eager is ``eager_median / median`` (above 1: faster than eager); the ratio vs
``torch.compile`` is ``median / torch_compile_median`` (below 1: faster than torch.compile;
the H200 target is <= 1.03). Medians, not means, so one preempted sample cannot move them.

Stability: the samples, in time order, are cut into ``STABILITY_BLOCKS`` consecutive blocks
of many calls; ``block_median_spread`` is the largest block median over the smallest, and
``block_p25_spread`` the same for the blocks' lower quartiles. One call preempted by the
scheduler moves a single sample's max/min but not a block median; a program whose calls
drift or stall (recompiles, re-recorded graphs, allocator growth, a collection every few
calls) moves the block medians, and a drift that slows most calls moves the lower quartiles
too, which a shared CPU's bursts of load (slowing part of a block's calls) leave alone.
:func:`relative_block_p25_spread` divides each block's lower quartile by the eager
reference's in the same rounds, which also cancels load that slows a whole stretch of rounds.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

STABILITY_BLOCKS = 4


@dataclasses.dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    min: float
    max: float
    max_over_min: float
    stdev: float
    p10: float
    p90: float
    blocks: int
    block_median_spread: float
    block_p25_spread: float

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks."""
    if not samples:
        raise ValueError("percentile of an empty sample list")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within [0, 100], got {q}")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> tuple[float, float, float]:
    """The per-round ratios ``numerator[i] / denominator[i]`` (samples of one round are paired):
    their median, 10th and 90th percentile. The lists must be equally long and not empty."""
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True)]
    return statistics.median(ratios), percentile(ratios, 10), percentile(ratios, 90)


def blocks(samples: Sequence[float], count: int = STABILITY_BLOCKS) -> list[Sequence[float]]:
    """``samples`` cut into ``count`` consecutive blocks of equal size (the remainder of the
    division is dropped from the end; fewer samples than ``count`` make one block each)."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not samples:
        raise ValueError("blocks of an empty sample list")
    count = min(count, len(samples))
    size = len(samples) // count
    return [samples[i * size : (i + 1) * size] for i in range(count)]


def _spread(values: Sequence[float]) -> float:
    return max(values) / min(values)


def relative_block_p25_spread(samples: Sequence[float], reference: Sequence[float]) -> float:
    """The spread over blocks of (block lower quartile / the reference's block lower quartile),
    for two sample lists timed in the same interleaved rounds: load that slows every contender
    in the same stretch of rounds cancels, a drift of the contender's own calls does not."""
    if len(samples) != len(reference):
        raise ValueError(f"need samples of the same rounds, got {len(samples)} and {len(reference)}")
    ratios = [
        percentile(own, 25) / percentile(ref, 25) for own, ref in zip(blocks(samples), blocks(reference), strict=True)
    ]
    return _spread(ratios)


def summarize(samples: Sequence[float]) -> Summary:
    """Summary of positive timing samples in time order; ``ValueError`` on an empty list or a sample <= 0."""
    if not samples:
        raise ValueError("cannot summarize an empty sample list")
    if min(samples) <= 0:
        raise ValueError(f"timing samples must be positive, got min {min(samples)}")
    cut = blocks(samples)
    return Summary(
        n=len(samples),
        median=statistics.median(samples),
        mean=statistics.fmean(samples),
        min=min(samples),
        max=max(samples),
        max_over_min=max(samples) / min(samples),
        stdev=statistics.stdev(samples) if len(samples) > 1 else 0.0,
        p10=percentile(samples, 10),
        p90=percentile(samples, 90),
        blocks=len(cut),
        block_median_spread=_spread([statistics.median(block) for block in cut]),
        block_p25_spread=_spread([percentile(block, 25) for block in cut]),
    )


def speedup(reference: Summary, contender: Summary) -> float:
    """How many times faster than ``reference`` the contender's median is."""
    return reference.median / contender.median


def ratio(contender: Summary, baseline: Summary) -> float:
    """The contender's median over the baseline's median (1.03 = 3% slower)."""
    return contender.median / baseline.median
