"""The one place the service calls the review engine: `review(checkout, base, head, pr_body, ...)`.

`run_probe=False` (a fork PR without a maintainer's authorisation of this head) removes the key
probe from the repository configuration: the probe executes the PR's code, the static rules and
the static closure diff do not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from reviewbot import logger
from reviewbot.engine import run_review
from reviewbot.findings import Finding, Severity
from reviewbot.repo_config import load_config


@dataclasses.dataclass
class ReviewOutcome:
    findings: Sequence[Finding]
    markdown: str
    key_changed: bool

    @property
    def blocking(self) -> bool:
        return any(f.severity == Severity.P0 for f in self.findings)


def review(checkout: Path, base: str, head: str, pr_body: str, *, run_probe: bool) -> ReviewOutcome:
    config = load_config(checkout, head)
    if not run_probe and config.probe is not None:
        logger.info("key probe of %s skipped: fork PR code runs only after a maintainer's /rerun-gpu", head[:12])
        config = dataclasses.replace(config, probe=None)
    result = run_review(
        checkout,
        base,
        head,
        pr_body=pr_body,
        suites="static",
        config=config,
        progress=lambda line: logger.info("review %s: %s", head[:12], line),
    )
    return ReviewOutcome(findings=list(result.findings), markdown=result.markdown, key_changed=result.key_changed)
