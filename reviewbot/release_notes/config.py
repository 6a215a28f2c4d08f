"""What the release notes take from the repository's `.reviewbot.yml`: the grouping settings
and, when cache-key roots are configured, the key-change detector."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from reviewbot.release_notes.settings import ReleaseNotesSettings, parse_release_notes_settings
from reviewbot.release_notes.upgrade import Detector


@dataclass(frozen=True)
class ReleaseConfig:
    settings: ReleaseNotesSettings
    detect: Detector | None


def load_release_config(repo: Path) -> ReleaseConfig:
    path = repo / ".reviewbot.yml"
    if not path.is_file():
        return ReleaseConfig(ReleaseNotesSettings(), None)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return ReleaseConfig(parse_release_notes_settings(data.get("release_notes")), None)
