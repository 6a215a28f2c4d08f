"""The upgrade warning: does the compiled-artifact cache key differ between the two refs, and
which changes made it differ.

The check between `--from` and `--to` is the review engine's key-change detection (static
closure diff confirmed by the probe). Attribution per change uses the `cache: invalidates`
label when GitHub data is available (the service sets it on PRs whose review confirmed a key
change); changes without GitHub data (commits without a PR number, numbers GitHub does not know
as PRs, or no `--github`) are checked by running the detection on the commit against its first
parent. When no change carries the label, every change is checked that way.

The key also hashes the bytes of some files when the repository's probe names them (its
`"sources"`, e.g. the modules `compiler_source` hashes): a change to one of those is a key change
whatever the closure diff says (a logging line in a hashed module rebakes caches too). `SourceDiff`
gives, for two revisions, the hashed files that differ per factor; every change touching one is a
culprit (source `hashed-source` when nothing else named it), also on the label path. Without a
source factor the attribution is the detection's and the labels' alone.
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

SourceDiff = Callable[[str, str], dict[str, tuple[str, ...]]]
"""(base sha, head sha) -> factor -> the files it hashes that differ between them (changed ones only)."""


def no_source_factors(base: str, head: str) -> dict[str, tuple[str, ...]]:
    """The `SourceDiff` of a repository whose probe names no hashed files."""
    return {}


@dataclass(frozen=True)
class Culprit:
    change: Change
    source: str  # "label", "detection" or "hashed-source"
    factors: tuple[str, ...]
    files: tuple[str, ...] = ()  # files the key hashes by their bytes that this change modified


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
    sources: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (factor, hashed files that changed)


def _progress(message: str) -> None:
    print(f"release-notes: {message}", file=sys.stderr)


def _merged(factors: tuple[str, ...], more: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*factors, *more]))


def _files(touched: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(sorted({path for paths in touched.values() for path in paths}))


def attribute(
    changes: list[Change],
    detect: Detector,
    invalidates_label: str,
    labels_known: bool,
    sources: SourceDiff = no_source_factors,
) -> list[Culprit]:
    """The changes that changed the key, in history order."""
    use_labels = labels_known and any(invalidates_label in change.labels for change in changes)
    if labels_known and not use_labels:
        logger.warning("no change carries the %r label; running the detection per change instead", invalidates_label)
    culprits = []
    for change in changes:
        assert change.parents, f"commit {change.sha} in a FROM..TO range has no parent"
        touched = sources(change.parents[0], change.sha)
        if use_labels and change.from_github:
            if invalidates_label in change.labels:
                culprits.append(Culprit(change, "label", tuple(touched), _files(touched)))
            elif touched:
                culprits.append(Culprit(change, "hashed-source", tuple(touched), _files(touched)))
            continue
        _progress(f"checking the cache key at {change.sha[:10]} against its first parent")
        diff = detect(change.parents[0], change.sha)
        if diff.confirmed:
            culprits.append(Culprit(change, "detection", _merged(diff.factors, touched), _files(touched)))
        elif touched:
            culprits.append(Culprit(change, "hashed-source", tuple(touched), _files(touched)))
    return culprits


def upgrade_notes(
    changes: list[Change],
    from_sha: str,
    to_sha: str,
    detect: Detector,
    invalidates_label: str,
    labels_known: bool,
    sources: SourceDiff = no_source_factors,
) -> UpgradeNotes:
    _progress(f"checking the cache key between {from_sha[:10]} and {to_sha[:10]}")
    overall = detect(from_sha, to_sha)
    touched = {} if overall.introduced else sources(from_sha, to_sha)
    if not overall.confirmed and not touched:
        if overall.static_changed:
            logger.warning("cache key not confirmed as changed, no upgrade warning: %s", overall.detail)
        return UpgradeNotes(
            False, overall.static_changed, overall.verified, (), overall.cases, (), overall.detail, overall.introduced
        )
    culprits = attribute(changes, detect, invalidates_label, labels_known, sources)
    detail = overall.detail if overall.confirmed else ""
    return UpgradeNotes(
        True,
        overall.static_changed or overall.confirmed,
        True,
        _merged(overall.factors, touched),
        overall.cases,
        tuple(culprits),
        detail,
        sources=tuple(touched.items()),
    )
