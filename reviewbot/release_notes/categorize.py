"""Grouping changes into release-notes categories: labels first, then subject prefixes."""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.release_notes.history import Change
from reviewbot.release_notes.settings import ReleaseNotesSettings


@dataclass(frozen=True)
class Entry:
    """A change as the notes show it: its category, the title with the prefix stripped, its scope."""

    change: Change
    category: str
    title: str
    scope: str | None
    breaking: bool


@dataclass(frozen=True)
class Section:
    category: str
    entries: tuple[Entry, ...]


def _split_prefix(title: str, settings: ReleaseNotesSettings) -> tuple[str | None, str | None, bool, str]:
    """(prefix lowercased, scope, breaking, title without the prefix) for the first pattern whose prefix is known."""
    for pattern in settings.prefix_patterns:
        match = pattern.match(title)
        if match and match["prefix"].lower() in settings.prefixes:
            groups = match.groupdict()
            rest = title[match.end() :].strip() or title
            return match["prefix"].lower(), groups.get("scope"), bool(groups.get("breaking")), rest
    return None, None, False, title


def categorize(change: Change, settings: ReleaseNotesSettings) -> Entry:
    prefix, scope, breaking, title = _split_prefix(change.title, settings)
    by_label = [settings.labels[label] for label in change.labels if label in settings.labels]
    if by_label:
        category = min(by_label, key=settings.categories.index)
    elif breaking:
        category = settings.breaking_category
    elif prefix is not None:
        category = settings.prefixes[prefix]
    else:
        category = settings.other_category
    return Entry(change, category, title, scope, breaking)


def group(changes: list[Change], settings: ReleaseNotesSettings) -> list[Section]:
    """Non-empty sections in `settings.categories` order, entries in history order."""
    entries = [categorize(change, settings) for change in changes]
    return [
        Section(category, tuple(e for e in entries if e.category == category))
        for category in settings.categories
        if any(e.category == category for e in entries)
    ]
