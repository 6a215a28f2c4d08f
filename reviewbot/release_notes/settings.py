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
from dataclasses import field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, ValidationError, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from reviewbot import validation

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


def _compile(text: str) -> re.Pattern[str]:
    try:
        pattern = re.compile(text)
    except re.error as err:
        raise ValueError(f"invalid regular expression {text!r}: {err}") from err
    if "prefix" not in pattern.groupindex:
        raise ValueError(f"pattern {text!r} lacks the named group 'prefix'")
    return pattern


Name = Annotated[StrictStr, Field(min_length=1)]
PrefixPattern = Annotated[Name, AfterValidator(_compile)]


class ReleaseNotesSection(BaseModel):
    """The `release_notes` section as written (all keys optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    categories: list[Name] | None = None
    labels: dict[StrictStr, StrictStr] = {}
    prefixes: dict[StrictStr, StrictStr] = {}
    prefix_patterns: list[PrefixPattern] | None = None
    breaking_category: Name | None = None
    other_category: Name | None = None
    invalidates_label: Name | None = None


@pydantic_dataclass(frozen=True)
class ReleaseNotesSettings:
    """The grouping in effect: every label, prefix, `breaking_category` and `other_category`
    names one of `categories`."""

    categories: tuple[str, ...] = DEFAULT_CATEGORIES
    labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_LABELS))
    prefixes: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PREFIXES))
    prefix_patterns: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in DEFAULT_PREFIX_PATTERNS)
    breaking_category: str = "Breaking changes"
    other_category: str = "Other changes"
    invalidates_label: str = INVALIDATES_LABEL

    @model_validator(mode="after")
    def _targets_are_categories(self) -> ReleaseNotesSettings:
        known = set(self.categories)
        for where, target in (
            *((f"release_notes.labels.{k}", v) for k, v in self.labels.items()),
            *((f"release_notes.prefixes.{k}", v) for k, v in self.prefixes.items()),
            ("release_notes.breaking_category", self.breaking_category),
            ("release_notes.other_category", self.other_category),
        ):
            if target not in known:
                raise ValueError(f"{where}: category {target!r} is not listed in release_notes.categories")
        return self


def _section_error(exc: ValidationError) -> TypeError | ValueError:
    """One line for the section's first problem: TypeError for a wrong type, ValueError otherwise;
    unknown keys are named together."""
    unknown = sorted(
        str(e["loc"][-1]) for e in exc.errors() if len(e["loc"]) == 1 and e["type"] in validation.UNKNOWN_KEY_ERRORS
    )
    if unknown:
        return ValueError(f"release_notes: unknown key(s) {', '.join(unknown)}")
    error = exc.errors()[0]
    line = f"{validation.key_path(error['loc'], 'release_notes')}: {validation.problem(error)}"
    return TypeError(line) if validation.is_type_error(error) else ValueError(line)


def parse_release_notes_settings(section: Any) -> ReleaseNotesSettings:
    """The loader of the `release_notes` section (None means all defaults).

    `labels` and `prefixes` extend the defaults (map a key to a category to override one);
    `categories` and `prefix_patterns` replace them. Unknown keys and wrong types raise
    (ValueError, TypeError), naming the key.
    """
    if section is None:
        return ReleaseNotesSettings()
    try:
        given = ReleaseNotesSection.model_validate(section)
    except ValidationError as exc:
        raise _section_error(exc) from None
    categories = tuple(given.categories) if given.categories is not None else DEFAULT_CATEGORIES
    labels = {**DEFAULT_LABELS, **given.labels}
    prefixes = {**DEFAULT_PREFIXES, **{k.lower(): v for k, v in given.prefixes.items()}}
    if given.categories is not None:
        # Defaults pointing at categories the user removed are dropped; the user's own entries must resolve.
        keep = set(categories)
        user_prefixes = {k.lower() for k in given.prefixes}
        labels = {k: v for k, v in labels.items() if v in keep or k in given.labels}
        prefixes = {k: v for k, v in prefixes.items() if v in keep or k in user_prefixes}
    chosen = given.model_dump(include={"breaking_category", "other_category", "invalidates_label"}, exclude_none=True)
    for key, default in (("breaking_category", "Breaking changes"), ("other_category", "Other changes")):
        if key not in chosen and default not in categories:
            raise ValueError(f"release_notes.{key}: must be set when release_notes.categories omits {default!r}")
    patterns = {"prefix_patterns": tuple(given.prefix_patterns)} if given.prefix_patterns is not None else {}
    try:
        return ReleaseNotesSettings(categories=categories, labels=labels, prefixes=prefixes, **patterns, **chosen)
    except ValidationError as exc:
        raise ValueError(validation.problem(exc.errors()[0])) from None
