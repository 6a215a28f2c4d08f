"""One entry's AOT life: load its artifact, compile what is missing, save, dispatch by guards.

The entry state owns the decision to fall back: ``AOTEntry.__call__`` raises
``AOTUnsupportedError`` (only from the AOT compile call) and writes nothing to disk in that case.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

from magi_compiler.aot.artifact import load_artifact, save_artifact
from magi_compiler.aot.compile import aot_compile_once
from magi_compiler.aot.fallback import ASSERT_CACHE_HIT_PREFIX
from magi_compiler.backend import CacheMissError
from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))


class AOTEntry:
    """Runs one decorated entry from AOT-compiled functions.

    ``make_compile_wrapper`` returns a fresh ``torch.compile(fn, fullgraph=True, backend=...)``
    whose backend returns a ``SerializableCallable``; ``prepare_compile(args, kwargs, first)``
    is a context manager entered around each compile (it marks dynamic dims for the compile
    only: a loaded function's guards reject tensors that still carry marks). ``f_globals`` is
    the globals dict of the entry's function (Dynamo's loaded bytecode runs in it). With
    ``persist=False`` nothing is loaded or saved. With ``assert_cache_hit`` a call no loaded function covers raises
    ``CacheMissError`` instead of compiling.
    """

    def __init__(
        self,
        name: str,
        artifact_path: Path,
        make_compile_wrapper: Callable[[], Any],
        prepare_compile: Callable[[tuple[Any, ...], dict[str, Any], bool], AbstractContextManager[None]],
        f_globals: dict[str, Any],
        assert_cache_hit: bool,
        persist: bool = True,
    ) -> None:
        self.name = name
        self.artifact_path = artifact_path
        self._make_compile_wrapper = make_compile_wrapper
        self._prepare_compile = prepare_compile
        self._persist = persist
        self._f_globals = f_globals
        self._assert_cache_hit = assert_cache_hit
        self._functions: list[Any] | None = None

    def _loaded_functions(self) -> list[Any]:
        if self._functions is None:
            loaded = (load_artifact(self.artifact_path, self.name, self._f_globals) if self._persist else None) or []
            for fn in loaded:
                fn.disable_guard_check()
            self._functions = loaded
            if loaded:
                logger.info(
                    "AOT artifact loaded for %s from %s (%d function(s))", self.name, self.artifact_path, len(loaded)
                )
        return self._functions

    def _compile(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._assert_cache_hit:
            raise CacheMissError(
                f"{ASSERT_CACHE_HIT_PREFIX} for AOT entry {self.name}: no usable artifact at {self.artifact_path} "
                "matches this call"
            )
        functions = self._loaded_functions()
        with self._prepare_compile(args, kwargs, not functions):
            fn = aot_compile_once(self._make_compile_wrapper(), self.name, args, kwargs)
        fn.disable_guard_check()
        functions.append(fn)
        if not self._persist:
            logger.info("%s: disable_cache is set; the AOT artifact is not saved", self.name)
            return fn
        try:
            save_artifact(self.artifact_path, self.name, functions)
        except (RuntimeError, pickle.PicklingError) as error:
            if isinstance(error, torch.OutOfMemoryError):
                raise
            logger.warning(
                "AOT artifact of %s could not be saved (%s: %s); it runs compiled in this process, "
                "the next process compiles it again",
                self.name,
                type(error).__name__,
                error,
            )
        return fn

    @property
    def has_functions(self) -> bool:
        """Whether a compiled or loaded function exists (a later compile is not the entry's first)."""
        return bool(self._functions)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for fn in self._loaded_functions():
            if fn.guard_check(*args, **kwargs):
                return fn(*args, **kwargs)
        return self._compile(args, kwargs)(*args, **kwargs)
