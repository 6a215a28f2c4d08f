"""Slash commands in PR comments: one per line, the line starting with `/`.

Lines inside fenced code blocks and quoted lines (`>`) are not commands, so quoting the help
text or a previous command does not run it again. A command repeated in one comment counts once,
and a comment has at most five.
"""

from __future__ import annotations

import dataclasses
import re

KNOWN = ("rerun-gpu", "review", "help")
MAX_COMMANDS = 5  # per comment; the rest are ignored
_COMMAND_LINE = re.compile(r"^/([A-Za-z][\w-]*)((?:[ \t]+\S+)*)[ \t]*$")
_SHA_PREFIX = re.compile(r"^[0-9a-fA-F]{7,40}$")

HELP_TEXT = """\
**reviewbot commands** (one per line, in a comment on the pull request):

| command | what it does | who may use it |
| --- | --- | --- |
| `/review` | re-run the static review of the current head | anyone |
| `/rerun-gpu [SHA] [suite ...]` | run the GPU regression suites (all GPU suites when none named) on the head; on a fork PR this authorises that exact commit: the one you saw (refused if a push arrived after your comment), or the one `SHA` (7 or more hex digits of the current head) names. A later push needs a new `/rerun-gpu` | collaborators with **write** or **admin** permission |
| `/help` | show this help | anyone |
"""


@dataclasses.dataclass(frozen=True)
class Command:
    name: str
    args: tuple[str, ...]

    @property
    def known(self) -> bool:
        return self.name in KNOWN


def parse(body: str) -> list[Command]:
    """The comment's commands in order, each once, at most `MAX_COMMANDS`: anyone may comment, and
    every command can be answered with a comment of the bot's, so one comment must not make it
    post dozens (GitHub also limits how fast content may be created)."""
    commands: list[Command] = []
    in_fence = False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = _COMMAND_LINE.match(line)
        if match:
            command = Command(match.group(1).lower(), tuple(match.group(2).split()))
            if command not in commands:
                commands.append(command)
    return commands[:MAX_COMMANDS]


@dataclasses.dataclass(frozen=True)
class RerunTarget:
    """`/rerun-gpu`'s arguments: the SHA prefix naming the head ('' when none), the suites, or
    `error` when they cannot be understood."""

    sha_prefix: str
    suites: tuple[str, ...]
    error: str = ""


def rerun_target(args: tuple[str, ...]) -> RerunTarget:
    """An argument of 7 to 40 hex digits names the commit; the others are suites. An argument that
    starts with `-` or holds a `,` is not a suite name (the regression runner would take it for an
    option or a list): it is refused, so the author learns it at once rather than from a failed run."""
    shas = [a.lower() for a in args if _SHA_PREFIX.match(a)]
    suites = tuple(a for a in args if not _SHA_PREFIX.match(a))
    if len(shas) > 1:
        return RerunTarget("", suites, f"`/rerun-gpu` names one commit, not {len(shas)}")
    not_names = [a for a in suites if a.startswith("-") or "," in a]
    if not_names:
        return RerunTarget(
            "", suites, f"`{not_names[0]}` is not a suite name (`/rerun-gpu [SHA] [suite ...]`, separated by spaces)"
        )
    return RerunTarget(shas[0] if shas else "", suites)
