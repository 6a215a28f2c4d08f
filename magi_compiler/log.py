"""Logging of the package. Every module logs to ``logging.getLogger(__name__)``, children of the
``magi_compiler`` logger; the library installs no handler (records reach the application's
configuration, or Python's last-resort handler for warnings and errors).

``MAGI_LOGGING_LEVEL`` (DEBUG, INFO, WARNING, ERROR) sets the level of the ``magi_compiler``
logger when the package is imported (``apply_env_level``). The command-line entry points
(``python -m magi_compiler.demo``, ``.cache_key``, ``magi-bench``) call ``configure_cli`` to print
the package's records on stderr.

A compiled entry's ``log_level`` (``CompileConfig.log_level``) is scoped to that entry: while one
of its calls runs (compile, cache lookups, AOT, CUDA-graph capture), ``entry_log_level`` puts its
level in a context variable, and each module's logger (an ``EntryLevelLogger`` around
``logging.getLogger(__name__)``) judges its records against that level instead of the logger's
own effective level. The records keep their module's logger name and propagate to the handlers
as usual; no logger's level is changed, so other entries, other threads and the rest of the
process keep theirs.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

PACKAGE_LOGGER = "magi_compiler"
LOGGING_LEVEL_ENV = "MAGI_LOGGING_LEVEL"


def parse_level(value: str, source: str) -> int:
    """The level named by ``value`` (case and surrounding blanks ignored); a name that is not a
    level raises ``ValueError`` naming ``source``."""
    name = value.strip().upper()
    levels = logging.getLevelNamesMapping()
    if name not in levels:
        raise ValueError(f"{source}={name!r} is not a logging level (DEBUG, INFO, WARNING, ERROR)")
    return levels[name]


def apply_env_level(environ: Mapping[str, str] = os.environ) -> None:
    """Set the package logger's level from ``MAGI_LOGGING_LEVEL`` when it is set; a value that is
    not a level raises ``ValueError`` naming the variable."""
    raw = environ.get(LOGGING_LEVEL_ENV, "")
    if raw.strip():
        logging.getLogger(PACKAGE_LOGGER).setLevel(parse_level(raw, LOGGING_LEVEL_ENV))


_entry_level: contextvars.ContextVar[int | None] = contextvars.ContextVar("magi_compiler_entry_level", default=None)


@contextlib.contextmanager
def entry_log_level(level: int) -> Iterator[None]:
    """Within the block (this thread or task only), the package's records are judged against
    ``level`` instead of their logger's effective level; nested blocks take the innermost level."""
    token = _entry_level.set(level)
    try:
        yield
    finally:
        _entry_level.reset(token)


class EntryLevelLogger(logging.LoggerAdapter):
    """A module's logger: ``logger`` itself, except that inside ``entry_log_level`` its threshold
    is the entry's level. ``logging.disable`` and a disabled logger still silence it; the record
    is made and handled by ``logger`` (its name, filters and handlers, then its ancestors')."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, None)

    def isEnabledFor(self, level: int) -> bool:
        scoped = _entry_level.get()
        if scoped is None:
            return self.logger.isEnabledFor(level)
        return level >= scoped and not self.logger.disabled and self.logger.manager.disable < level

    def log(
        self,
        level: int,
        msg: object,
        *args: object,
        exc_info: Any = None,
        extra: Mapping[str, object] | None = None,
        stack_info: bool = False,
        stacklevel: int = 1,
    ) -> None:
        if not self.isEnabledFor(level):
            return
        if exc_info and isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        elif exc_info and not isinstance(exc_info, tuple):
            exc_info = sys.exc_info()
        # one more frame than Logger.log: this method's (LoggerAdapter.debug & co. are skipped as logging's own)
        path, line, func, stack = self.logger.findCaller(stack_info, stacklevel + 1)
        record = self.logger.makeRecord(self.logger.name, level, path, line, msg, args, exc_info, func, extra, stack)
        self.logger.handle(record)


_cli_handler: logging.Handler | None = None


def configure_cli() -> None:
    """For command-line entry points only: print the package's records (at its level, WARNING
    unless ``MAGI_LOGGING_LEVEL`` says otherwise) on stderr, once."""
    global _cli_handler
    package = logging.getLogger(PACKAGE_LOGGER)
    if package.level == logging.NOTSET:
        package.setLevel(logging.WARNING)
    if _cli_handler is None:
        _cli_handler = logging.StreamHandler()
        _cli_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        package.addHandler(_cli_handler)
