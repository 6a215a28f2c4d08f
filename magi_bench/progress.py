"""The progress line on stderr: rewritten in place on a terminal, a few plain lines otherwise."""

from __future__ import annotations

import sys
from typing import TextIO

PREFIX = "magi-bench: "


class Progress:
    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self._open_line = False
        self._last_quarter = -1

    def stage(self, text: str) -> None:
        """A new stage (compiling X, timing Y): always its own line."""
        if not self.enabled:
            return
        self._close_line()
        self._last_quarter = -1
        self.stream.write(PREFIX + text + "\n")
        self.stream.flush()

    def update(self, label: str, done: int, total: int) -> None:
        """``done`` of ``total`` steps; off a terminal only at each quarter."""
        if not self.enabled:
            return
        if self.tty:
            self.stream.write(f"\r{PREFIX}{label} {done}/{total}")
            self._open_line = True
        else:
            quarter = 4 * done // total
            if quarter == self._last_quarter:
                return
            self._last_quarter = quarter
            self.stream.write(f"{PREFIX}{label} {done}/{total}\n")
        self.stream.flush()
        if done == total:
            self._close_line()

    def _close_line(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False
