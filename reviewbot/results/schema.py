"""Suite and test results: the one `SuiteResult`/`TestResult` of the bot, and the versioned `results.json`.

The suite runner (`reviewbot.suites`) produces `SuiteResult`s (JUnit XML read by
`reviewbot.results.junit`); the engine turns their failures into findings, the renderer lists
them, and the GPU dispatch path reads them back from `results.json`.

`ci/run_regression.py` writes it (locally, or inside the `gpu-regression.yml` workflow, which
uploads it as an artifact); the bot's GPU dispatch modes read it back to update the review and
the `reviewbot/gpu-regression` status. Both sides go through `RegressionResults.from_dict`, which
rejects unknown keys, wrong types and unknown statuses with a `ResultsFormatError` (a
`ValueError`) naming the field, so a
runner on an older or newer schema fails loudly instead of being read as "all passed".

Standard library only: this module is imported on GPU machines that lack the bot's extras.

Format (``schema_version`` 1)::

    {"schema_version": 1, "revision": "<40-hex sha>", "request_id": str|null, "pr_number": int|null,
     "started_at": ISO-8601, "finished_at": ISO-8601,
     "environment": {"python", "platform", "torch", "cuda", "gpu_model", "gpu_count", "driver"},
     "suites": [{"name", "status", "duration_s", "gpus", "failure_meaning", "detail",
                 "junit_xml", "log", "tests": [{"id", "status", "duration_s", "message", "gpu_only"}],
                 "bench": [{"name", "value", "unit", "test_id"}]}]}

A suite's status is one of `SUITE_STATUSES`; anything but "passed" makes the run fail. A test
skipped for lack of a GPU carries ``gpu_only: true`` so the review can say which assertions a CPU
run did not check, instead of counting them as passed.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
TEST_STATUSES: tuple[str, ...] = ("passed", "failed", "error", "skipped")
# "error": the suite ran but its report is unusable (no JUnit XML, crash before tests);
# "timeout": killed at its time limit; "not-run": never started (e.g. needs more GPUs than present).
PASSED = "passed"
FAILED = "failed"
ERROR = "error"
TIMEOUT = "timeout"
NOT_RUN = "not-run"
SUITE_STATUSES: tuple[str, ...] = (PASSED, FAILED, ERROR, TIMEOUT, NOT_RUN)
# Fields the suite runner fills for the review that `results.json` does not carry (format unchanged).
_RUN_ONLY_SUITE_FIELDS = ("revision", "command", "log_tail", "returncode")
_RUN_ONLY_TEST_FIELDS = ("line", "summary")


class ResultsFormatError(ValueError):
    """A results document does not follow this schema; the message names the field."""


_GPU_ONLY_REASON = re.compile(r"\b(gpu|cuda|nccl)\b", re.IGNORECASE)


def is_gpu_only_skip(reason: str | None) -> bool:
    """True when a skip reason says the skipped check needs a GPU (mentions GPU, CUDA or NCCL)."""
    return bool(reason) and _GPU_ONLY_REASON.search(reason) is not None


class _Reader:
    """Strict reader of one JSON object: every key must be consumed, types are checked."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ResultsFormatError(f"{where}: expected an object, got {type(data).__name__}")
        self._data = data
        self._where = where
        self._seen: set[str] = set()

    def get(self, key: str, types: type | tuple[type, ...], *, optional: bool = False) -> Any:
        self._seen.add(key)
        path = f"{self._where}.{key}"
        if key not in self._data:
            if optional:
                return None
            raise ResultsFormatError(f"{path}: missing")
        value = self._data[key]
        if value is None and optional:
            return None
        # bool is an int subclass: never accept it where a number is meant.
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise ResultsFormatError(f"{path}: expected {_type_names(types)}, got bool")
        if not isinstance(value, types):
            raise ResultsFormatError(f"{path}: expected {_type_names(types)}, got {type(value).__name__}")
        return value

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        value = self.get(key, str)
        if value not in allowed:
            raise ResultsFormatError(f"{self._where}.{key}: {value!r} is not one of {', '.join(allowed)}")
        return value

    def done(self) -> None:
        unknown = sorted(set(self._data) - self._seen)
        if unknown:
            raise ResultsFormatError(f"{self._where}: unknown key(s) {', '.join(unknown)}")


def _type_names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))


