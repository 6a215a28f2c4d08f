"""The exception-injection experiment end to end: tiny git repositories whose pytest suite reaches
(or does not reach) a catch-all, reviewed with `run_review`; the experiment raises `AssertionError`
(or `torch.OutOfMemoryError`) at the start of the try body and the final severity and evidence
follow what the tests saw."""

from __future__ import annotations

import ast
import dataclasses

import pytest
from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.experiments.exception_injection import (
    MARKER,
    Injection,
    confined_calls,
    injected_error_surfaced,
    injected_source,
    plan,
)
from reviewbot.findings import EvidenceKind, Finding, Severity
from reviewbot.repo_config import ConfigError, InjectionConfig, load_config, parse_config
from reviewbot.rules.broad_except import import_map
from tests.reviewbot.toy_pytest import NO_PLUGINS

BASE = """
def fast(x):
    return x * 2


def slow(x):
    return x + x


def double(x):
    return fast(x)
"""

# four handlers the static rule reports as P0 swallowing catch-alls
MIXED = '''
import logging

logger = logging.getLogger(__name__)


class FastPathError(Exception):
    """The fast path is not available for this input."""


def fast(x):
    return x * 2


def slow(x):
    return x + x


def double(x):
    try:
        return fast(x)
    except Exception:
        logger.warning("fast path failed; using the slow one")
        return slow(x)


def _unless_fast_path(error):
    if not isinstance(error, FastPathError):
        raise error


def triple(x):
    try:
        return fast(x) + x
    except Exception as error:
        _unless_fast_path(error)
        return slow(x) + x


def quadruple(x):
    try:
        return fast(fast(x))
    except Exception:
        return slow(x)


def halve(x):
    try:
        return fast(x) / 4
    except Exception:
        return 0


def negate(x):
    try:
        return -fast(x) // 2
    except Exception:  # noqa: BLE001 - an optional speed-up; the plain path is always correct
        return -x


def absolute(x):
    try:
        return abs(fast(x)) // 2
    except Exception:  # noqa: BLE001 - an optional speed-up; the plain path is always correct
        logger.exception("fast path failed")
        return abs(x)
'''

TESTS = """
from pkg.compute import absolute, double, negate, quadruple, triple


def test_double():
    assert double(3) == 6


def test_triple():
    assert triple(3) == 9


def test_quadruple():
    assert quadruple(2) == 8


def test_negate():
    assert negate(3) == -3


def test_absolute():
    assert absolute(-3) == 3
"""

# two catch-alls converting into the type `double` falls back on
CONVERTS = '''
class FastPathError(Exception):
    """The fast path is not available for this input."""


def fast(x):
    return x * 2


def slow(x):
    return x + x


def checked_fast(x):
    try:
        return fast(x)
    except Exception as error:
        raise FastPathError("fast path failed") from error


def double(x):
    try:
        return checked_fast(x)
    except FastPathError:
        return slow(x)


def triple(x):
    try:
        return fast(x) + x
    except Exception as error:
        raise FastPathError("triple failed") from error


def triple_or_slow(x):
    # a fallback on the static call path from `triple`, which the tests do not go through
    try:
        return triple(x)
    except FastPathError:
        return slow(x) + x
'''

# `except NotImplementedError` around a call into a module raising the repository's own subclass
OWN_ERRORS = '''
class UnsupportedGraphError(NotImplementedError):
    """The graph cannot be compiled ahead of time."""
'''

OWN_CACHE = """
from pkg.errors import UnsupportedGraphError


def load(x):
    if x is None:
        raise UnsupportedGraphError("no graph")
    return x * 2
"""

OWN = """
from pkg import cache


def double(x):
    try:
        return cache.load(x)
    except NotImplementedError:
        return x + x
"""

RUNTIME = """
def fast(x):
    return x * 2


def slow(x):
    return x + x


def double(x):
    try:
        return fast(x)
    except RuntimeError:
        return slow(x)
"""

