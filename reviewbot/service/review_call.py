"""The one place the service calls the review engine: `review(checkout, base, head, pr_body, ...)`.

`run_pr_code=False` (a fork PR without a maintainer's authorisation of this head) reviews with
`suites="none"`: static rules and the static cache-key closure diff only; the key probe, the
test-plan verification and the CPU suites execute the PR's code and wait for `/rerun-gpu`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path

from reviewbot.engine import run_review
from reviewbot.findings import Finding
from reviewbot.keychange import KeyChange
from reviewbot.render import render_markdown

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ReviewOutcome:
    """`cache_label`: whether the PR should carry `cache: invalidates` (True: the probe confirmed a
    key change; False: the probe ran and kept every key, or nothing in the key's closure changed;
    None: unknown, the probe could not run, so a label already there stays)."""

    findings: Sequence[Finding]
    markdown: str
    blocking: bool
    invalidates_cache: bool
    cache_label: bool | None


def review(
    checkout: Path,
    base: str,
    head: str,
    pr_body: str,
    *,
    run_pr_code: bool,
    pr_title: str = "",
    log_dir: Path | None = None,
) -> ReviewOutcome:
    """`log_dir` keeps the logs of suites the review runs (default: inside the checkout)."""
    if not run_pr_code:
        logger.info("review of %s without running PR code (fork, not authorised)", head[:12])
    result = run_review(
        checkout,
        base,
        head,
        pr_body=pr_body,
        pr_title=pr_title or None,
        log_dir=log_dir,
        suites="static" if run_pr_code else "none",
        progress=lambda line: logger.info("review %s: %s", head[:12], line),
    )
    # Stage timings and suite/test durations vary run to run; without timings the template leaves
    # durations out too, so an unchanged review renders the same text and a
    # rerun of one head leaves the summary comment untouched.
    markdown = render_markdown(dataclasses.replace(result, timings={}), result.language)
    return ReviewOutcome(
        findings=list(result.findings),
        markdown=markdown,
        blocking=result.blocking,
        invalidates_cache=result.invalidates_cache,
        cache_label=_cache_label(result.key_change),
    )


def _cache_label(change: KeyChange | None) -> bool | None:
    if change is None:
        return None
    if change.confirmed:
        return True
    if change.probe_status == "ok" or not change.static_changed:
        return False
    return None
