"""results.json: round trip, strict validation, JUnit XML conversion."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reviewbot.results import BenchFigure, Environment, RegressionResults, SuiteResult, TestResult, is_gpu_only_skip
from reviewbot.results.junit import case_id, node_id, parse_junit_xml

SHA = "0123456789abcdef0123456789abcdef01234567"


def _sample() -> RegressionResults:
    return RegressionResults(
        revision=SHA,
        request_id="req-42",
        pr_number=7,
        started_at="2026-12-03T06:00:00+00:00",
        finished_at="2026-12-03T06:05:00+00:00",
        environment=Environment(
            python="3.11.7",
            platform="Linux-x86_64",
            torch="2.11.0+cu128",
            cuda="12.8",
            gpu_model="NVIDIA H200",
            gpu_count=1,
            driver="570.124.06",
        ),
        suites=(
            SuiteResult(
                name="timing",
                status="passed",
                duration_s=12.5,
                gpus=1,
                failure_meaning="entry points slower than torch.compile",
                junit_xml="suites/timing.xml",
                log="suites/timing.log",
                tests=(
                    TestResult("tests/regression/test_timing_bench.py::test_t", "passed", 11.0),
                    TestResult("tests/regression/test_timing_bench.py::test_g", "skipped", 0.0, "needs CUDA", True),
                ),
                bench=(BenchFigure("class_median", 1.25, "ms", None),),
            ),
            SuiteResult(
                name="fsdp", status="not-run", duration_s=0.0, gpus=2, detail="needs 2 GPU(s), this machine has 1"
            ),
        ),
    )


def test_round_trip_through_json_text_and_file(tmp_path: Path) -> None:
    results = _sample()
    again = RegressionResults.loads(results.dumps())
    assert again == results
    path = tmp_path / "results.json"
    results.write(path)
    assert RegressionResults.read(path) == results
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1
    assert list(data)[:4] == ["schema_version", "revision", "request_id", "pr_number"]
    assert data["suites"][0]["tests"][1] == {
        "id": "tests/regression/test_timing_bench.py::test_g",
        "status": "skipped",
        "duration_s": 0.0,
        "message": "needs CUDA",
        "gpu_only": True,
    }
    assert data["environment"]["gpu_model"] == "NVIDIA H200"


def test_verdict_and_summary() -> None:
    results = _sample()
    assert not results.passed  # a not-run suite is never a pass
    assert results.summary() == (
        "2 suites: 1 passed, 1 not-run; tests 1 passed, 0 failed, 0 error, 1 skipped (1 GPU-only skips)"
    )
    only_passing = RegressionResults.loads(results.dumps().replace('"not-run"', '"passed"'))
    assert only_passing.passed
    empty = RegressionResults(SHA, "a", "b", results.environment, ())
    assert not empty.passed


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema_version=2), "schema_version: 2 is not supported"),
        (lambda d: d.update(revision="HEAD"), "not a full 40-hex commit sha"),
        (lambda d: d.update(surprise=1), "results: unknown key(s) surprise"),
        (lambda d: d.pop("environment"), "results.environment: missing"),
        (lambda d: d["environment"].update(gpu_count="1"), "results.environment.gpu_count: expected int, got str"),
        (lambda d: d["environment"].update(gpu_count=True), "gpu_count: expected int, got bool"),
        (lambda d: d["suites"][0].update(status="ok"), "'ok' is not one of passed, failed, error, timeout, not-run"),
        (
            lambda d: d["suites"][0]["tests"][0].update(status="xpass"),
            "results.suites[0].tests[0].status: 'xpass' is not one of",
        ),
        (lambda d: d["suites"][0]["tests"][0].update(gpu_only=True), "gpu_only is only meaningful for a skipped test"),
        (lambda d: d["suites"][0]["tests"][0].update(status="failed"), "marked passed but has failed or errored tests"),
        (lambda d: d["suites"][0]["bench"][0].update(value="fast"), "results.suites[0].bench[0].value: expected"),
        (lambda d: d["suites"].append(dict(d["suites"][0])), "duplicate suite names"),
    ],
)
def test_reader_rejects_malformed_results(mutate, message: str) -> None:
    data = _sample().to_dict()
    mutate(data)
    with pytest.raises(ValueError, match=re.escape(message)):
        RegressionResults.from_dict(data)


def test_reader_rejects_non_json() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        RegressionResults.loads(b"{not json")


def test_gpu_only_skip_reasons() -> None:
    assert is_gpu_only_skip("GPU-only: the stability bound is checked on CUDA")
    assert is_gpu_only_skip("requires CUDA")
    assert is_gpu_only_skip("needs NCCL")
    assert not is_gpu_only_skip("flaky on macOS")
    assert not is_gpu_only_skip("debugging")  # 'gpu' only as a word
    assert not is_gpu_only_skip(None)


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="2" tests="5" time="3.2">
<properties><property name="bench.warm_start_speedup" value="6.5 x"/><property name="other" value="y"/></properties>
<testcase classname="tests.regression.test_timing_bench" name="test_cpu_contract" time="2.5">
  <properties><property name="bench.median_ms" value="1.75"/></properties>
</testcase>
<testcase classname="tests.regression.test_timing_bench.TestGpu" name="test_bound" time="0.001">
  <skipped type="pytest.skip" message="stability bound max/min &lt; 1.2 is GPU-only">skip</skipped>
</testcase>
<testcase classname="tests.regression.test_aot" name="test_windows" time="0">
  <skipped type="pytest.skip" message="not on this platform"/>
</testcase>
<testcase classname="tests.regression.test_aot" name="test_fallback" time="0.3">
  <failure message="AssertionError: fell back to JIT">Traceback line 1
AssertionError: fell back to JIT</failure>
</testcase>
<testcase classname="tests.regression.test_aot" name="test_setup" time="0.1">
  <error message="failed on setup with &quot;RuntimeError: boom&quot;">fixture trace</error>
</testcase>
</testsuite></testsuites>
"""


