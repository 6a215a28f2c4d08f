"""Round 29 of the precision benchmark: the severity of a plain catch-all swallow over a wider try
follows whether its handler shows the error it takes, on real git repos reviewed statically
(`--suites none`).

- A catch-all over a try of more than one operation whose handler shows the error
  (`broad_except._shows_error`: a warning or error log naming the exception, `logger.exception`,
  `traceback.print_exc()`, the exception or its text handed to a call or stored in an attribute) is
  `P3` `broad-except.swallows-reported`, unconfirmed: it still claims `P0` for the injection
  experiment and keeps its width annotation. Near misses stay `broad-except.swallows` at `P2`: a log
  at info level naming the exception, a warning that drops it, a warning under an `if`, and the
  exception's text kept in a local name only.
- A collective in the try keeps the `P2` swallow, whatever the handler shows.
- The two wordings are one finding across base and head (`findings.SAME_FINDING`): an unchanged wide
  catch-all to which the change adds a warning naming the error is not reported again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes, sub

from reviewbot.findings import Finding
from reviewbot.severity import Severity

KERNELS = """
import logging
import traceback

import torch.distributed as dist

from vendor import kernels

logger = logging.getLogger(__name__)


def warned(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception as e:
        logger.warning("fused norm failed, using the slow path: %s", e)
        out = x * 2
    return out


def logged_traceback(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception:
        logger.exception("fused norm failed")
        out = x * 2
    return out


def printed_traceback(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except:
        traceback.print_exc()
        out = x * 2
    return out


def recorded(x, errors):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception as e:
        errors.append(f"fused norm: {e}")
        out = x * 2
    return out


def stored(x, metrics):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception as e:
        metrics.error_msg = str(e)
        out = x * 2
    return out


def info_only(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception as e:
        logger.info("fused norm failed: %s", e)
        out = x * 2
    return out


def warned_without_error(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception:
        logger.warning("fused norm unavailable, using the slow path")
        out = x * 2
    return out


def warned_when_verbose(x, verbose):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception as e:
        if verbose:
            logger.warning("fused norm failed: %s", e)
        out = x * 2
    return out


def text_kept_locally(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception as e:
        message = str(e)
        out = x * 2
    return out


def exchange(x, group):
    try:
        handles = [None] * dist.get_world_size(group)
        dist.all_gather_object(handles, kernels.handle(x), group=group)
    except Exception as e:
        logger.warning("handle exchange failed: %s", e)
        handles = None
    return handles
"""

QUIET_BASE = """
import logging

from vendor import kernels

logger = logging.getLogger(__name__)


def warm(x):
    try:
        y = kernels.prepare(x)
        out = kernels.fused_norm(y)
    except Exception as e:
        out = x * 2
    return out
"""

NOW_WARNED = sub(
    QUIET_BASE, "        out = x * 2\n", '        logger.warning("warm-up failed: %s", e)\n        out = x * 2\n'
)


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round29severity")
    base = {"pkg/__init__.py": "", "pkg/kernels.py": "", "pkg/warm.py": QUIET_BASE}
    return review_shapes(path, base, {"pkg/kernels.py": KERNELS, "pkg/warm.py": NOW_WARNED})


def _broad(review: list[Finding], qualname: str) -> Finding:
    return findings_by_rule(review, "pkg/kernels.py", qualname)["broad-except"]


@pytest.mark.parametrize("qualname", ["warned", "logged_traceback", "printed_traceback", "recorded", "stored"])
def test_a_wide_catch_all_that_shows_the_error_is_an_unconfirmed_p3(review: list[Finding], qualname: str) -> None:
    finding = _broad(review, qualname)
    assert (finding.message_id, finding.severity) == ("broad-except.swallows-reported", Severity.P3)
    assert finding.evidence.claimed is Severity.P0
    assert finding.extra["wide_calls"] == 2
    assert "shows the error" in finding.text("en").message
    assert "unconfirmed" in finding.evidence.text("en")
    assert "报告了错误" in finding.text("zh").message


@pytest.mark.parametrize("qualname", ["info_only", "warned_without_error", "warned_when_verbose", "text_kept_locally"])
def test_a_wide_catch_all_that_hides_the_error_stays_a_p2_swallow(review: list[Finding], qualname: str) -> None:
    finding = _broad(review, qualname)
    assert (finding.message_id, finding.severity) == ("broad-except.swallows", Severity.P2)
    assert finding.evidence.claimed is Severity.P0


def test_a_warned_catch_all_around_a_collective_stays_a_p2(review: list[Finding]) -> None:
    finding = _broad(review, "exchange")
    assert (finding.message_id, finding.severity) == ("broad-except.swallows", Severity.P2)
    assert finding.extra["collective"] == "dist.all_gather_object"


def test_a_warning_added_to_an_unchanged_wide_catch_all_is_the_base_finding(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/warm.py", "warm") == {}
