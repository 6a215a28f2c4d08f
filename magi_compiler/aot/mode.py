"""The AOT mode of one entry, as a strategy its ``EntryState`` calls, and the narrow, per-entry
fallback to JIT.

``AOTStrategy(info)(full_args, kwargs)`` runs one call of an AOT entry and returns its output,
or an ``AOTFallback`` when the entry's AOT compile raised ``AOTUnsupportedError`` (see
``fallback``). Before returning the fallback the strategy logs one warning naming the entry and
the error and removes what its failed attempt left in Dynamo's cache (the entry code's cache
entries, only if the attempt added some, so other entries sharing that code keep theirs). The
entry state then goes JIT for this entry only and retries the call (whose failures propagate);
other entries keep their own mode. The strategy never sees the entry state: ``AOTEntryInfo``
carries what it needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from magi_compiler.aot.entry import AOTEntry
from magi_compiler.aot.fallback import AOTUnsupportedError
from magi_compiler.aot.serializable import SerializingBackend
from magi_compiler.backend import MagiBackend
from magi_compiler.cache import model_cache_dir
from magi_compiler.cache_key import compiler_source_hash, compiler_version_hash, inductor_config_hash
from magi_compiler.config import CompileConfig, CudaGraphMode
from magi_compiler.cudagraph import cudagraph_skip_reason
from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))

AOT_SUBDIR = "aot"
ARTIFACT_SUFFIX = ".magi-aot"

# Test-only seam: tests set it to False to prove that without the fallback the error propagates.
FALLBACK_TO_JIT = True


@dataclasses.dataclass(frozen=True)
class AOTEntryInfo:
    """What the AOT strategy knows of its entry. ``tensors(args, kwargs)``: the call's tensor
    arguments; ``mark_dims(args, kwargs, first)``: mark the dynamic dims for a compile (the first
    compile like JIT's, a later one only dims of size 2 or more)."""

    model_name: str
    fn: types.FunctionType
    config: CompileConfig
    model_index: int
    model_tag: str | None
    tensors: Callable[[tuple[Any, ...], Mapping[str, Any]], list[torch.Tensor]]
    mark_dims: Callable[[tuple[Any, ...], Mapping[str, Any], bool], None]

    @property
    def name(self) -> str:
        return f"{self.model_name}:{self.fn.__module__}.{self.fn.__qualname__}"


@dataclasses.dataclass(frozen=True)
class AOTFallback:
    """The entry cannot be AOT-compiled; ``first``: no AOT function of the entry had run, so the
    JIT compile marks the dims as a first compile does."""

    error: AOTUnsupportedError
    first: bool


def artifact_path(info: AOTEntryInfo) -> Path:
    """``<cache_root>/model_<idx>[_<tag>]_rank_<r>_ws<w>/aot/<module>.<qualname>-<key>.magi-aot``.

    The key covers what is known before tracing (compile config, Inductor config, torch and
    Python versions, magi_compiler's source); the traced sources are checked against the
    artifact when it loads.
    """
    factors = {
        "compile_config": info.config.hash,
        "inductor_config": inductor_config_hash(),
        "compiler_version": compiler_version_hash(),
        "compiler_source": compiler_source_hash(),
    }
    key = hashlib.sha256(json.dumps(factors, sort_keys=True).encode()).hexdigest()[:16]
    directory = model_cache_dir(info.config.resolved_cache_root_dir, info.model_index, info.model_tag, AOT_SUBDIR)
    return Path(directory) / f"{info.fn.__module__}.{info.fn.__qualname__}-{key}{ARTIFACT_SUFFIX}"


def dynamo_cache_entries(code: types.CodeType) -> int:
    """How many entries Dynamo's cache holds for ``code``, whichever backend made them: what its
    recompile limit counts."""
    return len(torch._dynamo.eval_frame._debug_get_cache_entry_list(code))


class AOTStrategy:
    """One entry's AOT dispatch (built on its first call); ``backend`` is the ``MagiBackend`` of
    its latest compile.

    A ``cudagraph_mode`` other than ``NONE`` is logged here, once per entry, since a loaded
    artifact runs without any backend call; the backends it makes do not log it again.
    """

    def __init__(self, info: AOTEntryInfo) -> None:
        self.info = info
        self.backend: MagiBackend | None = None
        mode = info.config.cudagraph_mode
        if mode is not CudaGraphMode.NONE:
            logger.warning(
                "%s: cudagraph_mode=%s does not apply (%s); running as NONE",
                info.model_name,
                mode.name,
                cudagraph_skip_reason((), aot=True),
            )
        if info.config.disable_cache:
            logger.info("%s: disable_cache is set; AOT artifacts are neither loaded nor saved", info.name)
        self.entry = AOTEntry(
            name=info.name,
            artifact_path=artifact_path(info),
            make_compile_wrapper=self._make_compile_wrapper,
            prepare_compile=self._marked_for_compile,
            f_globals=info.fn.__globals__,
            assert_cache_hit=info.config.assert_cache_hit,
            persist=not info.config.disable_cache,
        )

    @property
    def artifact_path(self) -> Path:
        return self.entry.artifact_path

    def _make_compile_wrapper(self) -> Any:
        # one backend for every function the entry compiles: its graphs are numbered on, as under
        # JIT, instead of each new function's graph overwriting graph 0 of the piece cache
        if self.backend is None:
            self.backend = MagiBackend(self.info.config, self.info.model_index, self.info.model_tag)
            self.backend.cudagraph_skip_logged = True  # logged once per entry by __init__
        # torch 2.11 attaches `aot_compile` to the wrapper only while this flag is set (2.13 sets it by default).
        with torch._dynamo.config.patch(enable_aot_compile=True):
            return torch.compile(self.info.fn, fullgraph=True, backend=SerializingBackend(self.backend))

    @contextlib.contextmanager
    def _marked_for_compile(self, args: tuple[Any, ...], kwargs: dict[str, Any], first: bool) -> Iterator[None]:
        """Mark the dynamic dims for one AOT compile and take the marks off afterwards.

        A guard loaded from an AOT artifact rejects a tensor carrying marks it did not see at
        compile time (``_has_dynamo_dim_marking``), so marks left on the caller's tensors would make
        the next process's loaded function miss on them. An ``AOTUnsupportedError`` leaving the
        compile records how many Dynamo cache entries the entry's code had before it.
        """
        tensors = self.info.tensors(args, kwargs)
        saved = [dict(tensor.__dict__) for tensor in tensors]
        entries_before = dynamo_cache_entries(self.info.fn.__code__)
        self.info.mark_dims(args, kwargs, first)
        try:
            yield
        except AOTUnsupportedError as error:
            error.dynamo_cache_entries_before = entries_before
            raise
        finally:
            for tensor, before in zip(tensors, saved):
                tensor.__dict__.clear()
                tensor.__dict__.update(before)

    def __call__(self, full_args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """The call's output, or an ``AOTFallback`` (see the module docstring)."""
        try:
            return self.entry(*full_args, **kwargs)
        except AOTUnsupportedError as error:
            if not FALLBACK_TO_JIT:
                raise
            fallback = AOTFallback(error, first=not self.entry.has_functions)
        error = fallback.error
        cause = error.__cause__ if error.__cause__ is not None else error
        logger.warning(
            "magi_compile entry %s cannot be AOT-compiled (%s: %s); falling back to JIT: this entry stays JIT "
            "for the rest of this process, other entries keep their mode",
            self.info.name,
            type(cause).__name__,
            cause,
        )
        assert error.dynamo_cache_entries_before is not None, "AOTUnsupportedError raised outside a compile"
        if dynamo_cache_entries(self.info.fn.__code__) > error.dynamo_cache_entries_before:
            torch._dynamo.eval_frame.remove_from_cache(self.info.fn.__code__)
        return fallback
