"""broad-except and runtime-error-fallback (and the width of a try, an annotation of their findings) on real git repos with crafted branches."""

from __future__ import annotations

import pytest
from engine_gitrepos import Repo, sub

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity

BASE_MODULE = """
import logging

logger = logging.getLogger(__name__)


def old_fallback(fn):
    try:
        return fn()
    except Exception:
        return None


def untouched(fn):
    return fn()
"""


LEGACY_EXTRA = """

def legacy_runtime(fn):
    try:
        return fn()
    except RuntimeError:
        return None


def legacy_wide(fn, gn):
    try:
        fn()
        return gn()
    except KeyError:
        return None
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("broad") / "r")
    repo.commit({"pkg/__init__.py": "", "pkg/mod.py": BASE_MODULE, "pkg/legacy.py": BASE_MODULE + LEGACY_EXTRA}, "base")

    repo.branch("blind")
    repo.commit(
        {
            "pkg/mod.py": BASE_MODULE
            + """

def new_fallback(fn):
    try:
        return fn()
    except Exception:
        logger.exception("compile failed")
        return None


def silent(fn):
    try:
        fn()
    except:
        pass
"""
        },
        "add fallbacks",
    )

    repo.branch("near-miss", "main")
    repo.commit(
        {
            "pkg/mod.py": BASE_MODULE
            + """

def reraising(fn):
    try:
        return fn()
    except Exception:
        logger.error("failed")
        raise


def narrow(fn):
    try:
        return fn()
    except KeyError:
        return None
"""
        },
        "narrow handlers",
    )

    repo.branch("untouched-line", "main")
    legacy = BASE_MODULE + LEGACY_EXTRA
    touched = sub(
        legacy, "def untouched(fn):\n    return fn()", "def untouched(fn):\n    value = fn()\n    return value"
    )
    assert touched != legacy
    repo.commit({"pkg/legacy.py": touched}, "touch another function")

    repo.branch("rename", "main")
    repo.mv("pkg/legacy.py", "pkg/renamed.py")
    repo.commit({}, "rename only")
    repo.commit(
        {
            "pkg/renamed.py": (repo.path / "pkg/renamed.py").read_text()
            + """

def added_after_rename(fn):
    try:
        return fn()
    except BaseException:
        return None
"""
        },
        "add handler in renamed file",
    )

    repo.branch("runtime", "main")
    repo.commit(
        {
            "pkg/mod.py": BASE_MODULE
            + """

import torch


def no_oom(fn):
    try:
        return fn()
    except RuntimeError:
        return None


def with_oom(fn):
    try:
        return fn()
    except torch.OutOfMemoryError:
        raise
    except RuntimeError:
        return None


def with_oom_wide(fn, gn):
    try:
        fn()
        return gn()
    except RuntimeError as exc:
        if isinstance(exc, torch.OutOfMemoryError):
            raise
        return None


def cleanup(fn, gn):
    try:
        fn()
        return gn()
    except KeyError:
        logger.error("lookup failed")
        raise


def wide(fn, gn):
    try:
        a = fn()
        return gn(a)
    except KeyError:
        return None
"""
        },
        "runtime handlers",
    )
    repo.checkout("main")
    return repo


def _review(repo: Repo, head: str):
    return run_review(repo.path, "main", head, suites="none")


def test_blind_and_bare_handlers_are_unconfirmed_without_evidence(repo: Repo) -> None:
    # a pattern alone never blocks: the P0 it would be is capped at P2 and says it is unconfirmed
    review = _review(repo, "blind")
    found = {(f.rule, f.severity, f.qualname, f.line_start) for f in review.findings}
    # round 26: both trys guard one operation, a P3 (claiming P0)
    assert ("broad-except", Severity.P3, "new_fallback", 20) in found  # ruff exempts it: it logs
    assert ("broad-except", Severity.P3, "silent", 28) in found
    bare = next(f for f in review.findings if f.qualname == "silent")
    assert bare.details == "ruff E722"
    assert "AssertionError" in bare.why
    assert bare.evidence.kind is EvidenceKind.PATTERN
    assert bare.evidence.text("en").startswith("unconfirmed (would be P0-BLOCKER with proof): a static pattern")
    assert bare.evidence.claimed is Severity.P0 and not bare.evidence.confirmed
    assert not review.blocking
    # the pre-existing handler in old_fallback is on an untouched line
    assert not any(f.qualname == "old_fallback" for f in review.findings)


def test_narrow_and_reraising_handlers_do_not_fire(repo: Repo) -> None:
    review = _review(repo, "near-miss")
    assert [f for f in review.findings if f.rule in ("broad-except", "runtime-error-fallback")] == []
    assert not review.blocking


def test_finding_on_untouched_line_is_not_reported(repo: Repo) -> None:
    review = _review(repo, "untouched-line")
    assert review.summary.files[0].path == "pkg/legacy.py"
    assert review.findings == []  # broad-except and runtime-error-fallback stand untouched


def test_rename_keeps_old_findings_out_and_reports_new_ones_at_new_path(repo: Repo) -> None:
    pure = run_review(repo.path, "main", "rename~1", suites="none")
    assert pure.summary.files[0].status == "renamed"
    assert pure.findings == []
    review = _review(repo, "rename")
    assert [(f.rule, f.path, f.qualname) for f in review.findings] == [
        ("broad-except", "pkg/renamed.py", "added_after_rename")
    ]


def test_runtime_error_fallback_needs_oom_reraise(repo: Repo) -> None:
    review = _review(repo, "runtime")
    by_name = {(f.qualname, f.rule): f for f in review.findings}
    assert by_name[("no_oom", "runtime-error-fallback")].severity is Severity.P2  # unconfirmed
    assert "RuntimeError` subclasses" in by_name[("no_oom", "runtime-error-fallback")].why
    assert ("with_oom", "runtime-error-fallback") not in by_name
    assert by_name[("with_oom_wide", "runtime-error-fallback")].severity is Severity.P2
    # a narrow handler around two calls: the width alone posts nothing (it annotates a handler's finding)
    assert not any(q == "wide" for q, _ in by_name)
    assert not any(rule == "wide-try" for _, rule in by_name)
    assert not any(q == "cleanup" for q, _ in by_name)  # always re-raises: not a fallback
