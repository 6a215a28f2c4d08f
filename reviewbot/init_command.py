"""`reviewbot init`: print a proposed `.reviewbot.yml`, write it (`--write`), or check one (`--check`).

The inspection is `reviewbot.init_config`; this module only parses arguments and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reviewbot.gitrepo import GitRepo
from reviewbot.init_config import check_config, propose_config
from reviewbot.repo_config import CONFIG_FILE, ConfigError, read_config_text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "init",
        help="propose a .reviewbot.yml for a repository (--write it, or --check an existing one)",
        description="Inspect the Python files committed at --revision (AST only, nothing runs) and print a "
        f"proposed {CONFIG_FILE}: cache-key roots (functions and methods that hash and build cache paths, "
        "the configuration classes they hash), a probe command template and test suites from the test "
        "layout, each with the reason it was picked as a YAML comment. --write writes it to the repository "
        f"root (refusing to replace an existing {CONFIG_FILE} without --force); --check validates the "
        f"working tree's {CONFIG_FILE} against --revision instead (every key root resolves, probe module "
        "and suite paths exist), printing each problem on one line and exiting 2 when there is one.",
    )
    parser.add_argument(
        "--repo", type=Path, default=Path("."), help="repository to inspect (default: current directory)"
    )
    parser.add_argument("--revision", default="HEAD", help="commit to inspect (default: HEAD)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write the proposal to {CONFIG_FILE}")
    mode.add_argument("--check", action="store_true", help=f"validate the existing {CONFIG_FILE} instead")
    parser.add_argument("--force", action="store_true", help=f"with --write: replace an existing {CONFIG_FILE}")
    parser.set_defaults(func=run)


def _fail(message: str) -> int:
    """Bad input: one line on stderr, exit code 2."""
    print(f"reviewbot init: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    if args.force and not args.write:
        return _fail("--force only goes with --write")
    if not args.repo.is_dir():
        return _fail(f"--repo {args.repo}: no such directory")
    with GitRepo(args.repo) as git:
        if git.git("rev-parse", "--git-dir", check=False).strip() == "":
            return _fail(f"{args.repo} is not a git repository")
        if not git.has_revision(args.revision):
            return _fail(f"--revision {args.revision!r} names no commit in {args.repo.resolve()}")
        root = git.toplevel()
    target = root / CONFIG_FILE
    if args.check:
        if not target.is_file():
            return _fail(f"{target}: no such file (run `reviewbot init --write` first)")
        try:
            text = read_config_text(target)
        except ConfigError as exc:
            return _fail(f"{CONFIG_FILE}: {exc}")
        problems = check_config(root, text, args.revision)
        for problem in problems:
            print(f"reviewbot init: {CONFIG_FILE}: {problem}", file=sys.stderr)
        if problems:
            return 2
        print(f"reviewbot init: {target} is valid at {args.revision}", file=sys.stderr)
        return 0
    if args.write and target.exists() and not args.force:
        return _fail(f"{target} exists; pass --force to replace it")
    proposal = propose_config(root, args.revision)
    text = proposal.to_yaml()
    print(
        f"reviewbot init: inspected {proposal.files_inspected} Python files at {proposal.revision[:12]} in "
        f"{proposal.seconds:.2f}s: {len(proposal.roots)} key root(s), {len(proposal.suites)} suite(s)",
        file=sys.stderr,
    )
    if args.write:
        target.write_text(text)
        print(f"reviewbot init: wrote {target}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
