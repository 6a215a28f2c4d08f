"""Per-call timers: CUDA events after a synchronize on GPU, ``time.perf_counter`` on CPU.

Both return milliseconds. ``time_batch`` times ``calls`` back-to-back calls as one sample
(for launch-bound graphs, where one call is below the timers' resolution).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


class Timer:
    """Times calls on ``device``; ``name`` is recorded in the JSON document."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.name = "cuda_events" if self.cuda else "perf_counter"
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def time_call(self, fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
        """Milliseconds of one call ``fn(*args)``, and its result."""
        return self.time_batch(fn, 1, *args)

    def time_batch(self, fn: Callable[..., Any], calls: int, *args: Any) -> tuple[float, Any]:
        """Milliseconds of ``calls`` back-to-back calls ``fn(*args)``, and the last result."""
        assert calls >= 1
        self.synchronize()
        if self.cuda:
            self._start.record()
            for _ in range(calls):
                out = fn(*args)
            self._end.record()
            self._end.synchronize()
            return self._start.elapsed_time(self._end), out
        start = time.perf_counter()
        for _ in range(calls):
            out = fn(*args)
        return (time.perf_counter() - start) * 1e3, out
