"""Round 26 of the precision benchmark: the severity of a plain catch-all swallow follows the width of
its try, on real git repos reviewed statically (`--suites none`).

- A catch-all whose try guards one operation (`broad_except._operations`: no more than one import or
  statement with a call, reports not counted) is `P3` `broad-except.swallows-one-operation`,
  unconfirmed: it still claims `P0` for the injection experiment; a call followed by a log line is
  one operation. Near misses: a try with two statements with calls stays `broad-except.swallows` at
  `P2` with its width annotation, as do an import and a call, and a `while` loop holding two
  statements with calls; a one-operation try whose silent constant picks the branch after it stays
  `broad-except.decides-route` at `P2` (only the plain swallow moves).
- The two wordings are one finding across base and head (`findings.SAME_FINDING`): an unchanged
  catch-all whose try the change narrows to one operation is not reported again.
- An unchanged one-operation catch-all whose try now binds a name read after it is the round-22
  `P2` `broad-except.guards-new-binding` (`guarded_code.new_binding_finding`), not capped at `P3`
  with the swallow.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes, sub

from reviewbot.findings import Finding
from reviewbot.severity import Severity

KERNELS = """
import logging

from vendor import kernels

logger = logging.getLogger(__name__)


def fused(x):
    try:
        out = kernels.fused_norm(x)
    except Exception:
        out = x * 2
    return out


def fused_bare(x):
    try:
        out = kernels.fused_norm(x)
    except:
        out = x * 2
    return out


def fused_wide(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception:
        out = x * 2
    return out


def fused_logged(x):
    try:
        out = kernels.fused_norm(x)
        logger.info("fused norm used")
    except Exception:
        out = x * 2
    return out


def fused_imported(x):
    try:
        import fast_kernels

        out = fast_kernels.fused_norm(x)
    except Exception:
        out = x * 2
    return out


def drain(jobs, results):
    try:
        while jobs:
            job = jobs.pop()
            results.append(kernels.run(job))
    except Exception:
        results.clear()
    return results


def pick(path):
    try:
        config = kernels.load_config(path)
    except Exception:
        config = None
    if config is not None:
        return kernels.serve(config)
    return kernels.export(path)
"""

NARROWED_BASE = """
from vendor import kernels


def warm(x):
    try:
        kernels.prepare(x)
        out = kernels.fused_norm(x)
    except Exception:
        out = x * 2
        print("fallback")
    return out
"""

NARROWED = sub(
    sub(NARROWED_BASE, "    try:\n        kernels.prepare(x)\n", "    kernels.prepare(x)\n    try:\n"),
    'print("fallback")',
    'print("fallback used")',
)


SCAN_BASE = """
def scan(instructions, target_of, start):
    found = False
    for inst in instructions:
        try:
            location = target_of(inst)
            if location > start:
                found = True
        except Exception:
            pass
    return found
"""

SCAN = sub(
    sub(
        sub(SCAN_BASE, "    found = False\n", "    found = False\n    last = start\n"),
        "                found = True\n",
        "                found = True\n                last = location\n",
    ),
    "    return found\n",
    "    return found, last\n",
)


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round26severity")
    base = {"pkg/__init__.py": "", "pkg/kernels.py": "", "pkg/warm.py": NARROWED_BASE, "pkg/scan.py": SCAN_BASE}
    return review_shapes(path, base, {"pkg/kernels.py": KERNELS, "pkg/warm.py": NARROWED, "pkg/scan.py": SCAN})


def _broad(review: list[Finding], path: str, qualname: str) -> Finding:
    return findings_by_rule(review, path, qualname)["broad-except"]


@pytest.mark.parametrize("qualname", ["fused", "fused_bare", "fused_logged"])
def test_a_catch_all_around_one_operation_is_an_unconfirmed_p3(review: list[Finding], qualname: str) -> None:
    finding = _broad(review, "pkg/kernels.py", qualname)
    assert (finding.message_id, finding.severity) == ("broad-except.swallows-one-operation", Severity.P3)
    assert finding.evidence.claimed is Severity.P0
    text = finding.text("en")
    assert "guards one operation" in text.message and "unconfirmed" in finding.evidence.text("en")


def test_a_catch_all_around_two_statements_with_calls_stays_a_p2_swallow(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/kernels.py", "fused_wide")
    assert (finding.message_id, finding.severity) == ("broad-except.swallows", Severity.P2)
    assert finding.evidence.claimed is Severity.P0
    assert finding.extra["wide_calls"] == 2


@pytest.mark.parametrize("qualname", ["fused_imported", "drain"])
def test_an_import_or_a_loop_of_calls_is_more_than_one_operation(review: list[Finding], qualname: str) -> None:
    # an import and a call, a `while` loop holding two statements with calls: P2, though the width
    # annotation (top-level statements with a call) counts one
    finding = _broad(review, "pkg/kernels.py", qualname)
    assert (finding.message_id, finding.severity) == ("broad-except.swallows", Severity.P2)
    assert "wide_calls" not in finding.extra


def test_a_one_operation_constant_that_picks_the_route_stays_a_p2(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/kernels.py", "pick")
    assert (finding.message_id, finding.severity) == ("broad-except.decides-route", Severity.P2)


def test_a_swallow_whose_try_the_change_narrows_is_the_base_finding(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/warm.py", "warm") == {}


def test_a_new_binding_under_an_unchanged_one_operation_catch_all_stays_a_p2(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/scan.py", "scan")
    assert (finding.message_id, finding.severity) == ("broad-except.guards-new-binding", Severity.P2)
    assert not finding.in_diff and "`last`" in finding.text("en").message
