"""What the release notes take from the repository's `.reviewbot.yml` at the `--to` revision:
the grouping settings and, when cache-key roots are configured, the key-change detector and the
check of the files the key hashes by their bytes (the probe's `"sources"`)."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reviewbot.gitrepo import GitRepo
from reviewbot.keychange import KeyChange, detect_key_change
from reviewbot.keychange.probe import changed_sources, run_probe
from reviewbot.release_notes.settings import ReleaseNotesSettings
from reviewbot.release_notes.upgrade import CaseKeys, Detector, KeyDiff, SourceDiff
from reviewbot.repo_config import ConfigError, RepoConfig, load_config

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReleaseConfig:
    settings: ReleaseNotesSettings
    detect: Detector | None  # None: no cache-key roots configured
    to_config: RepoConfig


def _progress(message: str) -> None:
    print(f"release-notes: {message}", file=sys.stderr)


def key_diff(change: KeyChange) -> KeyDiff:
    detail = ""
    verified = change.roots_found and (
        change.confirmed or change.introduced or not change.static_changed or change.probe_status == "ok"
    )
    if not change.roots_found:
        detail = f"none of the configured cache-key roots ({', '.join(change.roots)}) exists at either revision"
    elif change.introduced:
        detail = "the cache-key roots first appear in this range"
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
    factors = tuple(change.factors_changed)
    return KeyDiff(change.confirmed, change.static_changed, verified, factors, cases, detail, change.introduced)


def _config_at(repo: Path, to_config: RepoConfig) -> Callable[[str], RepoConfig]:
    """Each revision's key roots and probe come from its own `.reviewbot.yml` (the key's module
    may move between releases); a revision whose file names no roots, or is invalid, uses the
    `--to` revision's."""

    @functools.cache
    def config_at(sha: str) -> RepoConfig:
        try:
            own = load_config(repo, sha)
        except ConfigError as exc:
            logger.warning("%s: invalid .reviewbot.yml (%s); using the --to revision's key roots", sha[:10], exc)
            return to_config
        return own if own.key_roots else to_config

    return config_at


def make_source_diff(repo: Path, to_config: RepoConfig, revisions: tuple[str, ...]) -> SourceDiff:
    """The files the key hashes by their bytes, per factor, as the probe names them (`"sources"`) at
    each of `revisions` (the range's ends: a file hashed at either counts), run once on first use;
    then for any two revisions, those of them that differ. A revision without a probe, or whose
    probe fails, contributes no files (logged)."""
    config_at = _config_at(repo, to_config)
    git = GitRepo(repo)

    @functools.cache
    def hashed() -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for sha in revisions:
            probe = config_at(sha).probe
            if probe is None:
                continue
            _progress(f"asking the key probe at {sha[:10]} which files the key hashes")
            run = run_probe(git, sha, probe)
            if run.status != "ok":
                logger.warning(
                    "%s: the key probe %s (%s); its hashed files are not known", sha[:10], run.status, run.error
                )
                continue
            for factor, paths in run.sources.items():
                out.setdefault(factor, set()).update(paths)
        return {factor: frozenset(paths) for factor, paths in out.items()}

    def diff(base: str, head: str) -> dict[str, tuple[str, ...]]:
        sources = hashed()
        return changed_sources(git, base, head, sources) if sources else {}

    return diff


def make_detector(repo: Path, to_config: RepoConfig) -> Detector:
    """Key-change detection between two revisions, each with its own `.reviewbot.yml`'s roots."""
    config_at = _config_at(repo, to_config)

    def detect(base: str, head: str) -> KeyDiff:
        change = detect_key_change(repo, base, head, config_at(head), base_config=config_at(base), progress=_progress)
        return key_diff(change)

    return detect


def load_release_config(repo: Path, revision: str) -> ReleaseConfig:
    config = load_config(repo, revision)
    detect = make_detector(repo, config) if config.key_roots else None
    return ReleaseConfig(config.release_notes, detect, config)
