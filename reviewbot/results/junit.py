"""JUnit XML (as pytest writes it) to `TestResult`s and bench figures: the one JUnit reader.

Used by the suite runner and by `ci/run_regression.py`. Standard library (`xml.etree`) only, so
that the runner works on GPU machines without the bot's extras. Accepts a `<testsuites>` root or a
bare `<testsuite>`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from reviewbot.results.schema import BenchFigure, TestResult, is_gpu_only_skip

BENCH_PREFIX = "bench."
_NUMBER_AND_UNIT = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S.*)?")
# A traceback frame location as pytest prints it: `path/to/file.py:35: AssertionError` (long) or
# `path/to/file.py:35: in test_x` (short).
_FRAME = re.compile(r"^(?P<path>[^\s:][^:\n]*\.py):(?P<line>\d+):(?: |$)", re.MULTILINE)
EXCERPT_LINES = 30


def node_id(classname: str, name: str) -> str:
    """Rebuild pytest's node id from JUnit's dotted classname: ``tests.x.test_a.TestC`` + ``t`` ->
    ``tests/x/test_a.py::TestC::t``. Parts after the first ``test_*`` module part are classes.
    Without such a part (a module the command names whose file name does not look like a test,
    ``tests/test.py``), the parts before the first ``Test*`` class part (pytest's default class
    prefix), or all of them, are the module: ``tests.test`` + ``t`` -> ``tests/test.py::t``."""
    parts = classname.split(".") if classname else []
    for i, part in enumerate(parts):
        if part.startswith("test_") or part.endswith("_test"):
            module = "/".join(parts[: i + 1]) + ".py"
            return "::".join([module, *parts[i + 1 :], name])
    end = next((i for i, part in enumerate(parts) if part.startswith("Test")), len(parts))
    if end == 0:
        return "::".join([*parts, name]) if parts else name
    return "::".join(["/".join(parts[:end]) + ".py", *parts[end:], name])


COLLECTION_FAILURE = "collection failure"


def case_id(case: ET.Element) -> str:
    """The pytest node id of a JUnit ``testcase``: `node_id`, except for a module that failed to
    be collected (pytest reports it with an empty classname, the module's dotted path as name and
    an error whose message is ``collection failure``): its file, ``tests/x/test_a.py``, which
    pytest accepts as a node id to run again."""
    classname, name = case.get("classname", ""), case.get("name", "")
    error = case.find("error")
    if not classname and name and error is not None and error.get("message") == COLLECTION_FAILURE:
        return name.replace(".", "/") + ".py"
    return node_id(classname, name)


def _parse_figure(name: str, raw: str, where: str, test: str | None) -> BenchFigure:
    match = _NUMBER_AND_UNIT.fullmatch(raw)
    if match is None:
        raise ValueError(f"{where}: bench property {name!r} has a non-numeric value {raw!r}")
    return BenchFigure(name=name[len(BENCH_PREFIX) :], value=float(match.group(1)), unit=match.group(2), test_id=test)


def _bench_properties(element: ET.Element, where: str, test: str | None) -> list[BenchFigure]:
    figures = []
    for prop in element.findall("./properties/property"):
        name = prop.get("name", "")
        if name.startswith(BENCH_PREFIX):
            figures.append(_parse_figure(name, prop.get("value", ""), where, test))
    return figures


def _testcase(case: ET.Element) -> TestResult:
    tid = case_id(case)
    duration = float(case.get("time") or 0.0)
    for tag, status in (("failure", "failed"), ("error", "error")):
        node = case.find(tag)
        if node is not None:
            summary, body = node.get("message") or "", node.text or ""
            return TestResult(
                id=tid,
                status=status,
                duration_s=duration,
                message=failure_excerpt(summary, body),
                line=failing_line(body, tid.split("::")[0] if "::" in tid else ""),
                summary=summary,
            )
    skipped = case.find("skipped")
    if skipped is not None:
        reason = skipped.get("message") or (skipped.text or "").strip() or None
        return TestResult(
            id=tid, status="skipped", duration_s=duration, message=reason, gpu_only=is_gpu_only_skip(reason)
        )
    return TestResult(id=tid, status="passed", duration_s=duration)


def failure_excerpt(message: str | None, body: str, tail_lines: int = EXCERPT_LINES) -> str | None:
    """One test's failure message plus the last `tail_lines` lines of its own traceback (JUnit body).

    The review quotes this per test, so every failure shows its own output, not the suite log's end.
    """
    assert tail_lines > 0, tail_lines
    body = body.strip()
    if not body:
        return message or None
    tail = "\n".join(body.splitlines()[-tail_lines:])
    return f"{message}\n{tail}" if message and message not in tail else tail


def failing_line(body: str, path: str) -> int:
    """The line of the deepest traceback frame in `path` (repo-relative, as pytest prints it), 0 if
    the traceback names no frame in that file."""
    lines = [int(m.group("line")) for m in _FRAME.finditer(body) if m.group("path").strip() == path]
    return lines[-1] if lines else 0


def parse_junit_xml(path: Path) -> tuple[list[TestResult], list[BenchFigure]]:
    """Tests and bench figures of one JUnit XML report. Raises ValueError on a malformed report."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ValueError(f"{path}: not valid JUnit XML: {exc}") from exc
    if root.tag == "testsuites":
        suites = root.findall("testsuite")
    elif root.tag == "testsuite":
        suites = [root]
    else:
        raise ValueError(f"{path}: root element is <{root.tag}>, expected <testsuites> or <testsuite>")
    tests: list[TestResult] = []
    bench: list[BenchFigure] = []
    for suite in suites:
        bench.extend(_bench_properties(suite, str(path), None))
        for case in suite.iter("testcase"):
            result = _testcase(case)
            tests.append(result)
            bench.extend(_bench_properties(case, str(path), result.id))
    return tests, bench
