"""The upgrade warning: does the compiled-artifact cache key differ between the two refs, and
which changes made it differ.

The check between `--from` and `--to` is the review engine's key-change detection (static
closure diff confirmed by the probe). Attribution per change uses the `cache: invalidates`
label when GitHub data is available (the service sets it on PRs whose review confirmed a key
change); changes without GitHub data (commits without a PR number, numbers GitHub does not know
as PRs, or no `--github`) are checked by running the detection on the commit against its first
parent. When no change carries the label, every change is checked that way.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass

from reviewbot.release_notes.history import Change

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaseKeys:
    name: str
    old_key: str | None
    new_key: str | None


@dataclass(frozen=True)
class KeyDiff:
    """What the release notes need from one key-change detection run."""

    confirmed: bool
    static_changed: bool
    # False: no key root exists, or the static diff saw a change the probe could not settle.
    verified: bool
    factors: tuple[str, ...]
    cases: tuple[CaseKeys, ...]
    detail: str = ""
    introduced: bool = False  # the key roots exist at head only: there was no earlier key or cache


Detector = Callable[[str, str], KeyDiff]
"""(base sha, head sha) -> KeyDiff."""


@dataclass(frozen=True)
class Culprit:
    change: Change
    source: str  # "label" or "detection"
    factors: tuple[str, ...]


@dataclass(frozen=True)
class UpgradeNotes:
    changed: bool
    static_changed: bool
    verified: bool
    factors: tuple[str, ...]
    cases: tuple[CaseKeys, ...]
    culprits: tuple[Culprit, ...]
    detail: str
    introduced: bool = False


def _progress(message: str) -> None:
    print(f"release-notes: {message}", file=sys.stderr)


def attribute(changes: list[Change], detect: Detector, invalidates_label: str, labels_known: bool) -> list[Culprit]:
    """The changes that changed the key, in history order."""
    use_labels = labels_known and any(invalidates_label in change.labels for change in changes)
    if labels_known and not use_labels:
        logger.warning("no change carries the %r label; running the detection per change instead", invalidates_label)
    culprits = []
    for change in changes:
        if use_labels and change.from_github:
            if invalidates_label in change.labels:
                culprits.append(Culprit(change, "label", ()))
            continue
        assert change.parents, f"commit {change.sha} in a FROM..TO range has no parent"
        _progress(f"checking the cache key at {change.sha[:10]} against its first parent")
        diff = detect(change.parents[0], change.sha)
        if diff.confirmed:
            culprits.append(Culprit(change, "detection", diff.factors))
    return culprits


def upgrade_notes(
    changes: list[Change], from_sha: str, to_sha: str, detect: Detector, invalidates_label: str, labels_known: bool
) -> UpgradeNotes:
    _progress(f"checking the cache key between {from_sha[:10]} and {to_sha[:10]}")
    overall = detect(from_sha, to_sha)
    if not overall.confirmed:
        if overall.static_changed:
            logger.warning("cache key not confirmed as changed, no upgrade warning: %s", overall.detail)
        return UpgradeNotes(
            False, overall.static_changed, overall.verified, (), overall.cases, (), overall.detail, overall.introduced
        )
    culprits = attribute(changes, detect, invalidates_label, labels_known)
    return UpgradeNotes(True, True, True, overall.factors, overall.cases, tuple(culprits), overall.detail)
