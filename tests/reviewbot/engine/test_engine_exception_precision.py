"""Precision of the exception-handling rules on real git repos: a noqa with a reason, diagnostics
code, documented fallbacks, catch-alls converted into another type, and builtin handlers that also
catch the repository's own subclasses; each with its near miss. No code runs (`--suites none`), so
every finding here is pattern evidence: capped at P2 and saying "unconfirmed"."""

from __future__ import annotations

import pytest
from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Finding, Severity
from reviewbot.render import render_markdown
from reviewbot.review import Review

ERRORS = """
class CacheMissError(RuntimeError):
    '''Nothing stored under this key yet: compile and store.'''


class ArtifactCorrupt(CacheMissError):
    pass


class XUnsupportedError(Exception):
    pass
"""

CACHE = """
from pkg.errors import ArtifactCorrupt, CacheMissError


def lookup(store, key):
    if key not in store:
        raise CacheMissError(key)
    if store[key] is None:
        raise ArtifactCorrupt(key)
    return store[key]
"""

# a RuntimeError subclass raised only where pkg/mod.py does not import from
OTHER = """
class ShardMismatch(RuntimeError):
    pass


def check(shards):
    if len(set(shards)) > 1:
        raise ShardMismatch(shards)
"""

BASE = """
import logging

import torch

from pkg.cache import lookup
from pkg.errors import XUnsupportedError

logger = logging.getLogger(__name__)


def eager(fn):
    return fn()
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("precision") / "r")
    repo.commit(
        {
            "pkg/__init__.py": "",
            "pkg/errors.py": ERRORS,
            "pkg/cache.py": CACHE,
            "pkg/other.py": OTHER,
            "pkg/mod.py": BASE,
            "tests/test_helpers.py": "class FakeDeviceError(RuntimeError):\n    pass\n",
        },
        "base",
    )

    repo.branch("noqa", "main")
    repo.commit(
        {
            "pkg/mod.py": BASE
            + """

