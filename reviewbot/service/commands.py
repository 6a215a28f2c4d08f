"""Slash commands in PR comments: one per line, the line starting with `/`.

Lines inside fenced code blocks and quoted lines (`>`) are not commands, so quoting the help
text or a previous command does not run it again.
"""

from __future__ import annotations

import dataclasses
import re

KNOWN = ("rerun-gpu", "review", "help")
_COMMAND_LINE = re.compile(r"^/([A-Za-z][\w-]*)((?:[ \t]+\S+)*)[ \t]*$")

HELP_TEXT = """\
**reviewbot commands** (one per line, in a comment on the pull request):

| command | what it does | who may use it |
| --- | --- | --- |
| `/review` | re-run the static review of the current head | anyone |
| `/rerun-gpu [suite ...]` | run the GPU regression suites (all GPU suites when none named) on the current head; on a fork PR this also authorises that exact head SHA (a later push needs a new `/rerun-gpu`) | collaborators with **write** or **admin** permission |
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
            commands.append(Command(match.group(1).lower(), tuple(match.group(2).split())))
    return commands