# catch-alls whose try bodies run only builtins and the standard library on values at hand (no
# AssertionError of the repository's code can arise there), and the near miss that calls the repository
CONFINED = """
import json


def fast(x):
    return x * 2


def round_trips(value):
    try:
        same = eval(repr(value)) == value
    except:
        same = False
    return same


def count(text):
    try:
        return json.loads(text)["n"]
    except Exception:
        return 0


def lenient_count(text):
    try:
        return json.loads(text)["n"]
    except Exception:  # noqa: BLE001 - a malformed text counts as zero
        return 0


def fast_round_trips(value):
    try:
        same = eval(repr(fast(value))) == fast(value)
    except:
        same = False
    return same
"""

CONFINED_TESTS = """
from pkg.compute import count, fast_round_trips, lenient_count, round_trips


def test_round_trips():
    assert round_trips(3)


def test_lenient_count():
    assert lenient_count('{"n": 2}') == 2


def test_count():
    assert count('{"n": 2}') == 2


def test_fast_round_trips():
    assert fast_round_trips(3)
"""

# the venv's heavy pytest plugins off: each run then starts in well under a second
# a callback's failure logged with its traceback, nothing substituted (cachetools' `on_evict`), and
# its near miss: the traceback logged, then another value returned
REPORTED = """
import logging

logger = logging.getLogger(__name__)


def fast(x):
    return x * 2


def slow(x):
    return x + x


def store(cache, key, value, on_store=None):
    cache[key] = value
    if on_store is not None:
        try:
            on_store(key, fast(value))
        except Exception:
            logger.error("on_store callback failed for %r", key, exc_info=True)
    return len(cache)


def double(x):
    try:
        return fast(x)
    except Exception:
        logger.exception("fast path failed; using the slow one")
        return slow(x)
"""

REPORTED_TESTS = """
from pkg.compute import double, store


def test_store_calls_back():
    seen = []
    assert store({}, "a", 1, lambda key, value: seen.append((key, value))) == 1
    assert seen == [("a", 2)]


def test_double():
    assert double(3) == 6
"""

