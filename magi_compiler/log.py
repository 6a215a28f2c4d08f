"""Logging of the package. Every module logs to ``logging.getLogger(__name__)``, children of the
``magi_compiler`` logger; the library installs no handler (records reach the application's
configuration, or Python's last-resort handler for warnings and errors).

``MAGI_LOGGING_LEVEL`` (DEBUG, INFO, WARNING, ERROR) sets the level of the ``magi_compiler``
logger when the package is imported (``apply_env_level``). The command-line entry points
(``python -m magi_compiler.demo``, ``.cache_key``, ``magi-bench``) call ``configure_cli`` to print
the package's records on stderr.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

PACKAGE_LOGGER = "magi_compiler"
LOGGING_LEVEL_ENV = "MAGI_LOGGING_LEVEL"


def apply_env_level(environ: Mapping[str, str] = os.environ) -> None:
    """Set the package logger's level from ``MAGI_LOGGING_LEVEL`` when it is set; a value that is
    not a level raises ``ValueError`` naming the variable."""
    raw = environ.get(LOGGING_LEVEL_ENV, "").strip().upper()
    if not raw:
        return
    levels = logging.getLevelNamesMapping()
    if raw not in levels:
        raise ValueError(f"{LOGGING_LEVEL_ENV}={raw!r} is not a logging level (DEBUG, INFO, WARNING, ERROR)")
    logging.getLogger(PACKAGE_LOGGER).setLevel(levels[raw])


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