@dataclass(frozen=True)
class TestResult:
    """One test case. `id` is pytest's node id style ``path::Class::name`` rebuilt from the JUnit XML.

    `message`: for a failed or errored test, its own failure message and traceback tail from the
    JUnit report; for a skipped test, the skip reason. Read from a JUnit report only (not carried
    by `results.json`): `summary`, JUnit's one-line failure message, and `line`, the deepest
    traceback line in the test's own file (0 when the traceback names none).
    """

    __test__ = False  # not a pytest test class despite the name

    id: str
    status: str
    duration_s: float
    message: str | None = None
    gpu_only: bool = False
    line: int = 0
    summary: str = ""

    def __post_init__(self) -> None:
        if self.status not in TEST_STATUSES:
            raise ResultsFormatError(f"test {self.id}: status {self.status!r} is not one of {', '.join(TEST_STATUSES)}")
        if self.gpu_only and self.status != "skipped":
            raise ResultsFormatError(f"test {self.id}: gpu_only is only meaningful for a skipped test")

    @property
    def path(self) -> str:
        """The test file (the node id up to its first `::`), or "" for an id without a file."""
        return self.id.split("::")[0] if "::" in self.id else ""

    @property
    def name(self) -> str:
        """The test's own name: the node id's last `::` part (parameters included)."""
        base, bracket, params = self.id.partition("[")
        return base.split("::")[-1] + bracket + params

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "error")

    @classmethod
    def from_dict(cls, data: Any, where: str) -> TestResult:
        r = _Reader(data, where)
        result = cls(
            id=r.get("id", str),
            status=r.choice("status", TEST_STATUSES),
            duration_s=float(r.get("duration_s", (int, float))),
            message=r.get("message", str, optional=True),
            gpu_only=r.get("gpu_only", bool),
        )
        r.done()
        return result


@dataclass(frozen=True)
class BenchFigure:
    """A figure a suite recorded as a JUnit property named ``bench.<name>`` (value: number or "12.5 ms").

    Tests record it with pytest's ``record_testsuite_property`` (works with the default xunit2
    family; `test_id` is then None) or ``record_property`` (legacy/xunit1 families; `test_id` set).
    """

    name: str
    value: float
    unit: str | None
    test_id: str | None

    @classmethod
    def from_dict(cls, data: Any, where: str) -> BenchFigure:
        r = _Reader(data, where)
        figure = cls(
            name=r.get("name", str),
            value=float(r.get("value", (int, float))),
            unit=r.get("unit", str, optional=True),
            test_id=r.get("test_id", str, optional=True),
        )
        r.done()
        return figure


@dataclass(frozen=True)
class SuiteResult:
    """One configured suite run on one revision. `status` is one of `SUITE_STATUSES`.

    `detail`: why the suite did not pass or run, in plain words (None when it ran). `junit_xml` and
    `log`: the runner's absolute paths; in `results.json`, paths relative to the results directory.
    Filled by the suite runner only (not carried by `results.json`): `revision`, `command`,
    `log_tail` (the log's last lines) and `returncode` (None when killed at the time limit).
    """

    name: str
    status: str
    duration_s: float
    gpus: int = 0
    failure_meaning: str = ""
    detail: str | None = None
    junit_xml: str | None = None
    log: str | None = None
    tests: tuple[TestResult, ...] = ()
    bench: tuple[BenchFigure, ...] = ()
    revision: str = ""
    command: str = ""
    log_tail: str = ""
    returncode: int | None = None

    def __post_init__(self) -> None:
        if self.status not in SUITE_STATUSES:
            raise ResultsFormatError(
                f"suite {self.name}: status {self.status!r} is not one of {', '.join(SUITE_STATUSES)}"
            )
        if self.status == "passed" and any(t.status in ("failed", "error") for t in self.tests):
            raise ResultsFormatError(f"suite {self.name}: marked passed but has failed or errored tests")

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def ran(self) -> bool:
        """True when the suite ran to a usable report (passed or failed); never counted as passed otherwise."""
        return self.status in (PASSED, FAILED)

    @property
    def failures(self) -> list[TestResult]:
        return [t for t in self.tests if t.failed]

    @property
    def gpu_only_skips(self) -> tuple[TestResult, ...]:
        return tuple(t for t in self.tests if t.gpu_only)

    def count(self, status: str) -> int:
        assert status in TEST_STATUSES, status
        return sum(1 for t in self.tests if t.status == status)

    def counts(self) -> dict[str, int]:
        """Tests per status, every status present."""
        return {status: self.count(status) for status in TEST_STATUSES}

    def to_json(self) -> dict[str, Any]:
        """Everything, for the review's JSON output (`results.json` goes through `RegressionResults`)."""
        data = asdict(self)
        data["counts"] = self.counts()
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str) -> SuiteResult:
        r = _Reader(data, where)
        name = r.get("name", str)
        tests = r.get("tests", list)
        bench = r.get("bench", list)
        suite = cls(
            name=name,
            status=r.choice("status", SUITE_STATUSES),
            duration_s=float(r.get("duration_s", (int, float))),
            gpus=r.get("gpus", int),
            failure_meaning=r.get("failure_meaning", str),
            detail=r.get("detail", str, optional=True),
            junit_xml=r.get("junit_xml", str, optional=True),
            log=r.get("log", str, optional=True),
            tests=tuple(TestResult.from_dict(t, f"{where}.tests[{i}]") for i, t in enumerate(tests)),
            bench=tuple(BenchFigure.from_dict(b, f"{where}.bench[{i}]") for i, b in enumerate(bench)),
        )
        r.done()
        return suite


