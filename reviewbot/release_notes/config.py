"""What the release notes take from the repository's `.reviewbot.yml` at the `--to` revision:
the grouping settings and, when cache-key roots are configured, the key-change detector."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from reviewbot.keychange import KeyChange, detect_key_change
from reviewbot.release_notes.settings import ReleaseNotesSettings
from reviewbot.release_notes.upgrade import CaseKeys, Detector, KeyDiff
from reviewbot.repo_config import RepoConfig, load_config


@dataclass(frozen=True)
class ReleaseConfig:
    settings: ReleaseNotesSettings
    detect: Detector | None  # None: no cache-key roots configured


def _progress(message: str) -> None:
    print(f"release-notes: {message}", file=sys.stderr)


def key_diff(change: KeyChange) -> KeyDiff:
    detail = ""
    verified = change.roots_found and (change.confirmed or not change.static_changed or change.probe_status == "ok")
    if not change.roots_found:
        detail = f"none of the configured cache-key roots ({', '.join(change.roots)}) exists at either revision"
    elif change.static_changed and not change.confirmed:
        if change.probe_status == "ok":
            detail = "the key's code changed, but the probe computes the same key for every reference case"
        elif change.probe_status == "not-configured":
            detail = "the key's code changed and no probe is configured to confirm it"
        else:
            lines = [line for line in change.probe_error.splitlines() if line.strip()]
            detail = f"the key's code changed, but the probe {change.probe_status}" + (
                f" ({lines[-1].strip()})" if lines else ""
            )
    cases = tuple(CaseKeys(c.case, c.old_key, c.new_key) for c in change.cases)
    return KeyDiff(change.confirmed, change.static_changed, verified, tuple(change.factors_changed), cases, detail)


def make_detector(repo: Path, config: RepoConfig) -> Detector:
    def detect(base: str, head: str) -> KeyDiff:
        return key_diff(detect_key_change(repo, base, head, config, progress=_progress))

    return detect


def load_release_config(repo: Path, revision: str) -> ReleaseConfig:
    config = load_config(repo, revision)
    detect = make_detector(repo, config) if config.key_roots else None
    return ReleaseConfig(config.release_notes, detect)