PYTEST = f"python -m pytest -q -p no:cacheprovider {NO_PLUGINS} tests"
REVIEWBOT_YML = f"""
suites:
  unit:
    command: {PYTEST}
    timeout_s: 60
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("injection") / "r")
    base_tests = "from pkg.compute import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
    repo.commit(
        {
            "pkg/__init__.py": "",
            "pkg/compute.py": BASE,
            "tests/test_compute.py": base_tests,
            ".reviewbot.yml": REVIEWBOT_YML,
        },
        "initial",
    )
    repo.branch("mixed")
    repo.commit({"pkg/compute.py": MIXED, "tests/test_compute.py": TESTS}, "fallbacks")
    repo.branch("converts", "main")
    convert_tests = "from pkg.compute import double, triple\n\n\ndef test_double():\n    assert double(3) == 6\n\n\n"
    convert_tests += "def test_triple():\n    assert triple(3) == 9\n"
    repo.commit({"pkg/compute.py": CONVERTS, "tests/test_compute.py": convert_tests}, "converts")
    repo.branch("own", "main")
    repo.commit({"pkg/errors.py": OWN_ERRORS, "pkg/cache.py": OWN_CACHE, "pkg/compute.py": OWN}, "own subclass")
    repo.branch("runtime", "main")
    repo.commit({"pkg/compute.py": RUNTIME}, "runtime fallback")
    repo.branch("runtime-torch", "main")
    repo.commit({"pkg/compute.py": RUNTIME, "pkg/kernels.py": "import torch\n"}, "runtime fallback, torch project")
    repo.branch("confined", "main")
    repo.commit({"pkg/compute.py": CONFINED, "tests/test_compute.py": CONFINED_TESTS}, "confined probes")
    repo.branch("reported", "main")
    repo.commit({"pkg/compute.py": REPORTED, "tests/test_compute.py": REPORTED_TESTS}, "reported callback")
    repo.checkout("main")
    return repo


def _at(review, repo: Repo, branch: str, text: str):
    """The finding on the `except` line of the function containing `text`."""
    lines = repo.git("show", f"{branch}:pkg/compute.py").splitlines()
    start = next(i for i, line in enumerate(lines) if text in line)
    handler = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("except")) + 1
    (finding,) = [f for f in review.findings if f.path == "pkg/compute.py" and f.line_start == handler]
    return finding, lines


def test_swallowed_confirmed_reraised_refuted_unreached_unconfirmed(repo: Repo) -> None:
    config = dataclasses.replace(load_config(repo.path, "mixed"), injection=InjectionConfig(max_handlers=6))
    review = run_review(repo.path, "main", "mixed", config=config)
    assert [r.status for r in review.suite_results] == ["passed"]
    assert "exception_injection" in review.timings

    swallowed, lines = _at(review, repo, "mixed", "def double")
    assert (swallowed.rule, swallowed.severity) == ("broad-except", Severity.P0)
    assert swallowed.evidence.kind is EvidenceKind.EXPERIMENT and swallowed.evidence.confirmed
    first_body_line = swallowed.line_start - 1  # `return fast(x)`, right above the `except`
    assert lines[first_body_line - 1].strip() == "return fast(x)"
    text = swallowed.evidence.text("en")
    assert f"raised `AssertionError` at pkg/compute.py:{first_body_line}" in text
    assert "1 test(s) reached it (`tests/test_compute.py::test_double`)" in text
    assert "1 still passed" in text and "swallowed it (the handler has a logging call)" in text
    assert "异常注入实验" in swallowed.evidence.text("zh")
    assert review.blocking

    # the handler re-raises everything but its own failure type through a helper the static rule does not
    # follow (written in the handler itself it is a filter, not reported): the AssertionError reaches the test
    reraised, _ = _at(review, repo, "mixed", "def triple")
    assert reraised.severity is Severity.P3 and reraised.evidence.kind is EvidenceKind.EXPERIMENT
    assert reraised.message_id == "broad-except.refuted"
    assert reraised.message == (
        "`except Exception` catches everything, but an injected `AssertionError` still propagated to the tests"
    )
    assert reraised.evidence.text("en").endswith(
        "it propagated to every one of the 1 test(s) that reached it (`tests/test_compute.py::test_triple`)"
    )

    # the fallback computes a wrong value: the test fails, but not with the injected error
    noticed, _ = _at(review, repo, "mixed", "def quadruple")
    assert noticed.severity is Severity.P0 and noticed.evidence.confirmed
    assert "0 still passed and 1 failed on the fallback's result" in noticed.evidence.text("en")

    unreached, _ = _at(review, repo, "mixed", "def halve")
    # round 26: unconfirmed, a catch-all around one operation is a P3
    assert unreached.severity is Severity.P3 and unreached.evidence.kind is EvidenceKind.PATTERN
    assert unreached.evidence.text("en") == (
        "unconfirmed (would be P0-BLOCKER with proof): no test executes this try body "
        "(5 candidate test(s) ran with an exception injected there); add one that reaches it"
    )
    # a noqa with a reason is respected unless the error vanished without a log record
    silent, _ = _at(review, repo, "mixed", "def negate")
    assert (silent.message_id, silent.severity) == ("broad-except.noqa-silent", Severity.P0)
    assert silent.evidence.confirmed and "`tests/test_compute.py::test_negate`" in silent.evidence.text("en")
    assert silent.evidence.text("en").endswith("swallowed it (the handler has no logging call)")
    assert "(an optional speed-up; the plain path is always correct)" in silent.message
    logged, _ = _at(review, repo, "mixed", "def absolute")
    assert (logged.message_id, logged.severity) == ("broad-except.noqa-reason", Severity.P3)
    assert "`tests/test_compute.py::test_absolute`); 1 still passed" in logged.evidence.text("en")
    # the worktree was the experiment's: the user's checkout is untouched
    assert MARKER not in (repo.path / "pkg/compute.py").read_text()


def test_a_conversion_caught_by_a_fallback_is_confirmed_and_one_reaching_the_test_refuted(repo: Repo) -> None:
    review = run_review(repo.path, "main", "converts")
    caught, _ = _at(review, repo, "converts", "def checked_fast")
    assert caught.message_id == "broad-except.converts" and caught.severity is Severity.P0
    assert (
        caught.evidence.confirmed
        and "`tests/test_compute.py::test_double`); 1 still passed" in caught.evidence.text("en")
    )
    # the converted error reaches the test chained to the injected one: not hidden
    reaches_user, _ = _at(review, repo, "converts", "def triple")
    assert reaches_user.message_id == "broad-except.refuted" and reaches_user.severity is Severity.P3
    assert "`tests/test_compute.py::test_triple`" in reaches_user.evidence.text("en")


def test_a_swallow_where_the_error_cannot_arise_stays_unconfirmed_and_the_near_miss_is_confirmed(repo: Repo) -> None:
    review = run_review(repo.path, "main", "confined")
    # since round 8 the static rule reads such a body the same way: no swallow, at most the bare
    # handler's note, neither injected
    bare, _ = _at(review, repo, "confined", "def round_trips")
    assert (bare.message_id, bare.severity) == ("broad-except.confined-catches-exit", Severity.P3)
    assert bare.evidence.kind is EvidenceKind.PATTERN
    assert not [f for f in review.findings if f.qualname == "count"]
    # a noqa note is injected: the swallowed error could not have arisen there
    finding, _ = _at(review, repo, "confined", "def lenient_count")
    assert (finding.message_id, finding.severity) == ("broad-except.noqa-reason", Severity.P3)
    assert finding.evidence.kind is EvidenceKind.EXPERIMENT and not finding.evidence.confirmed
    assert finding.evidence.message_id == "evidence.injection-cannot-arise"
    text = finding.evidence.text("en")
    assert "the handler swallowed it in 1 of the 1 test(s) that reached it" in text
    assert "calls only builtins and the standard library on values at hand (`json.loads`)" in text
    assert "异常注入实验" in finding.evidence.text("zh")
    # the same shape around a call of the repository's code: the swallowed AssertionError confirms it
    near_miss, _ = _at(review, repo, "confined", "def fast_round_trips")
    assert near_miss.severity is Severity.P0 and near_miss.evidence.message_id == "evidence.injection-swallowed"
    assert review.blocking


def test_the_repositorys_own_subclass_swallowed_is_a_confirmed_p2(repo: Repo) -> None:
    review = run_review(repo.path, "main", "own")
    (finding,) = [f for f in review.findings if f.rule == "caught-own-subclass"]
    assert finding.severity is Severity.P2 and finding.evidence.kind is EvidenceKind.EXPERIMENT
    assert finding.evidence.confirmed and not review.blocking
    text = finding.evidence.text("en")
    assert "raised `pkg.errors.UnsupportedGraphError` at pkg/compute.py:6" in text
    assert "(`tests/test_compute.py::test_double`); 1 still passed" in text


def test_a_swallow_that_only_reports_is_a_confirmed_p2_and_a_reported_substitute_a_p0(repo: Repo) -> None:
    review = run_review(repo.path, "main", "reported")
    reported, _ = _at(review, repo, "reported", "def store")
    assert reported.rule == "broad-except" and reported.severity is Severity.P2
    assert reported.evidence.kind is EvidenceKind.EXPERIMENT and reported.evidence.confirmed
    assert reported.evidence.message_id == "evidence.injection-reported"
    text = reported.evidence.text("en")
    assert "(`tests/test_compute.py::test_store_calls_back`); 0 still passed and 1 failed" in text
    assert "it reports what it caught and substitutes nothing" in text
    assert "日志记录" in reported.evidence.text("zh")
    substitute, _ = _at(review, repo, "reported", "def double")
    assert substitute.severity is Severity.P0 and substitute.evidence.message_id == "evidence.injection-swallowed"
    assert "`tests/test_compute.py::test_double`); 1 still passed" in substitute.evidence.text("en")
    assert review.blocking


def test_the_cap_leaves_the_rest_unconfirmed_and_says_so(repo: Repo) -> None:
    config = load_config(repo.path, "mixed")
    config = dataclasses.replace(config, injection=InjectionConfig(max_handlers=1))
    review = run_review(repo.path, "main", "mixed", config=config)
    tried, _ = _at(review, repo, "mixed", "def double")
    assert tried.severity is Severity.P0 and tried.evidence.confirmed
    for name, severity in [  # round 26: unconfirmed, a catch-all around one operation is a P3
        ("def triple", Severity.P3),
        ("def quadruple", Severity.P3),
        ("def halve", Severity.P3),
        ("def negate", Severity.P3),  # the noqa notes come last
        ("def absolute", Severity.P3),
    ]:
        untried, _ = _at(review, repo, "mixed", name)
        assert untried.severity is severity
        assert untried.evidence.message_id == "evidence.injection-cap"
        assert "tries at most 1 handler(s) per review" in untried.evidence.text("en")


def test_without_running_code_nothing_is_injected(repo: Repo) -> None:
    review = run_review(repo.path, "main", "mixed", suites="none")
    assert "exception_injection" not in review.timings
    finding, _ = _at(review, repo, "mixed", "def double")
    # round 19: a warned fallback to another path claims P0 and, unconfirmed, is a P3
    assert finding.severity is Severity.P3 and finding.evidence.message_id == "evidence.pattern"
    assert finding.evidence.claimed is Severity.P0
    assert not review.blocking


def test_a_configured_command_runs_once_without_and_once_per_handler(repo: Repo) -> None:
    config = load_config(repo.path, "mixed")
    command = InjectionConfig(command=f"{PYTEST} -k double", max_handlers=2)
    config = dataclasses.replace(config, suites={}, injection=command)
    review = run_review(repo.path, "main", "mixed", config=config)
    assert review.suite_results == []
    confirmed, _ = _at(review, repo, "mixed", "def double")
    assert confirmed.severity is Severity.P0 and "`tests/test_compute.py::test_double`" in confirmed.evidence.text("en")
    deselected, _ = _at(review, repo, "mixed", "def triple")
    assert deselected.evidence.message_id == "evidence.no-test-reaches"


def test_a_command_that_runs_no_test_leaves_the_finding_unconfirmed_with_the_reason(repo: Repo) -> None:
    config = load_config(repo.path, "mixed")
    broken = InjectionConfig(command=f"{PYTEST} --no-such-option", max_handlers=1)
    review = run_review(repo.path, "main", "mixed", config=dataclasses.replace(config, suites={}, injection=broken))
    finding, _ = _at(review, repo, "mixed", "def double")
    # round 19: a warned fallback to another path, unconfirmed, is a P3 (it claims P0)
    assert finding.severity is Severity.P3 and finding.evidence.message_id == "evidence.experiment-not-run"
    text = finding.evidence.text("en")
    assert text.startswith(
        "unconfirmed (would be P0-BLOCKER with proof): the exception injection experiment could not run"
    )
    assert "suite injection exited with code 4 and ran no test" in text


def test_runtime_error_fallback_swallowing_oom_is_confirmed_in_a_project_that_imports_torch(repo: Repo) -> None:
    review = run_review(repo.path, "main", "runtime-torch")
    (finding,) = [f for f in review.findings if f.rule == "runtime-error-fallback"]
    assert finding.severity is Severity.P0 and finding.evidence.confirmed
    assert "raised `torch.OutOfMemoryError` at pkg/compute.py:" in finding.evidence.text("en")
    # near miss: the same fallback in a project that never imports torch, where no OOM can arise and
    # RuntimeError is the project's own answer: no finding, so nothing to inject
    review = run_review(repo.path, "main", "runtime")
    assert [f for f in review.findings if f.rule == "runtime-error-fallback"] == []


def test_injection_settings_parse_with_defaults_and_name_the_bad_key() -> None:
    assert parse_config("").injection == InjectionConfig(command=None, timeout_s=300.0, max_handlers=5)
    text = (
        "experiments:\n  injection:\n    command: python -m pytest tests/unit\n    timeout_s: 30\n    max_handlers: 2\n"
    )
    assert parse_config(text).injection == InjectionConfig("python -m pytest tests/unit", 30.0, 2)
    for bad, key in [
        ("experiments:\n  injection:\n    max_handlers: -1\n", "experiments.injection.max_handlers"),
        ("experiments:\n  injection:\n    max_handlers: two\n", "experiments.injection.max_handlers"),
        ("experiments:\n  injection:\n    timeout_s: 0\n", "experiments.injection.timeout_s"),
        ("experiments:\n  injection:\n    tests: x\n", "experiments.injection.tests"),
        ("experiments:\n  fuzz: {}\n", "experiments.fuzz"),
    ]:
        with pytest.raises(ConfigError, match=key):
            parse_config(bad)


def test_the_injected_line_goes_before_the_try_body_and_one_line_bodies_are_not_tried(tmp_path) -> None:
    source = "def f(x):\n    try:\n        return g(x)\n    except Exception:\n        return None\n"
    finding = Finding("broad-except", Severity.P0, "pkg/m.py", 4, 5, "broad-except.swallows", {"label": "x"})
    injection = plan(finding, source, torch_importable=False)
    assert isinstance(injection, Injection) and (injection.line, injection.exception) == (3, "AssertionError")
    lines = injected_source(source, injection, tmp_path / "hits").splitlines()
    assert lines[2].startswith("        _rb_os = ") and lines[2].endswith(
        "raise AssertionError('reviewbot injected AssertionError at pkg/m.py:3')"
    )
    assert lines[3] == "        return g(x)" and len(lines) == 6
    one_line = "def f(x):\n    try: return g(x)\n    except Exception:\n        return None\n"
    at_three = dataclasses.replace(finding, line_start=3, line_end=4)
    assert "starts on the `try:` line" in plan(at_three, one_line, torch_importable=False)
    runtime = dataclasses.replace(finding, rule="runtime-error-fallback")
    assert "torch is not importable" in plan(runtime, source, torch_importable=False)
    injected = plan(runtime, source, torch_importable=True)
    assert isinstance(injected, Injection) and injected.exception == "torch.OutOfMemoryError"


@pytest.mark.parametrize(
    ("body", "confined"),
    [
        ("x = eval(repr(v)) == v", "`eval`, `repr`"),
        ("x = os.path.join(v, 'a')", "`os.path.join`"),
        ("x = v[0]", ""),
        ("x = helper(v)", None),  # a local function
        ("x = self.load(v)", None),  # a method: the repository's code, or a library's
        ("x = getattr(v, 'a')", None),  # a property of the repository may run
        ("x = torch.ones(v)", None),  # a third-party library
        ("x = importlib.import_module(v)", None),  # runs the imported module
    ],
)
def test_confined_calls_names_a_body_that_runs_no_repository_or_library_code(body: str, confined: str | None) -> None:
    source = f"import importlib\nimport os\nimport torch\ntry:\n    {body}\nexcept Exception:\n    x = None\n"
    tree = ast.parse(source)
    (node,) = [n for n in tree.body if isinstance(n, ast.Try)]
    assert confined_calls(node.body, import_map("pkg/m.py", tree)) == confined


def test_the_injected_error_surfaces_only_on_its_own_exception_line() -> None:
    raised = "AssertionError: reviewbot injected AssertionError at pkg/m.py:3\n    def test_x():\nE       AssertionError: reviewbot injected AssertionError at pkg/m.py:3\n"
    assert injected_error_surfaced(raised)
    chained = "E   pkg.errors.Unsupported: no\n...\nE   torch.OutOfMemoryError: reviewbot injected torch.OutOfMemoryError at pkg/m.py:3\n"
    assert injected_error_surfaced(chained)
    # a fallback that quotes the error in its value: swallowed, the test failed on the value
    quoted = (
        "AssertionError: assert '<obj> (str failed: AssertionError: reviewbot injected AssertionError at x.py:3)' == 'obj'\n"
        "E       assert '<obj> (str failed: AssertionError: reviewbot injected AssertionError at x.py:3)' == 'obj'\n"
    )
    assert not injected_error_surfaced(quoted)
