"""`reviewbot review`: review what a branch proposes to merge, print it, save it, exit 1 on a P0.

With no arguments it reviews `main..HEAD` (three-dot: from the merge base) of the repository
around the current directory. When HEAD is the base itself (nothing to merge, e.g. right after
cloning main) it says so on stderr and reviews the last commit, `HEAD~1..HEAD`, instead; a
repository with a single commit has nothing to review and exits 0 with that message.

Output: `--format text` (the default on a terminal) prints the review plain
(`reviewbot.render.terminal`), coloured by severity where the terminal takes it; `markdown` (the
default otherwise) prints the GitHub markdown; `json` the review's data. The saved file (and
`--out`) is the markdown (or the JSON) whatever is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from reviewbot.engine import SUITE_MODES, run_review
from reviewbot.gitrepo import GitError, GitRepo, NoMergeBase
from reviewbot.render import render_markdown
from reviewbot.render.terminal import to_terminal, wants_colour
from reviewbot.repo_config import CONFIG_FILE, LANGUAGES, ConfigError, differing_keys, load_config, load_config_file
from reviewbot.review import Note
from reviewbot.suites import reviewbot_dir


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "review",
        help="review a branch against its base (static rules, cache-key change, suites)",
        description="Review exactly what HEAD (or --head) proposes to merge into --base: the diff from "
        "merge-base(base, head) to head. Prints the review, saves it under .reviewbot/reviews/, and exits 1 "
        "when a P0-BLOCKER stands (0 otherwise), so it works as a pre-push hook. When head equals the base "
        "(nothing to merge, e.g. on main right after install) it says so and reviews the last commit "
        "(HEAD~1..HEAD) instead. Progress lines go to stderr. Configuration: the .reviewbot.yml committed at "
        "the reviewed head (as pull-request reviews read it), or --config FILE (at both revisions); a "
        "working-tree .reviewbot.yml "
        "that differs from the committed one is named in a warning, not used.",
    )
    parser.add_argument(
        "--repo", type=Path, default=Path("."), help="repository to review (default: current directory)"
    )
    parser.add_argument("--base", default=None, help="base branch (default: main, else master, else origin/main)")
    parser.add_argument("--head", default="HEAD", help="revision to review (default: HEAD)")
    parser.add_argument(
        "--pr-body", type=Path, default=None, help="file with the PR description (its test plan is verified)"
    )
    parser.add_argument("--pr-title", default=None, help="PR title shown in the summary")
    parser.add_argument(
        "--suites",
        default="static",
        help="none: run no code of the revision; static (default): key probe, test plan, CPU suites and "
        "the exception-injection experiment; "
        "all: every configured suite; or a comma-separated list of suite names (all and named suites also "
        "re-run failing tests under coverage to name the changed lines each executes)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default=None,
        help="text: plain, coloured by severity on a terminal (NO_COLOR and TERM=dumb turn colour off); "
        "markdown: GitHub markdown; json: the review's data (default: text on a terminal, markdown otherwise; "
        "the saved file and --out are markdown for text)",
    )
    parser.add_argument("--lang", choices=LANGUAGES, default=None, help="review language (default: .reviewbot.yml)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write the review to this file (markdown, or JSON with --format json)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="read the configuration from this file instead of the committed .reviewbot.yml, at the head "
        "and at the merge base (to try a configuration before committing it)",
    )
    parser.set_defaults(func=run)


def _progress(line: str) -> None:
    print(f"reviewbot: {line}", file=sys.stderr, flush=True)


def _default_base(git: GitRepo) -> str:
    for cand in ("main", "master", "origin/main", "origin/master"):
        if git.has_revision(cand):
            return cand
    raise ValueError("no base branch found (main, master, origin/main); pass --base")


def _save(repo: Path, branch: str, sha: str, text: str, suffix: str) -> Path:
    directory = reviewbot_dir(repo) / "reviews"
    directory.mkdir(exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", branch).strip("-") or "detached"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for attempt in range(1000):
        extra = f"-{attempt}" if attempt else ""
        path = directory / f"branch-{safe}-{sha[:12]}-{stamp}{extra}{suffix}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return path
    raise FileExistsError(f"could not find a free review file name in {directory}")


def _fail(message: str) -> int:
    """Bad input: one line on stderr and exit code 2 (1 is a blocking review)."""
    print(f"reviewbot review: {message}", file=sys.stderr)
    return 2


def _warn_uncommitted_config(root: Path, head: str) -> None:
    """One stderr line when the working tree's `.reviewbot.yml` has uncommitted changes (it
    differs from the one committed at the checked-out HEAD) that the review does not see (it
    differs from the one at `head`, which is the one used). Comparisons are by value."""
    working_path = root / CONFIG_FILE
    # not UTF-8: replaced characters, so it is "not comparable" or differs, never a traceback
    working = working_path.read_text(errors="replace") if working_path.is_file() else None
    with GitRepo(root) as git:
        checked_out = git.read("HEAD", CONFIG_FILE)
        committed = git.read(head, CONFIG_FILE)
    if differing_keys(checked_out, working) == []:
        return  # nothing uncommitted: reviewing another head with its own file is expected
    keys = differing_keys(committed, working)
    if keys == []:
        return
    which = f"top-level keys {', '.join(keys)}" if keys else "not comparable as YAML mappings"
    if committed is None:
        what = (
            f"the working tree has a {CONFIG_FILE} ({which}) but the reviewed head has none committed; the "
            f"defaults are used, pass --config {CONFIG_FILE} to try yours"
        )
    elif working is None:
        what = f"{CONFIG_FILE} is deleted in the working tree; the one committed at the reviewed head is used"
    else:
        what = (
            f"the working tree's {CONFIG_FILE} differs from the one committed at the reviewed head ({which}); "
            f"the committed one is used, pass --config {CONFIG_FILE} to try yours"
        )
    print(f"reviewbot review: warning: {what}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.suites not in SUITE_MODES and not re.fullmatch(r"[\w.-]+(,[\w.-]+)*", args.suites):
        return _fail(f"--suites must be one of {', '.join(SUITE_MODES)} or comma-separated suite names")
    if not args.repo.is_dir():
        return _fail(f"--repo {args.repo}: no such directory")
    if args.out is not None and args.out.is_dir():
        return _fail(f"--out {args.out}: is a directory (name a file)")
    if args.out is not None and not args.out.parent.is_dir():
        return _fail(f"--out {args.out}: no such directory {args.out.parent}")
    with GitRepo(args.repo) as git:
        if git.git("rev-parse", "--git-dir", check=False).strip() == "":
            return _fail(f"{args.repo} is not a git repository")
        if not git.has_revision(args.head):
            return _fail(f"--head {args.head!r} names no revision in {args.repo.resolve()}")
        head = git.rev_parse(args.head)
        if args.base is not None and not git.has_revision(args.base):
            return _fail(f"--base {args.base!r} names no revision in {args.repo.resolve()}")
        try:
            base = args.base or _default_base(git)
        except ValueError as exc:
            return _fail(str(exc))
        branch = git.current_branch() if args.head == "HEAD" else args.head
        notes: list[Note] = []
        try:
            head_is_base = git.merge_base(base, args.head) == head
        except NoMergeBase as exc:
            return _fail(str(exc))
        if head_is_base:
            if not git.has_revision(f"{head}~1"):
                print(
                    f"reviewbot review: {args.head} is the base ({base}) and has no parent; nothing to review",
                    file=sys.stderr,
                )
                return 0
            notes.append(Note("review-note.head-is-base", {"head": args.head, "base": base}))
            base = f"{head}~1"
        root = git.toplevel()
    try:
        config = load_config_file(args.config) if args.config is not None else load_config(root, head)
    except ConfigError as exc:
        return _fail(f"{f'--config {args.config}' if args.config is not None else CONFIG_FILE}: {exc}")
    if args.config is None:
        _warn_uncommitted_config(root, head)
    if args.suites not in SUITE_MODES:
        unknown = [name for name in args.suites.split(",") if name not in config.suites]
        if unknown:
            configured = ", ".join(config.suites) or "none"
            where = f"in {args.config}" if args.config is not None else "at head"
            return _fail(f"--suites names unknown suite(s) {', '.join(unknown)}; configured {where}: {configured}")
    if args.pr_body is not None and not args.pr_body.is_file():
        return _fail(f"--pr-body {args.pr_body}: no such file")
    try:
        pr_body = args.pr_body.read_bytes().decode("utf-8") if args.pr_body else None
    except UnicodeDecodeError as exc:
        return _fail(f"--pr-body {args.pr_body}: not UTF-8 text (byte {exc.start})")
    for note in notes:
        _progress(note.text())
    try:
        review = run_review(
            root,
            base,
            head,
            pr_body=pr_body,
            pr_title=args.pr_title,
            suites=args.suites,
            config=config,
            config_file=str(args.config) if args.config is not None else None,
            base_config=config if args.config is not None else None,
            progress=_progress,
        )
    except ConfigError as exc:
        return _fail(str(exc))
    except GitError as exc:  # a damaged or partial clone: a blob or tree the diff needs is absent
        return _fail(str(exc))
    review.notes.extend(notes)
    output = args.format or ("text" if sys.stdout.isatty() else "markdown")
    if output == "json":
        text = json.dumps(review.to_json(), indent=2, ensure_ascii=False) + "\n"
        suffix = ".json"
    else:
        text = render_markdown(review, args.lang or review.language)
        suffix = ".md"
    sys.stdout.write(to_terminal(text, wants_colour(sys.stdout)) if output == "text" else text)
    sys.stdout.flush()
    saved = _save(root, branch, head, text, suffix)
    _progress(f"saved {saved}")
    if args.out:
        args.out.write_text(text)
    return 1 if review.blocking else 0
