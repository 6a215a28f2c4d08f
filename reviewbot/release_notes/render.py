"""Rendering the release notes: markdown through a Jinja2 template, JSON with the same content."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jinja2

from reviewbot.release_notes.categorize import Entry, Section
from reviewbot.release_notes.upgrade import UpgradeNotes


@dataclass(frozen=True)
class ReleaseNotes:
    from_ref: str
    to_ref: str
    from_sha: str
    to_sha: str
    sections: tuple[Section, ...]
    upgrade: UpgradeNotes | None  # None: no key-change check configured for this repository


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reviewbot.release_notes", "templates"),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,
)


def to_markdown(notes: ReleaseNotes) -> str:
    return _ENV.get_template("release_notes.md.j2").render(notes=notes)


def _entry(entry: Entry) -> dict[str, Any]:
    change = entry.change
    return {
        "sha": change.sha,
        "number": change.number,
        "title": entry.title,
        "original_title": change.title,
        "scope": entry.scope,
        "breaking": entry.breaking,
        "author": change.author,
        "labels": list(change.labels),
        "url": change.url,
    }


def to_data(notes: ReleaseNotes) -> dict[str, Any]:
    upgrade: dict[str, Any] | None = None
    if notes.upgrade is not None:
        u = notes.upgrade
        upgrade = {
            "cache_key_changed": u.changed,
            "static_closure_changed": u.static_changed,
            "verified": u.verified,
            "introduced": u.introduced,
            "factors_changed": list(u.factors),
            "cases": [{"name": c.name, "old_key": c.old_key, "new_key": c.new_key} for c in u.cases],
            "changed_by": [
                {
                    "sha": c.change.sha,
                    "number": c.change.number,
                    "title": c.change.title,
                    "source": c.source,
                    "factors": list(c.factors),
                    "files": list(c.files),
                }
                for c in u.culprits
            ],
            "hashed_files_changed": {factor: list(files) for factor, files in u.sources},
            "detail": u.detail,
        }
    return {
        "from": {"ref": notes.from_ref, "sha": notes.from_sha},
        "to": {"ref": notes.to_ref, "sha": notes.to_sha},
        "upgrade": upgrade,
        "sections": [{"category": s.category, "changes": [_entry(e) for e in s.entries]} for s in notes.sections],
    }


def to_json(notes: ReleaseNotes) -> str:
    return json.dumps(to_data(notes), indent=2) + "\n"
