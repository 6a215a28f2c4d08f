"""The review for a person at a terminal: the GitHub markdown of `render_markdown`, made plain.

`to_terminal(markdown, colour)` drops HTML comments, turns `<details><summary>X</summary>` into a
line `X:` and unwraps `<sub>`; headings lose their `#`s (and are bold), inline code its backticks,
code fences their fence lines; tables are aligned in columns without their separator row.
With `colour` (`wants_colour`: a terminal, `NO_COLOR` unset or empty, `TERM` not `dumb`) severity
labels are coloured (P0 red, P1 magenta, P2 yellow, P3 cyan, P4 dim) with ANSI escapes.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping
from typing import TextIO

from reviewbot.severity import Severity

RESET = "\033[0m"
BOLD = "\033[1m"
SEVERITY_COLOURS: dict[Severity, str] = {
    Severity.P0: "\033[1;31m",
    Severity.P1: "\033[35m",
    Severity.P2: "\033[33m",
    Severity.P3: "\033[36m",
    Severity.P4: "\033[2m",
}
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SUMMARY = re.compile(r"<details>\s*<summary>(.*?)</summary>")
_SUB = re.compile(r"</?sub>")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")
_LABEL = re.compile("|".join(re.escape(s.value) for s in Severity))
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def wants_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colour only for a terminal, unless `NO_COLOR` is set (non-empty) or `TERM` is `dumb`."""
    env = os.environ if environ is None else environ
    return stream.isatty() and not env.get("NO_COLOR") and env.get("TERM", "") != "dumb"


def _width(text: str) -> int:
    """Columns `text` takes (CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _inline(text: str, colour: bool) -> str:
    text = _SUB.sub("", text)
    if colour:
        text = _BOLD.sub(lambda m: f"{BOLD}{m.group(1)}{RESET}", text)
    else:
        text = _BOLD.sub(r"\1", text)
    text = _CODE.sub(r"\1", text)
    if colour:
        text = _LABEL.sub(lambda m: f"{SEVERITY_COLOURS[Severity(m.group(0))]}{m.group(0)}{RESET}", text)
    return text


def _table(rows: list[str], colour: bool) -> list[str]:
    cells = [[c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(row.strip())[1:-1]] for row in rows]
    cells = [row for row in cells if not all(re.fullmatch(r":?-{3,}:?", c) for c in row)]
    plain = [[_inline(c, False) for c in row] for row in cells]
    widths = [max(_width(row[i]) for row in plain if i < len(row)) for i in range(max(map(len, plain)))]
    out = []
    for row, texts in zip(cells, plain, strict=True):
        padded = [
            _inline(cell, colour) + " " * (widths[i] - _width(text)) for i, (cell, text) in enumerate(zip(row, texts))
        ]
        out.append("  ".join(padded).rstrip())
    return out


def to_terminal(markdown: str, colour: bool = False) -> str:
    """Plain text of the review's `markdown` (see the module docstring)."""
    text = _COMMENT.sub("", markdown)
    text = _SUMMARY.sub(lambda m: f"{m.group(1)}:", text)
    text = text.replace("</details>", "")
    out: list[str] = []
    table: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            table.append(line)
            continue
        if table:
            out.extend(_table(table, colour))
            table = []
        if line.strip().startswith("```"):
            continue
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            title = _inline(heading.group(1), colour)
            out.append(f"{BOLD}{title}{RESET}" if colour else title)
            continue
        out.append(_inline(line, colour))
    if table:
        out.extend(_table(table, colour))
    return "\n".join(out).strip("\n") + "\n"
