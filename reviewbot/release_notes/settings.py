"""The `release_notes` section of `.reviewbot.yml`: how changes are grouped.

A change goes to the first category (in `categories` order) that one of its labels maps to;
failing that, to the category its subject prefix maps to; failing that, to `other_category`.
A breaking conventional prefix (`feat!:`) goes to `breaking_category`.

Each entry of `prefix_patterns` is a regular expression matched at the start of the subject
with a named group `prefix` (looked up case-insensitively in `prefixes`) and optional named
groups `scope` and `breaking`; the whole match is stripped from the displayed title.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_CATEGORIES: tuple[str, ...] = (
    "Breaking changes",
    "Features",
    "Fixes",
    "Performance",
    "Refactoring",
    "Documentation",
    "CI",
    "Tests",
    "Chores",
    "Developer tooling",
    "Other changes",
)

DEFAULT_LABELS: dict[str, str] = {
    "breaking": "Breaking changes",
    "feature": "Features",
    "enhancement": "Features",
    "bug": "Fixes",
    "fix": "Fixes",
    "performance": "Performance",
    "perf": "Performance",
    "refactor": "Refactoring",
    "documentation": "Documentation",
    "docs": "Documentation",
    "ci": "CI",
    "test": "Tests",
    "tests": "Tests",
    "chore": "Chores",
    "dependencies": "Chores",
    "dev": "Developer tooling",
}

DEFAULT_PREFIXES: dict[str, str] = {
    "feat": "Features",
    "feature": "Features",
    "fix": "Fixes",
    "bugfix": "Fixes",
    "perf": "Performance",
    "refactor": "Refactoring",
    "doc": "Documentation",
    "docs": "Documentation",
    "ci": "CI",
    "build": "CI",
    "test": "Tests",
    "tests": "Tests",
    "chore": "Chores",
    "style": "Chores",
    "revert": "Chores",
    "dev": "Developer tooling",
}

DEFAULT_PREFIX_PATTERNS: tuple[str, ...] = (
    # `[Feat] add x`, `[Fix][cache] y`: the bracketed style.
    r"\[(?P<prefix>[A-Za-z]+)\](?:\[(?P<scope>[^\]]+)\])?\s*:?\s*",
    # Conventional commits: `feat: x`, `fix(cache): y`, `feat!: z`, `refactor(aot)!: w`.
    r"(?P<prefix>[A-Za-z]+)(?:\((?P<scope>[^)]+)\))?(?P<breaking>!)?:\s+",
)

INVALIDATES_LABEL = "cache: invalidates"

_KEYS = {
    "categories",
    "labels",
    "prefixes",
    "prefix_patterns",
    "breaking_category",
    "other_category",
    "invalidates_label",
}


@dataclass(frozen=True)
class ReleaseNotesSettings:
    categories: tuple[str, ...] = DEFAULT_CATEGORIES
    labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_LABELS))
    prefixes: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PREFIXES))
    prefix_patterns: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in DEFAULT_PREFIX_PATTERNS)
    breaking_category: str = "Breaking changes"
    other_category: str = "Other changes"
    invalidates_label: str = INVALIDATES_LABEL

    def __post_init__(self) -> None:
        known = set(self.categories)
        for where, target in (
            *((f"release_notes.labels.{k}", v) for k, v in self.labels.items()),
            *((f"release_notes.prefixes.{k}", v) for k, v in self.prefixes.items()),
            ("release_notes.breaking_category", self.breaking_category),
            ("release_notes.other_category", self.other_category),
        ):
            if target not in known:
                raise ValueError(f"{where}: category {target!r} is not listed in release_notes.categories")


def _str_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise TypeError(f"{key}: expected a list of non-empty strings, got {value!r}")
    return tuple(value)


def _str_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{key}: expected a mapping of strings to strings, got {value!r}")
    return dict(value)


def _str(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _compile_patterns(patterns: tuple[str, ...], key: str) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for i, text in enumerate(patterns):
        try:
            pattern = re.compile(text)
        except re.error as err:
            raise ValueError(f"{key}[{i}]: invalid regular expression {text!r}: {err}") from err
        if "prefix" not in pattern.groupindex:
            raise ValueError(f"{key}[{i}]: pattern {text!r} lacks the named group 'prefix'")
        compiled.append(pattern)
    return tuple(compiled)


def parse_release_notes_settings(section: Any) -> ReleaseNotesSettings:
    """Validate the `release_notes` section (None means all defaults).

    `labels` and `prefixes` extend the defaults (map a key to a category to override one);
    `categories` and `prefix_patterns` replace them. Unknown keys and wrong types raise,
    naming the key.
    """
    if section is None:
        return ReleaseNotesSettings()
    if not isinstance(section, dict):
        raise TypeError(f"release_notes: expected a mapping, got {section!r}")
    unknown = sorted(set(section) - _KEYS)
    if unknown:
        raise ValueError(f"release_notes: unknown key(s) {', '.join(map(str, unknown))}")
    kwargs: dict[str, Any] = {}
    if "categories" in section:
        kwargs["categories"] = _str_list(section["categories"], "release_notes.categories")
    labels = dict(DEFAULT_LABELS)
    labels.update(_str_map(section.get("labels", {}), "release_notes.labels"))
    prefixes = dict(DEFAULT_PREFIXES)
    prefixes.update({k.lower(): v for k, v in _str_map(section.get("prefixes", {}), "release_notes.prefixes").items()})
    if "categories" in section:
        # Defaults pointing at categories the user removed are dropped; the user's own entries must resolve.
        keep = set(kwargs["categories"])
        user_labels = section.get("labels", {})
        user_prefixes = {k.lower() for k in section.get("prefixes", {})}
        labels = {k: v for k, v in labels.items() if v in keep or k in user_labels}
        prefixes = {k: v for k, v in prefixes.items() if v in keep or k in user_prefixes}
    kwargs["labels"] = labels
    kwargs["prefixes"] = prefixes
    if "prefix_patterns" in section:
        patterns = _str_list(section["prefix_patterns"], "release_notes.prefix_patterns")
        kwargs["prefix_patterns"] = _compile_patterns(patterns, "release_notes.prefix_patterns")
    for key in ("breaking_category", "other_category", "invalidates_label"):
        if key in section:
            kwargs[key] = _str(section[key], f"release_notes.{key}")
    categories = kwargs.get("categories", DEFAULT_CATEGORIES)
    for key, default in (("breaking_category", "Breaking changes"), ("other_category", "Other changes")):
        if key not in kwargs and default not in categories:
            raise ValueError(f"release_notes.{key}: must be set when release_notes.categories omits {default!r}")
    return ReleaseNotesSettings(**kwargs)