def test_junit_xml_conversion(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(JUNIT)
    tests, bench = parse_junit_xml(path)
    assert [(t.id, t.status, t.gpu_only) for t in tests] == [
        ("tests/regression/test_timing_bench.py::test_cpu_contract", "passed", False),
        ("tests/regression/test_timing_bench.py::TestGpu::test_bound", "skipped", True),
        ("tests/regression/test_aot.py::test_windows", "skipped", False),
        ("tests/regression/test_aot.py::test_fallback", "failed", False),
        ("tests/regression/test_aot.py::test_setup", "error", False),
    ]
    assert tests[0].duration_s == 2.5
    assert tests[1].message == "stability bound max/min < 1.2 is GPU-only"
    assert tests[3].message == "Traceback line 1\nAssertionError: fell back to JIT"
    assert tests[4].message == 'failed on setup with "RuntimeError: boom"\nfixture trace'
    assert bench == [
        BenchFigure("warm_start_speedup", 6.5, "x", None),
        BenchFigure("median_ms", 1.75, None, "tests/regression/test_timing_bench.py::test_cpu_contract"),
    ]


def test_junit_xml_bare_testsuite_and_errors(tmp_path: Path) -> None:
    bare = tmp_path / "bare.xml"
    bare.write_text('<testsuite name="x"><testcase classname="a.b" name="c" time="1"/></testsuite>')
    assert [t.id for t in parse_junit_xml(bare)[0]] == ["a/b.py::c"]
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites><testsuite>")
    with pytest.raises(ValueError, match="not valid JUnit XML"):
        parse_junit_xml(broken)
    wrong_root = tmp_path / "html.xml"
    wrong_root.write_text("<html/>")
    with pytest.raises(ValueError, match="root element is <html>"):
        parse_junit_xml(wrong_root)
    bad_figure = tmp_path / "fig.xml"
    bad_figure.write_text('<testsuite><properties><property name="bench.x" value="fast"/></properties></testsuite>')
    with pytest.raises(ValueError, match="non-numeric value 'fast'"):
        parse_junit_xml(bad_figure)


def test_node_id_from_classname() -> None:
    assert node_id("tests.regression.test_graph_hash", "test_a") == "tests/regression/test_graph_hash.py::test_a"
    assert node_id("tests.x.test_m.TestC.TestInner", "t") == "tests/x/test_m.py::TestC::TestInner::t"
    assert node_id("", "t") == "t"
    # a module named on the command line whose file name does not look like a test (depyf's tests/test.py)
    assert node_id("tests.test", "test_LOAD_CONST") == "tests/test.py::test_LOAD_CONST"
    assert node_id("tests.checks.TestLoad", "t") == "tests/checks.py::TestLoad::t"
    assert node_id("TestOnly", "t") == "TestOnly::t"


def test_a_module_that_failed_to_be_collected_is_named_by_its_file() -> None:
    # pytest's JUnit report of an import error in tests/convert/test_hf.py
    uncollected = ET.fromstring(
        '<testcase classname="" name="tests.convert.test_hf" time="0">'
        "<error message=\"collection failure\">E   ModuleNotFoundError: No module named 'x'</error></testcase>"
    )
    assert case_id(uncollected) == "tests/convert/test_hf.py"
    failed = ET.fromstring('<testcase classname="" name="t"><error message="boom">E  x</error></testcase>')
    assert case_id(failed) == "t"
    passed = ET.fromstring('<testcase classname="tests.test_a" name="test_b"/>')
    assert case_id(passed) == "tests/test_a.py::test_b"
