"""results.json -> the service's GpuOutcome, and reading results out of an artifact zip."""

from __future__ import annotations

import io
import zipfile

import pytest

from reviewbot.gpu_dispatch.actions import request_id_from_run
from reviewbot.gpu_dispatch.artifacts import ArtifactError, read_results
from reviewbot.gpu_dispatch.outcome import outcome_from_results
from reviewbot.results import BenchFigure, Environment, RegressionResults, SuiteResult, TestResult

SHA = "c" * 40
H200 = Environment("3.11.7", "Linux", "2.11.0+cu128", "12.8", "NVIDIA H200", 1, "570.124.06")


def _results(*suites: SuiteResult, env: Environment = H200) -> RegressionResults:
    return RegressionResults(SHA, "2026-12-03T06:00:00+00:00", "2026-12-03T06:01:00+00:00", env, suites, "r-1", 7)


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_all_passed_on_the_gpu_is_success_with_environment_and_figures():
    suite = SuiteResult(
        "timing_bench",
        "passed",
        42.0,
        gpus=1,
        tests=(TestResult("tests/regression/test_timing_bench.py::test_t", "passed", 40.0),),
        bench=(BenchFigure("class_vs_torch_compile", 0.98, "x", None),),
    )
    outcome = outcome_from_results(_results(suite), "run [5](u)")
    assert outcome.state == "success"
    assert outcome.markdown.splitlines()[:2] == [
        f"run [5](u) at `{SHA[:12]}`: **all suites passed**.",
        "<sub>torch 2.11.0+cu128, 1x NVIDIA H200, driver 570.124.06, CUDA 12.8, Python 3.11.7</sub>",
    ]
    assert "| `timing_bench` | passed | 1/1 passed | 42.0s |  |" in outcome.markdown
    assert "| `timing_bench` | class_vs_torch_compile | 0.98 x |" in outcome.markdown
    assert "GPU-only" not in outcome.markdown
    assert outcome.suites == [
        {
            "name": "timing_bench",
            "status": "passed",
            "reason": "",
            "duration_s": 42.0,
            "tests": 1,
            "failing": [],
            "gpu_only_skipped": [],
            "bench": {"class_vs_torch_compile": 0.98},
            "revision": SHA,
        }
    ]


def test_suite_that_could_not_run_is_an_error_never_a_pass():
    ran = SuiteResult("graph_hash", "passed", 1.0, tests=(TestResult("t::a", "passed", 1.0),))
    missing = SuiteResult("fsdp_skip_split", "not-run", 0.0, gpus=2, detail="needs 2 GPU(s), this machine has 1")
    outcome = outcome_from_results(_results(ran, missing), "run")
    assert outcome.state == "error"
    assert "**a suite could not run**" in outcome.markdown
    assert "- Suite `fsdp_skip_split` not run: needs 2 GPU(s), this machine has 1" in outcome.markdown
    assert outcome_from_results(_results(), "run").state == "error"  # nothing ran: not a pass


def test_a_failed_test_wins_over_errors():
    failed = SuiteResult(
        "aot_fallback",
        "failed",
        3.0,
        failure_meaning="AOT falls back to JIT in the wrong cases",
        tests=(TestResult("tests/regression/test_aot_jit_fallback.py::test_oom", "failed", 1.0, "E  OOM swallowed"),),
    )
    timeout = SuiteResult("timing_bench", "timeout", 900.0, detail="killed after the 900s time limit")
    outcome = outcome_from_results(_results(failed, timeout), "run")
    assert outcome.state == "failure"
    assert (
        "- **P0-BLOCKER** `tests/regression/test_aot_jit_fallback.py::test_oom` failed "
        "(AOT falls back to JIT in the wrong cases)" in outcome.markdown
    )
    assert "E  OOM swallowed" in outcome.markdown
    assert "- Suite `timing_bench` timeout: killed after the 900s time limit" in outcome.markdown


def test_artifact_zip_reading():
    good = _results(SuiteResult("a", "passed", 1.0, tests=(TestResult("t::a", "passed", 1.0),)))
    assert read_results(_zip({"results.json": good.dumps().encode(), "suites/a.log": b"x"})) == good
    with pytest.raises(ArtifactError, match="not a zip archive"):
        read_results(b"PK not really")
    with pytest.raises(ArtifactError, match=r"holds no results.json \(it has: suites/a.log\)"):
        read_results(_zip({"suites/a.log": b"x"}))
    with pytest.raises(ArtifactError, match="not a valid results file: results.schema_version: 9"):
        read_results(_zip({"results.json": good.dumps().replace('"schema_version": 1', '"schema_version": 9')}))
    with pytest.raises(ArtifactError, match="not a valid results file: results.json is not valid JSON"):
        read_results(_zip({"results.json": b"{"}))
    stored = _zip({"results.json": good.dumps().encode()})
    offset = stored.index(b'"schema_version"')  # stored (not deflated): flip a byte of the member's data
    corrupt = stored[:offset] + b"X" + stored[offset + 1 :]
    with pytest.raises(ArtifactError, match="results.json in the artifact is corrupt"):
        read_results(corrupt)


def test_request_id_comes_from_the_run_name():
    title = f"gpu-regression pr-7 {SHA} req-12-abcd1234"
    assert request_id_from_run({"display_title": title, "name": "gpu-regression"}) == "12-abcd1234"
    assert request_id_from_run({"display_title": f"gpu-regression push {SHA}"}) is None
    assert request_id_from_run({"display_title": "gpu-regression pr-7 x req-"}) is None
