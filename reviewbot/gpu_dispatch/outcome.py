"""A `results.json` as the service's `GpuOutcome`: the state of `reviewbot/gpu-regression` and the
summary's "GPU regression suites" section.

State: ``success`` only when every suite passed; ``failure`` when a suite failed (a test failed);
``error`` when a suite errored, timed out or could not run and none failed. GPU-only skips are
listed, so a run on a machine without CUDA never reads as a full GPU pass.
"""

from __future__ import annotations

from typing import Any

from reviewbot.results import RegressionResults, SuiteResult
from reviewbot.service.gpu_dispatch import GpuOutcome

MAX_FAILURES_SHOWN = 10
MESSAGE_LINES = 12


def outcome_state(results: RegressionResults) -> str:
    statuses = {s.status for s in results.suites}
    if results.passed:
        return "success"
    if "failed" in statuses:
        return "failure"
    return "error"


def _cell(text: str | None) -> str:
    return (text or "").splitlines()[0].replace("|", "/") if text else ""


def _environment_line(results: RegressionResults) -> str:
    env = results.environment
    if env.gpu_count:
        where = f"{env.gpu_count}x {env.gpu_model or 'GPU'}, driver {env.driver or '?'}, CUDA {env.cuda or '?'}"
    else:
        where = "no GPU (CPU run: GPU-only assertions skipped)"
    return f"torch {env.torch or '?'}, {where}, Python {env.python}"


def _suite_row(suite: SuiteResult) -> str:
    counts = f"{suite.count('passed')}/{len(suite.tests)} passed"
    if suite.count("failed") or suite.count("error"):
        counts += f", {suite.count('failed') + suite.count('error')} failing"
    if suite.gpu_only_skips:
        counts += f", {len(suite.gpu_only_skips)} GPU-only skipped"
    return f"| `{suite.name}` | {suite.status} | {counts} | {suite.duration_s:.1f}s | {_cell(suite.detail)} |"


def _failures(results: RegressionResults) -> list[str]:
    lines: list[str] = []
    failing = [(s, t) for s in results.suites for t in s.tests if t.status in ("failed", "error")]
    for suite, test in failing[:MAX_FAILURES_SHOWN]:
        meaning = f" ({suite.failure_meaning})" if suite.failure_meaning else ""
        lines.append(f"- **P0-BLOCKER** `{test.id}` {test.status}{meaning}")
        if test.message:
            tail = "\n".join(test.message.splitlines()[-MESSAGE_LINES:])
            lines.append("  ```\n  " + tail.replace("\n", "\n  ") + "\n  ```")
    if len(failing) > MAX_FAILURES_SHOWN:
        lines.append(f"- ... and {len(failing) - MAX_FAILURES_SHOWN} more failing test(s); see the run's artifact.")
    for suite in results.suites:
        if suite.status in ("error", "timeout", "not-run"):
            lines.append(
                f"- Suite `{suite.name}` {suite.status.replace('-', ' ')}: {_cell(suite.detail) or 'no detail'}"
            )
    return lines


def markdown(results: RegressionResults, source: str) -> str:
    """The summary section. `source` says where it ran (a link to the Actions run, or "this worker")."""
    verdict = {"success": "all suites passed", "failure": "a suite failed", "error": "a suite could not run"}
    lines = [
        f"{source} at `{results.revision[:12]}`: **{verdict[outcome_state(results)]}**.",
        f"<sub>{_environment_line(results)}</sub>",
        "",
        "| suite | status | tests | time | note |",
        "| --- | --- | --- | --- | --- |",
        *(_suite_row(s) for s in results.suites),
    ]
    if not results.suites:
        lines.append("| (none) | error | no suite selected | | |")
    problems = _failures(results)
    if problems:
        lines += ["", *problems]
    gpu_only = [t for s in results.suites for t in s.gpu_only_skips]
    if gpu_only:
        lines += ["", f"GPU-only checks not run here ({len(gpu_only)}): " + ", ".join(f"`{t.id}`" for t in gpu_only)]
    figures = [(s.name, b) for s in results.suites for b in s.bench]
    if figures:
        lines += ["", "| suite | bench figure | value |", "| --- | --- | --- |"]
        lines += [f"| `{name}` | {b.name} | {b.value:g}{(' ' + b.unit) if b.unit else ''} |" for name, b in figures]
    return "\n".join(lines)


def suite_records(results: RegressionResults) -> list[dict[str, Any]]:
    """One JSON-able dict per suite, stored by the service as its suite runs."""
    out = []
    for suite in results.suites:
        out.append(
            {
                "name": suite.name,
                "status": suite.status,
                "reason": suite.detail or "",
                "duration_s": suite.duration_s,
                "tests": len(suite.tests),
                "failing": [t.id for t in suite.tests if t.status in ("failed", "error")],
                "gpu_only_skipped": [t.id for t in suite.gpu_only_skips],
                "bench": {b.name: b.value for b in suite.bench},
                "revision": results.revision,
            }
        )
    return out


def outcome_from_results(results: RegressionResults, source: str) -> GpuOutcome:
    return GpuOutcome(outcome_state(results), suite_records(results), markdown(results, source))


def error_outcome(message: str) -> GpuOutcome:
    """A run that produced no usable results: the status is `error` and the summary says why."""
    return GpuOutcome("error", [], message)
