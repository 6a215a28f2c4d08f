"""Plug-in packages: they register GPU dispatch modes, webhook events and job kinds when imported.
`serve` and every worker load them at start (`load`): a `workflow_run` delivery must be known to
the server that stores it and to the worker that ingests it. Importing by name keeps a plug-in out
of the import graph of the loops that use what it registers. One that is not installed is skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging

logger = logging.getLogger(__name__)

PLUGIN_PACKAGES: tuple[str, ...] = ("reviewbot.gpu_dispatch",)


def load() -> None:
    for name in PLUGIN_PACKAGES:
        if importlib.util.find_spec(name) is None:
            logger.debug("GPU dispatch plugin %s not installed", name)
            continue
        importlib.import_module(name)
