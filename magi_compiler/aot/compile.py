"""The single protected AOT compile call of one entry, with Dynamo restarts retried."""

from __future__ import annotations

import logging
from typing import Any

import torch

from magi_compiler.aot.fallback import CAUGHT_AOT_ERRORS, AOTFailureKind, AOTUnsupportedError, classify_aot_failure
from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))

MAX_RESTARTS = 8


def aot_compile_once(compile_wrapper: Any, entry: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``compile_wrapper.aot_compile((args, kwargs))`` and return the ``AOTCompiledFunction``.

    ``compile_wrapper`` is the result of ``torch.compile(fn, fullgraph=True, ...)`` (torch 2.11 exposes
    ``aot_compile`` on it only while ``torch._dynamo.config.enable_aot_compile`` is set, hence the
    patch around both creation and call). A Dynamo restart is retried (at most
    ``MAX_RESTARTS`` times, then the entry counts as unsupported). An error that means "AOT
    unsupported" (``fallback.classify_aot_failure``) becomes ``AOTUnsupportedError`` (cause: the
    original error); OOM, the ``assert_cache_hit`` miss and programmer errors propagate
    unchanged.
    """
    for attempt in range(1, MAX_RESTARTS + 1):
        try:
            with torch._dynamo.config.patch(enable_aot_compile=True):
                return compile_wrapper.aot_compile((args, kwargs))
        except CAUGHT_AOT_ERRORS as error:
            if isinstance(error, torch.OutOfMemoryError):
                raise
            kind = classify_aot_failure(error)
            if kind is AOTFailureKind.PROPAGATE:
                raise
            if kind is AOTFailureKind.FALLBACK:
                raise AOTUnsupportedError(
                    f"AOT compile of {entry} is not supported: {type(error).__name__}: {error}"
                ) from error
            logger.info("AOT compile of %s restarted by Dynamo (attempt %d): %s", entry, attempt, error)
    raise AOTUnsupportedError(f"AOT compile of {entry} did not settle after {MAX_RESTARTS} Dynamo restarts")
