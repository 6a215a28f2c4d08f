"""What the round-trip scripts report: their compiled and eager outputs saved with torch.save to
argv[1], and the compilation counters as JSON on the last stdout line."""

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from magi_compiler import compilation_counter


def report(outputs: Any, eager: Any) -> None:
    torch.save({"outputs": outputs, "eager": eager}, sys.argv[1])
    print(json.dumps(dataclasses.asdict(compilation_counter)))


def run_and_report(compiled: Callable[..., Any], eager: Callable[..., Any], calls: Sequence[tuple]) -> None:
    """Calls `compiled` and then `eager` with each argument tuple of `calls`, in order, without grad."""
    with torch.no_grad():
        outputs = [compiled(*args) for args in calls]
        expected = [eager(*args) for args in calls]
    report(outputs, expected)
