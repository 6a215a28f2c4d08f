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
from magi_compiler.aot.fallback import ASSERT_CACHE_HIT_PREFIX, is_serialization_failure
from magi_compiler.backend import CacheMissError
from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))


# torch's AOT pickler refuses every torch.nn.Module it meets and lists their reprs after this
_UNSAVED_MODULES_PREFIX = "Failed to serialize the following objects: ["


def _module_type_names(listing: str) -> list[str]:
    """The class names of the top-level ``Name(...)`` reprs of a listing such as ``A(...), B(...)]``."""
    names, depth, start = [], 0, 0
    for position, char in enumerate(listing):
        if char == "(":
            if depth == 0:
                names.append(listing[start:position].strip(" ,"))
            depth += 1
        elif char == ")" and depth > 0:
            depth -= 1
            start = position + 1
    return [name for name in names if name.isidentifier()]


def _save_failure_reason(error: Exception) -> str:
    """The part of the save warning that says why: for torch's refusal of a module the compiled
    code reaches outside the entry's arguments, which modules and what to do (torch's own advice,
    ``external_data``, is not an option of ``magi_compile``), else the error itself."""
    message = str(error)
    if not message.startswith(_UNSAVED_MODULES_PREFIX):
        return f" ({type(error).__name__}: {message})"
    names = _module_type_names(message[len(_UNSAVED_MODULES_PREFIX) :])
    modules = f"torch.nn.Module {names[0]}" if len(names) == 1 else f"torch.nn.Modules {', '.join(names)}"
    return (
        f": torch cannot save the {modules}, which the compiled code reaches other than through the entry's "
        "arguments (a global or closure variable); pass the module as an argument, or compile its method "
        "(magi_compile(model.forward))"
    )


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
                "matches this call (an entry the process that compiled it logged as 'cannot be AOT-compiled' never "
                "has one: run it with MAGI_COMPILE_AOT=0, once without MAGI_COMPILE_ASSERT_CACHE_HIT to fill the "
                "cache, since the AOT setting is part of the cache key)"
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
        except (RuntimeError, pickle.PicklingError, AttributeError, TypeError) as error:
            # CPython reports some unpicklable objects as AttributeError or TypeError: only those are a save failure
            if isinstance(error, torch.OutOfMemoryError) or (
                isinstance(error, (AttributeError, TypeError)) and not is_serialization_failure(error)
            ):
                raise
            logger.warning(
                "AOT artifact of %s could not be saved%s; it runs compiled in this process, "
                "the next process compiles it again",
                self.name,
                _save_failure_reason(error),
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
