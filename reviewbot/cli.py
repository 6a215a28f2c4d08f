"""`reviewbot` command line: one subcommand per module in `COMMAND_MODULES`.

Each listed module exposes `add_parser(subparsers) -> None`, which registers its
subcommand and sets `func` (called with the parsed namespace, returns the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES: tuple[str, ...] = (
    "reviewbot.review_command",
    "reviewbot.init_command",
    "reviewbot.service.serve_command",
    "reviewbot.service.worker_command",
    "reviewbot.release_notes.command",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reviewbot",
        description="Review pull requests to the magi_compiler backend: static checks, cache-key change "
        "detection, regression suites, GitHub service and release notes.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