@dataclass(frozen=True)
class Environment:
    """Where the suites ran. `cuda`, `gpu_model` and `driver` are None on a machine without CUDA."""

    python: str
    platform: str
    torch: str | None
    cuda: str | None
    gpu_model: str | None
    gpu_count: int
    driver: str | None

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Environment:
        r = _Reader(data, where)
        env = cls(
            python=r.get("python", str),
            platform=r.get("platform", str),
            torch=r.get("torch", str, optional=True),
            cuda=r.get("cuda", str, optional=True),
            gpu_model=r.get("gpu_model", str, optional=True),
            gpu_count=r.get("gpu_count", int),
            driver=r.get("driver", str, optional=True),
        )
        r.done()
        return env


_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class RegressionResults:
    """One run of the selected suites on one revision: what `results.json` holds."""

    revision: str
    started_at: str
    finished_at: str
    environment: Environment
    suites: tuple[SuiteResult, ...]
    request_id: str | None = None
    pr_number: int | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not _SHA.fullmatch(self.revision):
            raise ResultsFormatError(f"revision: {self.revision!r} is not a full 40-hex commit sha")
        if self.schema_version != SCHEMA_VERSION:
            raise ResultsFormatError(
                f"schema_version: {self.schema_version} is not supported (this reader: {SCHEMA_VERSION})"
            )
        names = [s.name for s in self.suites]
        if len(names) != len(set(names)):
            raise ResultsFormatError(f"suites: duplicate suite names in {names}")

    @property
    def passed(self) -> bool:
        """True only when every suite passed; an empty run is not a pass."""
        return bool(self.suites) and all(s.status == "passed" for s in self.suites)

    def summary(self) -> str:
        """One line, e.g. ``2 suites: 1 passed, 1 failed; tests 10 passed, 1 failed, 0 error, 3 skipped
        (2 GPU-only skips)``."""
        by_status: dict[str, int] = {}
        for s in self.suites:
            by_status[s.status] = by_status.get(s.status, 0) + 1
        suites = ", ".join(f"{n} {st}" for st, n in by_status.items())
        tests = [t for s in self.suites for t in s.tests]
        counts = ", ".join(f"{sum(1 for t in tests if t.status == st)} {st}" for st in TEST_STATUSES)
        gpu_only = sum(1 for t in tests if t.gpu_only)
        return f"{len(self.suites)} suites: {suites or 'none'}; tests {counts} ({gpu_only} GPU-only skips)"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for suite in data["suites"]:
            for key in _RUN_ONLY_SUITE_FIELDS:
                del suite[key]
            suite["tests"] = list(suite["tests"])
            for test in suite["tests"]:
                for key in _RUN_ONLY_TEST_FIELDS:
                    del test[key]
            suite["bench"] = list(suite["bench"])
        data["suites"] = list(data["suites"])
        head = ("schema_version", "revision", "request_id", "pr_number")
        return {**{k: data.pop(k) for k in head}, **data}

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    def write(self, path: Path) -> None:
        """Write atomically (temp file + rename) so a reader never sees half a file."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.dumps(), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def from_dict(cls, data: Any) -> RegressionResults:
        r = _Reader(data, "results")
        version = r.get("schema_version", int)
        if version != SCHEMA_VERSION:
            raise ResultsFormatError(
                f"results.schema_version: {version} is not supported (this reader: {SCHEMA_VERSION})"
            )
        suites = r.get("suites", list)
        results = cls(
            schema_version=version,
            revision=r.get("revision", str),
            request_id=r.get("request_id", str, optional=True),
            pr_number=r.get("pr_number", int, optional=True),
            started_at=r.get("started_at", str),
            finished_at=r.get("finished_at", str),
            environment=Environment.from_dict(r.get("environment", dict), "results.environment"),
            suites=tuple(SuiteResult.from_dict(s, f"results.suites[{i}]") for i, s in enumerate(suites)),
        )
        r.done()
        return results

    @classmethod
    def loads(cls, text: str | bytes) -> RegressionResults:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ResultsFormatError(f"results.json is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def read(cls, path: Path) -> RegressionResults:
        return cls.loads(path.read_bytes())
