"""`reviewbot release-notes --from REF --to REF [--repo PATH] [--github OWNER/REPO]
[--format markdown|json] [--out FILE] [--draft-release TAG]`.

Progress lines go to stderr; the notes go to stdout, or to `--out`. `--draft-release` always
posts the markdown body, whatever `--format` prints. Exit code 2 for bad input (unknown ref,
malformed `--github`, a GitHub API that cannot be reached or refuses the repository or token,
invalid `.reviewbot.yml`, a published release with the draft's tag, `--out` naming a directory).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from github.Repository import Repository

from reviewbot.gitrepo import GitRepo
from reviewbot.release_notes import github_lookup
from reviewbot.release_notes.categorize import group
from reviewbot.release_notes.config import load_release_config, make_source_diff
from reviewbot.release_notes.history import check_order, collect_changes, resolve
from reviewbot.release_notes.render import ReleaseNotes, to_json, to_markdown
from reviewbot.release_notes.upgrade import upgrade_notes


def _progress(message: str) -> None:
    print(f"release-notes: {message}", file=sys.stderr)


def _connect(full_name: str) -> Repository:
    """`full_name` on GitHub, with the API URL and token of this command's environment."""
    api_url = os.environ.get("GITHUB_API_URL", github_lookup.DEFAULT_API_URL)
    return github_lookup.connect(full_name, os.environ.get("GITHUB_TOKEN"), api_url)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "release-notes",
        help="release notes between two refs, with an upgrade warning when the cache key changed",
        description="Release notes between two refs: merged PRs grouped by labels and subject prefixes, opening "
        "with 'Upgrade notes: compiled caches must be rebaked' when the compiled-artifact cache key differs. "
        "GitHub access uses GITHUB_TOKEN and GITHUB_API_URL (default https://api.github.com).",
    )
    parser.add_argument("--from", dest="from_ref", required=True, metavar="REF", help="the previous release")
    parser.add_argument("--to", dest="to_ref", required=True, metavar="REF", help="the release being described")
    parser.add_argument("--repo", type=Path, default=Path("."), metavar="PATH", help="the git repository (default .)")
    parser.add_argument("--github", metavar="OWNER/REPO", help="read PR titles, labels and authors from GitHub")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--out", type=Path, metavar="FILE", help="write the notes here instead of stdout")
    parser.add_argument(
        "--draft-release", metavar="TAG", help="create or update the draft GitHub release TAG (needs --github)"
    )
    parser.set_defaults(func=run)


def build_notes(args: argparse.Namespace) -> ReleaseNotes:
    repo = args.repo.resolve()
    if not repo.is_dir() or GitRepo(repo).git("rev-parse", "--git-dir", check=False).strip() == "":
        raise ValueError(f"--repo {args.repo} is not a git repository")
    from_sha, to_sha = resolve(repo, args.from_ref), resolve(repo, args.to_ref)
    check_order(repo, from_sha, to_sha, args.from_ref, args.to_ref)
    config = load_release_config(repo, to_sha)
    _progress(f"collecting changes {args.from_ref}..{args.to_ref}")
    changes = collect_changes(repo, from_sha, to_sha)
    if args.github:
        numbered = sum(c.number is not None for c in changes)
        _progress(f"reading {numbered} pull request(s) from GitHub {args.github}")
        changes = github_lookup.enrich(changes, _connect(args.github))
    upgrade = None
    if config.detect is not None:
        upgrade = upgrade_notes(
            changes,
            from_sha,
            to_sha,
            config.detect,
            config.settings.invalidates_label,
            labels_known=bool(args.github),
            sources=make_source_diff(repo, config.to_config, (from_sha, to_sha)),
        )
    else:
        _progress("no cache-key roots configured in .reviewbot.yml; skipping the upgrade check")
    sections = tuple(group(changes, config.settings))
    return ReleaseNotes(args.from_ref, args.to_ref, from_sha, to_sha, sections, upgrade)


def run(args: argparse.Namespace) -> int:
    if args.draft_release and not args.github:
        print("reviewbot release-notes: --draft-release needs --github OWNER/REPO", file=sys.stderr)
        return 2
    if args.out is not None and args.out.is_dir():
        print(f"reviewbot release-notes: --out {args.out}: is a directory (name a file)", file=sys.stderr)
        return 2
    try:
        notes = build_notes(args)
    except ValueError as exc:  # unknown ref, bad --github, invalid .reviewbot.yml (ConfigError)
        print(f"reviewbot release-notes: {exc}", file=sys.stderr)
        return 2
    text = to_json(notes) if args.format == "json" else to_markdown(notes)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        _progress(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    if args.draft_release:
        try:
            repo = _connect(args.github)
            release, created = github_lookup.upsert_draft_release(
                repo, args.draft_release, args.draft_release, to_markdown(notes), notes.to_sha
            )
        except ValueError as exc:  # GitHub unreachable or refusing; a published release already has the tag
            print(f"reviewbot release-notes: {exc}", file=sys.stderr)
            return 2
        _progress(f"{'created' if created else 'updated'} draft release {args.draft_release}: {release.html_url}")
    return 0
