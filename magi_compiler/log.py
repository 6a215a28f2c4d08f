"""The package's one logger, ``magi_compiler``; its level comes from ``MAGI_LOGGING_LEVEL``."""

import logging
import os

LOGGING_LEVEL_ENV = "MAGI_LOGGING_LEVEL"

logger = logging.getLogger("magi_compiler")


def _configure() -> None:
    level_name = os.environ.get(LOGGING_LEVEL_ENV, "WARNING").strip().upper()
    levels = logging.getLevelNamesMapping()
    if level_name not in levels:
        raise ValueError(f"{LOGGING_LEVEL_ENV}={level_name!r} is not a logging level (DEBUG, INFO, WARNING, ERROR)")
    logger.setLevel(levels[level_name])
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False


_configure()
