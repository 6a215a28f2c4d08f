"""Prometheus metrics in the text exposition format (no client library needed).

Each process counts its own; a worker stores a `snapshot` with each heartbeat (table `workers`),
and `/metrics` of `reviewbot serve` renders the sum of its own and every recorded worker's
snapshot: the service's totals, workers' counts as of their last heartbeat.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

_LOCK = threading.Lock()
DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

_HELP = {
    "reviewbot_webhook_deliveries_total": ("counter", "Webhook deliveries by event and outcome"),
    "reviewbot_deliveries_processed_total": ("counter", "Deliveries turned into jobs, by event and outcome"),
    "reviewbot_github_api_calls_total": ("counter", "GitHub API calls by operation and result"),
    "reviewbot_github_api_retries_total": ("counter", "GitHub API retries by operation and reason"),
    "reviewbot_jobs_total": ("counter", "Finished jobs by kind and final state"),
    "reviewbot_job_duration_seconds": ("histogram", "Job run time by kind"),
}
_counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(lambda: defaultdict(float))
_histograms: dict[str, dict[tuple[tuple[str, str], ...], list[float]]] = defaultdict(dict)


def inc(name: str, amount: float = 1.0, **labels: str) -> None:
    assert name in _HELP and _HELP[name][0] == "counter", name
    with _LOCK:
        _counters[name][tuple(sorted(labels.items()))] += amount


def observe(name: str, value: float, **labels: str) -> None:
    """Histogram sample: state is [bucket counts..., +Inf count, sum]."""
    assert name in _HELP and _HELP[name][0] == "histogram", name
    key = tuple(sorted(labels.items()))
    with _LOCK:
        state = _histograms[name].setdefault(key, [0.0] * (len(DURATION_BUCKETS) + 2))
        state[bisect.bisect_left(DURATION_BUCKETS, value)] += 1
        state[-1] += value


def _labels(key: tuple[tuple[str, str], ...], extra: str = "") -> str:
    parts = [f'{k}="{v}"' for k, v in key] + ([extra] if extra else [])
    return "{" + ",".join(parts) + "}" if parts else ""


Snapshot = dict[str, Any]


def snapshot() -> Snapshot:
    """This process's counters and histograms as JSON-able data (what `render` merges)."""
    with _LOCK:
        return {
            "counters": {
                name: [[list(map(list, key)), value] for key, value in series.items()]
                for name, series in _counters.items()
            },
            "histograms": {
                name: [[list(map(list, key)), list(state)] for key, state in series.items()]
                for name, series in _histograms.items()
            },
        }


def render(others: Iterable[Snapshot] = ()) -> str:
    """This process's metrics plus those of `others` (snapshots of other processes), summed per series."""
    counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(lambda: defaultdict(float))
    histograms: dict[str, dict[tuple[tuple[str, str], ...], list[float]]] = defaultdict(dict)
    for snap in [snapshot(), *others]:
        for name, series in snap.get("counters", {}).items():
            for key, value in series:
                counters[name][tuple(tuple(pair) for pair in key)] += value
        for name, series in snap.get("histograms", {}).items():
            for key, state in series:
                total = histograms[name].setdefault(tuple(tuple(pair) for pair in key), [0.0] * len(state))
                for index, value in enumerate(state):
                    total[index] += value
    lines: list[str] = []
    for name, (kind, help_text) in _HELP.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        if kind == "counter":
            for key, value in sorted(counters[name].items()):
                lines.append(f"{name}{_labels(key)} {value:g}")
            continue
        for key, state in sorted(histograms[name].items()):
            cumulative = 0.0
            for bound, count in zip((*DURATION_BUCKETS, "+Inf"), state[:-1], strict=True):
                cumulative += count
                le = f'le="{bound}"'
                lines.append(f"{name}_bucket{_labels(key, le)} {cumulative:g}")
            lines.append(f"{name}_count{_labels(key)} {cumulative:g}")
            lines.append(f"{name}_sum{_labels(key)} {state[-1]:g}")
    return "\n".join(lines) + "\n"
