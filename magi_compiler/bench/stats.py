"""Summary statistics of timing samples and the comparisons between contenders.

Speedup vs eager is ``eager_median / median`` (above 1: faster than eager); the ratio vs
``torch.compile`` is ``median / torch_compile_median`` (below 1: faster than torch.compile;
the H200 target is <= 1.03). Medians, not means, so one preempted sample cannot move them.

Stability is ``block_median_spread``: the samples, in time order, are cut into consecutive
blocks of ``STABILITY_BLOCK`` calls, and the spread is the largest block median over the
smallest. One call preempted by the scheduler moves a single sample's max/min but not a
block median; a program whose calls drift or stall periodically (recompiles, re-recorded
graphs, allocator growth, a collection every N calls) moves the block medians.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

STABILITY_BLOCK = 10


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


def block_medians(samples: Sequence[float], block: int = STABILITY_BLOCK) -> list[float]:
    """Medians of consecutive blocks of ``block`` samples (a last partial block is dropped;
    fewer than ``block`` samples make one block of all of them)."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    if not samples:
        raise ValueError("block medians of an empty sample list")
    count = max(1, len(samples) // block)
    size = min(block, len(samples))
    return [statistics.median(samples[i * size : (i + 1) * size]) for i in range(count)]


def summarize(samples: Sequence[float]) -> Summary:
    """Summary of positive timing samples in time order; ``ValueError`` on an empty list or a sample <= 0."""
    if not samples:
        raise ValueError("cannot summarize an empty sample list")
    if min(samples) <= 0:
        raise ValueError(f"timing samples must be positive, got min {min(samples)}")
    medians = block_medians(samples)
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
        blocks=len(medians),
        block_median_spread=max(medians) / min(medians),
    )


def speedup(reference: Summary, contender: Summary) -> float:
    """How many times faster than ``reference`` the contender's median is."""
    return reference.median / contender.median


def ratio(contender: Summary, baseline: Summary) -> float:
    """The contender's median over the baseline's median (1.03 = 3% slower)."""
    return contender.median / baseline.median
