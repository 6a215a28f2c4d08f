"""The AOT mode of one ``EntryState`` and its narrow, per-entry fallback to JIT.

``call_aot(state, full_args, kwargs)`` is the whole AOT branch of ``EntryState.__call__``.
If the entry's AOT compile raises ``AOTUnsupportedError`` (see ``fallback``), the entry falls
back: ``state.aot`` becomes False for this entry only, what the failed attempt left is reset
(its AOT dispatch, backend and compile wrapper; Dynamo's cache entries of the entry's code only
if the attempt added some, so other entries sharing that code keep theirs), one warning names
the entry and the error, and the call is retried through ``state.compile_jit`` (whose failures
propagate). Other entries keep their own mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from magi_compiler import dynamic_dims
from magi_compiler.aot.entry import AOTEntry
from magi_compiler.aot.fallback import AOTUnsupportedError
from magi_compiler.aot.serializable import SerializingBackend
from magi_compiler.backend import MagiBackend
from magi_compiler.cache import model_cache_dir
from magi_compiler.cache_key import compiler_source_hash, compiler_version_hash, inductor_config_hash

if TYPE_CHECKING:
    from magi_compiler.entry_state import EntryState

logger = logging.getLogger("magi_compiler")

AOT_SUBDIR = "aot"
ARTIFACT_SUFFIX = ".magi-aot"

# Test-only seam: tests set it to False to prove that without the fallback the error propagates.
FALLBACK_TO_JIT = True


def entry_name(state: EntryState) -> str:
    return f"{state.model_name}:{state.fn.__module__}.{state.fn.__qualname__}"


def artifact_path(state: EntryState) -> Path:
    """``<cache_root>/model_<idx>[_<tag>]_rank_<r>_ws<w>/aot/<module>.<qualname>-<key>.magi-aot``.

    The key covers what is known before tracing (compile config, Inductor config, torch and
    Python versions); the traced sources are checked against the artifact when it loads.
    """
    factors = {
        "compile_config": state.config.hash,
        "inductor_config": inductor_config_hash(),
        "compiler_version": compiler_version_hash(),
        "compiler_source": compiler_source_hash(),
    }
    key = hashlib.sha256(json.dumps(factors, sort_keys=True).encode()).hexdigest()[:16]
    directory = model_cache_dir(state.config.resolved_cache_root_dir, state.model_index, state.model_tag, AOT_SUBDIR)
    return Path(directory) / f"{state.fn.__module__}.{state.fn.__qualname__}-{key}{ARTIFACT_SUFFIX}"


def _mark_dynamic(state: EntryState, args: tuple[Any, ...], kwargs: Mapping[str, Any], first: bool) -> None:
    """The first compile marks like JIT does (0/1 sizes are an error); a later one (a guard
    miss) marks only dynamic dims whose size is at least 2, leaving the rest specialised."""
    if first:
        state.mark_dynamic_dims(args, kwargs)
        return
    for name, value in state._named_args(args, kwargs):
        dims = tuple(dim for dim in state._dims_for(name, value) if value.shape[dim] >= 2)
        dynamic_dims.mark(name, value, dims, strict=state.dims_are_strict)


def _dynamo_cache_entries(state: EntryState) -> int:
    return len(torch._dynamo.eval_frame._debug_get_cache_entry_list(state.code))


@contextlib.contextmanager
def _marked_for_compile(
    state: EntryState, args: tuple[Any, ...], kwargs: dict[str, Any], first: bool
) -> Iterator[None]:
    """Mark the dynamic dims for one AOT compile and take the marks off afterwards.

    A guard loaded from an AOT artifact rejects a tensor carrying marks it did not see at
    compile time (``_has_dynamo_dim_marking``), so marks left on the caller's tensors would make
    the next process's loaded function miss on them. An ``AOTUnsupportedError`` leaving the
    compile records how many Dynamo cache entries the entry's code had before it.
    """
    tensors = [value for _, value in state._named_args(args, kwargs) if isinstance(value, torch.Tensor)]
    saved = [dict(tensor.__dict__) for tensor in tensors]
    entries_before = _dynamo_cache_entries(state)
    _mark_dynamic(state, args, kwargs, first)
    try:
        yield
    except AOTUnsupportedError as error:
        error.dynamo_cache_entries_before = entries_before
        raise
    finally:
        for tensor, before in zip(tensors, saved):
            tensor.__dict__.clear()
            tensor.__dict__.update(before)


def _build_aot_entry(state: EntryState) -> AOTEntry:
    state.ensure_model_index()
    name = entry_name(state)
    if state.config.disable_cache:
        logger.info("%s: disable_cache is set; AOT artifacts are neither loaded nor saved", name)

    def make_compile_wrapper() -> Any:
        state.backend = MagiBackend(state.config, state.model_index, state.model_tag)
        # torch 2.11 attaches `aot_compile` to the wrapper only while this flag is set (2.13 sets it by default).
        with torch._dynamo.config.patch(enable_aot_compile=True):
            return torch.compile(state.fn, fullgraph=True, backend=SerializingBackend(state.backend))

    return AOTEntry(
        name=name,
        artifact_path=artifact_path(state),
        make_compile_wrapper=make_compile_wrapper,
        prepare_compile=lambda args, kwargs, first: _marked_for_compile(state, args, kwargs, first),
        f_globals=state.fn.__globals__,
        assert_cache_hit=state.config.assert_cache_hit,
        persist=not state.config.disable_cache,
    )


def _fall_back_to_jit(state: EntryState, error: AOTUnsupportedError) -> None:
    cause = error.__cause__ if error.__cause__ is not None else error
    logger.warning(
        "magi_compile entry %s cannot be AOT-compiled (%s: %s); falling back to JIT: this entry stays JIT "
        "for the rest of this process, other entries keep their mode",
        entry_name(state),
        type(cause).__name__,
        cause,
    )
    state.aot = False
    state.aot_entry = None
    state.backend = None
    state.compiled_callable = None
    assert error.dynamo_cache_entries_before is not None, "AOTUnsupportedError raised outside a compile"
    if _dynamo_cache_entries(state) > error.dynamo_cache_entries_before:
        torch._dynamo.eval_frame.remove_from_cache(state.code)


def call_aot(state: EntryState, full_args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """Run one call of an AOT entry; on ``AOTUnsupportedError`` fall back to JIT (see module doc)."""
    if state.aot_entry is None:
        state.aot_entry = _build_aot_entry(state)
    try:
        return state.aot_entry(*full_args, **kwargs)
    except AOTUnsupportedError as error:
        if not FALLBACK_TO_JIT:
            raise
        first = not state.aot_entry.has_functions
        _fall_back_to_jit(state, error)
    _mark_dynamic(state, full_args, kwargs, first)
    return state.compile_jit(full_args, dict(kwargs))