def push_metrics(fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 - a failed metrics push must never fail the compile
        logger.warning("metrics push failed", exc_info=True)


def reason_above(fn):
    try:
        return fn()
    # the cache directory may vanish under us: recompiling is always safe
    except Exception:  # noqa: BLE001
        return None


def no_reason(fn):
    try:
        return fn()
    except Exception:  # noqa: BLE001
        return None


def other_code(fn):
    try:
        return fn()
    except Exception:  # noqa: F401 unrelated code, unrelated reason
        return None
"""
        },
        "noqa",
    )

    repo.branch("convert", "main")
    repo.commit(
        {
            "pkg/mod.py": BASE
            + """

def compile_entry(fn):
    try:
        return fn()
    except Exception as error:
        raise XUnsupportedError("cannot compile") from error


def passes_on(fn):
    try:
        return fn()
    except Exception as error:
        logger.error("compile failed: %s", error)
        raise error


def narrow_convert(fn):
    try:
        return fn()
    except (KeyError, IndexError) as error:
        raise XUnsupportedError("bad graph") from error


def propagates_to_user(path):
    try:
        return open(path).read()
    except Exception as error:
        raise ValueError(f"cannot read {path}") from error


def bare_convert(path):
    try:
        return open(path).read()
    except:  # noqa: E722
        raise ValueError(f"cannot read {path}")
""",
            "pkg/entry.py": """
from pkg.errors import XUnsupportedError
from pkg.mod import compile_entry, eager


def run(fn):
    try:
        return compile_entry(fn)
    except XUnsupportedError:
        return eager(fn)
""",
        },
        "convert",
    )

    runtime = """

def load(store, key, fn):
    try:
        return lookup(store, key)
    except torch.OutOfMemoryError:
        raise
    except RuntimeError:
        return eager(fn)


def call_only(fn):
    try:
        return fn()
    except torch.OutOfMemoryError:
        raise
    except RuntimeError:
        return eager(fn)


def load_converting(store, key):
    try:
        return lookup(store, key)
    except torch.OutOfMemoryError:
        raise
    except RuntimeError as error:
        raise XUnsupportedError("runtime failure") from error


def narrow_value(fn):
    try:
        return int(fn())
    except ValueError:
        return 0
"""
    repo.branch("runtime", "main")
    repo.commit({"pkg/mod.py": BASE + runtime}, "runtime handlers")

    repo.branch("runtime-handled", "main")
    handled = runtime.replace(
        "    except torch.OutOfMemoryError:\n        raise\n    except RuntimeError:\n",
        "    except torch.OutOfMemoryError:\n        raise\n    except CacheMissError:\n        raise\n"
        "    except RuntimeError:\n",
    )
    assert handled != runtime
    repo.commit(
        {"pkg/mod.py": BASE.replace("import XUnsupportedError", "import CacheMissError, XUnsupportedError") + handled},
        "runtime handlers that re-raise the cache miss first",
    )

    repo.branch("runtime-no-subclass", "main")
    repo.commit(
        {
            "pkg/errors.py": "class XUnsupportedError(Exception):\n    pass\n",
            "pkg/cache.py": "def lookup(store, key):\n    return store[key]\n",
            "pkg/mod.py": BASE + runtime,
        },
        "runtime handlers in a repository without RuntimeError subclasses that pkg/mod.py can reach",
    )

    repo.branch("diagnostics", "main")
    repo.commit(
        {
            "pkg/mod.py": BASE
            + """

def dump_diagnostics(graph, write):
    try:
        write(graph)
    except Exception:
        logger.warning("could not write the graph dump")


def close_all(actors):
    try:
        actors.close()
    except Exception:
        logger.exception("closing the actors failed")


def purge(queue, remove):
    for path in queue:
        try:
            remove(path)
        except Exception as error:
            logger.warning("could not delete %s: %s", path, error)


def run_rollout(env, policy):
    try:
        turns = env.reset()
        status = policy.play(turns)
    except Exception:
        logger.exception("rollout failed; marking it failed")
        status = Status.ERROR
    return status


def compile_or_log(graph, compile_fn):
    try:
        compiled = compile_fn(graph)
    except Exception:
        logger.exception("compile failed; running eagerly")
        compiled = graph
    return compiled


def skip_quietly(queue, remove):
    for path in queue:
        try:
            remove(path)
        except Exception:
            logger.info("skipped one path")


def main(trainer):
    try:
        trainer.setup()
        trainer.train()
    except KeyboardInterrupt:
        logger.info("interrupted; shutting down")


def compile_graph(graph, write):
    try:
        write(graph)
    except Exception:
        logger.warning("could not compile the graph", exc_info=True)


def compile_or_eager(fn):
    try:
        return fn()
    except Exception:
        # falling back to eager is safe: only slower, never wrong
        return eager(fn)


def run_strategy(fn):
    try:
        return fn()
    except Exception as e:
        # Flag the error
        print(f"strategy failed: {e}")
"""
        },
        "diagnostics",
    )
    repo.checkout("main")
    return repo


def _review(repo: Repo, head: str) -> Review:
    return run_review(repo.path, "main", head, suites="none")


def _by_function(review: Review) -> dict[tuple[str, str], Finding]:
    found = {(f.qualname, f.rule): f for f in review.findings}
    assert len(found) == len(review.findings), "one finding per function and rule"
    return found


def _assert_unconfirmed(finding: Finding, claimed: Severity, shown: Severity = Severity.P2) -> None:
    """`shown`: the cap, P3 for round 26's catch-all around one operation."""
    assert finding.severity is shown
    assert finding.evidence.kind is EvidenceKind.PATTERN and not finding.evidence.confirmed
    assert finding.evidence.claimed is (claimed if claimed.rank < Severity.P2.rank else None)
    assert finding.evidence.text("en").startswith("unconfirmed")


def test_noqa_with_a_reason_is_a_note_and_without_one_stays_a_pattern_finding(repo: Repo) -> None:
    review = _review(repo, "noqa")
    found = _by_function(review)
    noted = found[("push_metrics", "broad-except")]
    assert (noted.severity, noted.message_id) == (Severity.P3, "broad-except.noqa-reason")
    assert noted.message == (
        "`except Exception` is a deliberate catch-all (`# noqa: BLE001`: "
        "a failed metrics push must never fail the compile)"
    )
    above = found[("reason_above", "broad-except")]
    assert (above.severity, above.message_id) == (Severity.P3, "broad-except.noqa-reason")
    assert "recompiling is always safe" in above.message
    for name in ("no_reason", "other_code"):
        bare = found[(name, "broad-except")]
        assert bare.message_id == "broad-except.swallows-one-operation"
        _assert_unconfirmed(bare, Severity.P0, Severity.P3)
    assert not review.blocking
    markdown = render_markdown(review, "en")
    assert "unconfirmed (would be P0-BLOCKER with proof): a static pattern" in markdown


def test_a_catch_all_converted_into_another_type_is_reported(repo: Repo) -> None:
    review = _review(repo, "convert")
    found = _by_function(review)
    converted = found[("compile_entry", "broad-except")]
    assert converted.message_id == "broad-except.converts"
    assert converted.message == (
        "`except Exception` turns every error into `XUnsupportedError`, which pkg/entry.py:8 catch without re-raising"
    )
    assert "`AssertionError`" in converted.why
    _assert_unconfirmed(converted, Severity.P0)
    # re-raising the same exception, converting narrow types, and converting into a type nothing in
    # the repository catches (it reaches the user, chained) are fine
    assert set(found) == {("compile_entry", "broad-except"), ("bare_convert", "broad-except")}
    # a bare `except:` that converts still catches KeyboardInterrupt: the bare-handler note
    bare = found[("bare_convert", "broad-except")]
    assert (bare.severity, bare.message_id) == (Severity.P3, "broad-except.bare-reraises")


def test_runtime_error_handler_names_the_repository_subclasses_it_catches(repo: Repo) -> None:
    review = _review(repo, "runtime")
    found = _by_function(review)
    swallowed = found[("load", "caught-own-subclass")]
    assert swallowed.message_id == "caught-own-subclass.swallows"
    assert swallowed.params["classes"] == ["pkg.errors.CacheMissError", "pkg.errors.ArtifactCorrupt"]
    assert swallowed.message == (
        "`except RuntimeError` also swallows this repository's `pkg.errors.CacheMissError` (pkg/errors.py:1), "
        "`pkg.errors.ArtifactCorrupt` (pkg/errors.py:5)"
    )
    assert "except CacheMissError: raise" in swallowed.fix
    _assert_unconfirmed(swallowed, Severity.P2)
    # the test-only subclass is not raised by library code; ShardMismatch is raised only in a module
    # pkg/mod.py does not import
    assert "FakeDeviceError" not in str(swallowed.params) and "ShardMismatch" not in str(swallowed.params)
    converted = found[("load_converting", "caught-own-subclass")]
    assert converted.message_id == "caught-own-subclass.converts"
    assert converted.params["target"] == "XUnsupportedError"
    # OOM is re-raised first: no runtime-error-fallback; `call_only` calls nothing that raises a
    # repository subclass; no repository ValueError subclass
    assert set(found) == {("load", "caught-own-subclass"), ("load_converting", "caught-own-subclass")}
    assert any(s.kind == "over-broad-handlers" and s.count == 2 for s in review.signals)


def test_subclasses_handled_first_or_absent_are_not_reported(repo: Repo) -> None:
    handled = _by_function(_review(repo, "runtime-handled"))
    assert ("load", "caught-own-subclass") not in handled
    # the converting handler has no `except CacheMissError: raise` before it
    assert handled[("load_converting", "caught-own-subclass")].params["classes"] == [
        "pkg.errors.CacheMissError",
        "pkg.errors.ArtifactCorrupt",
    ]
    assert _review(repo, "runtime-no-subclass").findings == []


def test_diagnostics_code_and_documented_fallbacks_are_not_blockers(repo: Repo) -> None:
    review = _review(repo, "diagnostics")
    found = _by_function(review)
    diagnostics = found[("dump_diagnostics", "broad-except")]
    assert (diagnostics.severity, diagnostics.message_id) == (Severity.P3, "broad-except.diagnostics")
    assert "`dump_diagnostics`" in diagnostics.message
    # teardown that logs the traceback is a unit boundary: nothing to report
    assert ("close_all", "broad-except") not in found
    # the same handler in code whose job is compiling is the swallowing pattern
    near_miss = found[("compile_graph", "broad-except")]
    assert near_miss.message_id == "broad-except.swallows-one-operation"
    _assert_unconfirmed(near_miss, Severity.P0, Severity.P3)
    documented = found[("compile_or_eager", "broad-except")]
    assert documented.message_id == "broad-except.documented"
    assert "falling back to eager is safe: only slower, never wrong" in documented.message
    _assert_unconfirmed(documented, Severity.P2)
    # a comment that does not say why swallowing is fine documents nothing
    flagged = found[("run_strategy", "broad-except")]
    assert flagged.message_id == "broad-except.swallows-one-operation"
    assert not review.blocking


def test_unit_boundaries_that_report_the_error_are_not_findings(repo: Repo) -> None:
    found = _by_function(_review(repo, "diagnostics"))
    # one loop turn per path, the error logged at warning with the exception itself
    assert ("purge", "broad-except") not in found
    # the rollout is marked failed and its traceback logged; the try is as wide as the unit on purpose
    assert ("run_rollout", "broad-except") not in found
    # near misses: the graph run eagerly with the traceback logged is a fallback all the same; since
    # round 19 a reported one to another path, P3 unconfirmed (the claim stays P0) ...
    substitute = found[("compile_or_log", "broad-except")]
    assert substitute.message_id == "broad-except.reported-other-path"
    assert substitute.severity is Severity.P3 and substitute.evidence.claimed is Severity.P0
    # ... and a loop turn that drops the error without logging it is the silent pattern
    quiet = found[("skip_quietly", "broad-except")]
    assert quiet.message_id == "broad-except.swallows-one-operation"
    # no rule posts the width of a try on its own
    assert not any(rule == "wide-try" for _, rule in found)
