"""Calling an Inductor artifact's generated code directly, below AOTAutograd's runtime wrapper,
for a graph compiled for inference.

An artifact of ``torch._inductor.standalone_compile`` runs, on every call: AOTAutograd's
``forward`` (prepends the lifted parameters and buffers; a loaded artifact has an adapter of its
own instead), AOTAutograd's runtime wrapper (the first call's custom-op check, the profiler range,
grad mode off for an inference graph, input mutations replayed, aliased outputs regenerated,
outputs' dynamic dims marked, grad-mode mutations applied), ``SerializableCompiledFunction`` and
pass-through layers and ``CompiledFxGraph.__call__`` (graph-execution recording, the autotune
cache of the first call, the profiler range, runtime metrics); then Inductor's generated
``call()``. On CPU that is 2.4 us a call with torch 2.13 and 4.1 us with torch 2.11 around a
generated ``call()`` of 1.7 us (one relu on 64 x 64).

Where AOTAutograd's runtime wrapper is the plain inference form (torch 2.13: its generated code's
globals and bytecode; torch 2.11: the metadata in its closure) with no input mutation replayed
after the call (one the graph does in place is fine), no output aliasing an input or an
intermediate, no grad-mode mutation, no functionalized RNG, no effect tokens and no other layer
(tensor subclasses add one), that work reduces to: prepend the parameters, bump the version
counters of the inputs the graph mutates in place (those autograd sees), run ``call()`` with grad
mode off, mark the outputs' dynamic dims, and for a graph compiled under autocast, switch autocast
off around the call as the wrapper does. :func:`direct_call` returns a callable that does just that. It takes the full path instead
on its first call (the first call's checks and autotune-cache writes run as before) and on any
call while the profiler runs or Inductor's graph-execution recording is on (their records stay as
they are), or under autocast for a graph compiled without it. Runtime metrics a later call records
(none in a steady state) are reported by the next full-path call.

The layers are recognised by their code's qualified names in torch 2.11 and 2.13; for anything
else (a training graph, another layer, another torch version's layout) :func:`direct_call`
returns None and says why at debug level, and the caller keeps the full path.
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
import itertools
import logging
import sys
import types
from collections.abc import Callable
from typing import Any

import torch
import torch._inductor.debug
import torch.utils._pytree as pytree

from magi_compiler.counters import compilation_counter
from magi_compiler.kernel_launch import lean_kernels

logger = logging.getLogger(__name__)

# the outer layers an artifact calls (by their code's qualified name: ``functools.wraps`` copies a
# function's ``__qualname__``, not its code's): AOTAutograd's forward of a fresh compile, the
# loader's adapter of a loaded artifact (no lifted parameters)
_AOT_FORWARD = "aot_module_simplified.<locals>.forward"
_LOADED_ADAPTER = "CacheCompiledArtifact._load_impl.<locals>.<lambda>"
# Inductor's wrapper that unflattens the outputs of a graph not returning a tuple
_UNFLATTEN_WRAPPER = "make_graph_return_tuple.<locals>.wrapper"
_RUNTIME_WRAPPER = "_create_runtime_wrapper.<locals>.runtime_wrapper"
# AOTAutograd's pass-through layers below the runtime wrapper, when their closure says so
_RNG_WRAPPER = "FunctionalizedRngRuntimeWrapper.post_compile.<locals>.wrapper"
_TOKENS_WRAPPER = "EffectTokensWrapper.post_compile.<locals>.inner_fn"
# what AOTAutograd's runtime wrapper marks an output's dynamic dims with (torch 2.13, torch 2.11)
_MARK_DYNAMIC_NAMES = ("mark_dynamo_propagated_dynamic_indices", "maybe_mark_dynamic_helper")
_MAX_LAYERS = 8
# the globals torch 2.13's generated runtime wrapper marks dynamic output dims with
_MARK_GLOBAL = "_mark_dynamic_"
# ... and switches autocast off with (for a graph compiled under autocast)
_DISABLE_AMP_GLOBAL = "_DisableAutocast_"
# ... and bumps the version counters of inputs the graph mutates with
_VERSION_GLOBAL = "_increment_version_"
_DYN_DIMS_PREFIX = "_dyn_dims_"

_set_grad_enabled = torch._C._set_grad_enabled
_is_grad_enabled = torch.is_grad_enabled
_any_autocast = torch._C._is_any_autocast_enabled
_DisableAutocast = torch._C._DisableAutocast
_increment_version = torch.autograd.graph.increment_version
_profiler = torch.autograd.profiler
_inductor_debug = torch._inductor.debug


class _Unrecognised(Exception):
    """A layer or a piece of metadata :func:`direct_call` does not handle; the message says which."""


def direct_call(aot_forward: Callable[..., Any]) -> Callable[..., Any] | None:
    """A callable equivalent to ``aot_forward`` (what an Inductor artifact calls, without Dynamo
    ``disable`` wrappers around it: AOTAutograd's ``forward``, the loader's adapter, or Inductor's
    output-unflattening wrapper around either) for calls with Dynamo's frame evaluation off, that
    calls Inductor's generated code directly; None where the layers or the graph's metadata are
    not the plain inference case (module doc)."""
    if _qualname(aot_forward) == _UNFLATTEN_WRAPPER:
        return _unflattening(aot_forward)
    try:
        params, graph, plan = _plain_inference(aot_forward)
    except _Unrecognised as reason:
        logger.debug("full AOTAutograd call path kept for %r: %s", aot_forward, reason)
        return None
    compilation_counter.num_direct_call_paths += 1
    return _direct(aot_forward, params, graph, plan)


def without_disable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with every ``torch._dynamo.disable`` function wrapper around it removed.

    A wrapper is recognised by the id it records of itself: ``functools.wraps`` copies a
    disable wrapper's attributes onto the function wrapping it (Inductor's output unflattening
    does), and that function must stay."""
    while getattr(fn, "_torchdynamo_disable", False) and getattr(fn, "_torchdynamo_wrapper_id", None) == id(fn):
        fn = fn._torchdynamo_orig_callable  # type: ignore[attr-defined]
    return fn


def first_output(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (which returns a sequence) returning its first element."""

    def first(*args: Any) -> Any:
        return fn(*args)[0]

    return first


def _unflattening(wrapper: Callable[..., Any]) -> Callable[..., Any] | None:
    """``direct_call`` of the function Inductor's output-unflattening ``wrapper`` calls, its result
    unflattened the same way."""
    cells = _cells(wrapper)
    if "spec" not in cells or "compiled_fn" not in cells:
        logger.debug("full AOTAutograd call path kept for %r: not the unflattening wrapper's closure", wrapper)
        return None
    spec = cells["spec"]
    direct = direct_call(without_disable(cells["compiled_fn"]))
    if direct is None:
        return None
    if spec.is_leaf():
        return first_output(direct)

    def unflattened(*args: Any) -> Any:
        return pytree.tree_unflatten(direct(*args), spec)

    return unflattened


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What AOTAutograd's runtime wrapper of a plain inference graph does around the call:
    ``versioned``, the indices of its arguments (parameters first) whose version counters it bumps
    before the call (inputs the graph mutates in place, seen by autograd); ``dynamic``, the (output
    index, dynamic dims) pairs it marks with ``mark``; ``disable_amp``, whether it switches autocast
    off (a graph compiled under autocast)."""

    versioned: tuple[int, ...]
    dynamic: tuple[tuple[int, Any], ...]
    mark: Callable[[Any, Any], None] | None
    disable_amp: bool


def _direct(full: Callable[..., Any], params: list[Any], graph: Any, plan: _Plan) -> Callable[..., Any]:
    """The direct callable; Inductor's generated ``call`` is taken from ``graph`` (its
    ``CompiledFxGraph``) after the first call, which takes the full path."""
    generated: Callable[[list[Any]], Any] | None = None
    versioned, dynamic, mark, disable_amp = plan.versioned, plan.dynamic, plan.mark, plan.disable_amp

    def call(*args: Any) -> list[Any]:
        nonlocal generated
        if generated is None:
            outs = full(*args)
            assert graph.current_callable is not None, "a compiled graph that ran has its callable"
            generated = lean_kernels(graph.current_callable)
            return outs
        if _profiler._is_profiler_enabled or _inductor_debug.RECORD_GRAPH_EXECUTION:
            return full(*args)
        autocast = _any_autocast()
        if autocast and not disable_amp:
            return full(*args)
        full_args = [*params, *args]
        if versioned:
            _increment_version(tuple(full_args[index] for index in versioned))
        grad = _is_grad_enabled()
        if grad:
            _set_grad_enabled(False)
        try:
            if autocast:
                with _DisableAutocast():
                    outs = list(generated(full_args))
            else:
                outs = list(generated(full_args))
        finally:
            if grad:
                _set_grad_enabled(True)
        for index, dims in dynamic:
            mark(outs[index], dims)  # type: ignore[misc]
        return outs

    return call


def _plain_inference(
    aot_forward: Callable[..., Any],
) -> tuple[list[Any], Any, _Plan]:
    """(lifted parameters, Inductor's ``CompiledFxGraph``, the runtime wrapper's plan) of
    ``aot_forward``; raises ``_Unrecognised``."""
    from torch._inductor.output_code import CompiledFxGraph

    outer = _qualname(aot_forward)
    if outer not in (_AOT_FORWARD, _LOADED_ADAPTER) or not aot_forward.__code__.co_flags & inspect.CO_VARARGS:
        raise _Unrecognised(f"the outer layer is {outer}, not AOTAutograd's forward or the loader's adapter")
    params = list(_cell(aot_forward, "params_buffers_flat")) if outer == _AOT_FORWARD else []
    layer = _cell(aot_forward, "compiled_fn")
    plan: _Plan | None = None
    for _ in range(_MAX_LAYERS):
        name = _qualname(layer)
        if isinstance(layer, CompiledFxGraph):
            break
        if name == "SerializableCompiledFunction":
            layer = layer.compiled_fn
        elif name == _RUNTIME_WRAPPER and plan is None:
            plan, layer = _runtime_wrapper_plan(layer)
        elif _passes_through(name, layer):
            layer = _cell(layer, "compiled_fn")
        else:
            raise _Unrecognised(f"unknown layer {name}")
    else:
        raise _Unrecognised(f"no compiled graph within {_MAX_LAYERS} layers")
    if plan is None:
        raise _Unrecognised("no AOTAutograd runtime wrapper")
    return params, layer, plan


def _passes_through(name: str, layer: Any) -> bool:
    """Whether ``layer`` is an AOTAutograd layer below the runtime wrapper that its closure shows
    to pass arguments and outputs through unchanged: no functionalized RNG, no effect tokens."""
    if name == _RNG_WRAPPER:
        return _cell(layer, "runtime_metadata").is_rng_op_functionalized is False
    return name == _TOKENS_WRAPPER and _cell(layer, "num_tokens") == 0


def _runtime_wrapper_plan(
    wrapper: Callable[..., Any],
) -> tuple[_Plan, Any]:
    """The plan of AOTAutograd's runtime wrapper of a plain inference graph, and the layer below
    it: from the generated function it calls (torch 2.13) or the metadata in its closure (torch
    2.11); raises ``_Unrecognised``."""
    cells = _cells(wrapper)
    if "_codegen_runtime_wrapper" in cells:
        return _generated_wrapper_plan(cells["_codegen_runtime_wrapper"]), _cell(wrapper, "_inner_compiled_fn")
    if cells.get("trace_joint", True):
        raise _Unrecognised("a training graph, or a runtime wrapper without metadata")
    metadata = cells.get("runtime_metadata")
    dynamic = _plain_metadata(metadata)
    mark = _mark_dynamic(wrapper) if dynamic else None
    versioned = (
        tuple(metadata.mutated_graph_handled_indices_seen_by_autograd) if _cell(wrapper, "keep_input_mutations") else ()
    )
    plan = _Plan(versioned, dynamic, mark, bool(_cell(wrapper, "disable_amp")))
    return plan, _cell(wrapper, "compiled_fn")


def _generated_wrapper_plan(generated: Any) -> _Plan:
    """The plan of torch 2.13's code-generated runtime wrapper. Its globals name every epilogue it
    runs (input mutations, aliased outputs, version bumps, autocast switched off, dynamic dims
    marked); a grad-mode mutation is a ``_set_grad_enabled`` call after ``ret_outs`` is bound."""
    names = {name for name in generated.__globals__ if not name.startswith("__")}
    dims_names = {name for name in names if name.startswith(_DYN_DIMS_PREFIX)}
    extra = names - dims_names - {"torch", _MARK_GLOBAL, _DISABLE_AMP_GLOBAL, _VERSION_GLOBAL}
    if extra:
        raise _Unrecognised(f"the runtime wrapper also runs {sorted(extra)}")
    variables = generated.__code__.co_varnames
    if "grad_enabled" not in variables or "args_" in variables:
        raise _Unrecognised("the runtime wrapper is not the inference form")
    instructions = list(dis.get_instructions(generated))
    bound = [i for i, ins in enumerate(instructions) if ins.opname == "STORE_FAST" and ins.argval == "ret_outs"]
    if len(bound) != 1:
        raise _Unrecognised("the runtime wrapper binds ret_outs other than once")
    epilogue = itertools.takewhile(lambda ins: ins.opname != "RETURN_VALUE", instructions[bound[0] + 1 :])
    if any(ins.argval == "_set_grad_enabled" for ins in epilogue):
        raise _Unrecognised("the graph changes grad mode")
    dynamic = tuple(
        sorted((int(name.removeprefix(_DYN_DIMS_PREFIX)), generated.__globals__[name]) for name in dims_names)
    )
    versioned = _versioned_indices(instructions) if _VERSION_GLOBAL in names else ()
    return _Plan(versioned, dynamic, generated.__globals__.get(_MARK_GLOBAL), _DISABLE_AMP_GLOBAL in names)


def _versioned_indices(instructions: list[dis.Instruction]) -> tuple[int, ...]:
    """The argument indices of torch 2.13's generated ``_increment_version_((args[i], ...))``."""
    starts = [i for i, ins in enumerate(instructions) if ins.opname == "LOAD_GLOBAL" and ins.argval == _VERSION_GLOBAL]
    if len(starts) != 1:
        raise _Unrecognised(f"the runtime wrapper loads {_VERSION_GLOBAL} other than once")
    indices = []
    rest = instructions[starts[0] + 1 :]
    while len(rest) >= 3 and [ins.opname for ins in rest[:3]] == ["LOAD_FAST", "LOAD_CONST", "BINARY_SUBSCR"]:
        if rest[0].argval != "args" or type(rest[1].argval) is not int:
            raise _Unrecognised("an unknown argument to the version bump")
        indices.append(rest[1].argval)
        rest = rest[3:]
    if not indices or not rest or rest[0].opname != "BUILD_TUPLE" or rest[0].arg != len(indices):
        raise _Unrecognised("an unknown form of the version bump")
    return tuple(indices)


def _plain_metadata(metadata: Any) -> tuple[tuple[int, Any], ...]:
    """The (output index, dynamic dims) pairs to mark, from AOTAutograd's ``ViewAndMutationMeta``
    of a plain inference graph; raises ``_Unrecognised`` for any other."""
    if metadata is None:
        raise _Unrecognised("no AOTAutograd runtime metadata")
    expected_empty = {
        "num_mutated_inp_runtime_indices": "input mutations replayed after the call",
        "num_outputs_aliased": "outputs aliasing an input or an intermediate",
        "num_intermediate_bases": "intermediate bases of aliased outputs",
        "tokens": "effect tokens",
    }
    for attribute, meaning in expected_empty.items():
        value = getattr(metadata, attribute, _MISSING)
        if value is _MISSING:
            raise _Unrecognised(f"the metadata has no {attribute}")
        if value:
            raise _Unrecognised(meaning)
    if getattr(metadata, "grad_enabled_mutation", _MISSING) is not None:
        raise _Unrecognised("the graph changes grad mode")
    if getattr(metadata, "is_rng_op_functionalized", _MISSING) is not False:
        raise _Unrecognised("functionalized RNG")
    return tuple(
        (index, info.dynamic_dims) for index, info in enumerate(metadata.output_info) if info.dynamic_dims is not None
    )


def _mark_dynamic(wrapper: Callable[..., Any]) -> Callable[[Any, Any], None]:
    module = sys.modules[wrapper.__module__]
    for name in _MARK_DYNAMIC_NAMES:
        mark = getattr(module, name, None)
        if mark is not None:
            return mark
    raise _Unrecognised("no function to mark the outputs' dynamic dims")


_MISSING = object()


def _qualname(layer: Any) -> str:
    """A function's code's qualified name, or the class name of any other object."""
    return layer.__code__.co_qualname if isinstance(layer, types.FunctionType) else type(layer).__name__


def _cells(fn: Any) -> dict[str, Any]:
    """The filled closure cells of ``fn`` by name."""
    code = getattr(fn, "__code__", None)
    if code is None or fn.__closure__ is None:
        return {}
    cells = {}
    for name, cell in zip(code.co_freevars, fn.__closure__, strict=True):
        try:
            cells[name] = cell.cell_contents
        except ValueError:  # an empty cell: a name the function binds later, not one it reads here
            continue
    return cells


def _cell(fn: Any, name: str) -> Any:
    cells = _cells(fn)
    if name not in cells:
        raise _Unrecognised(f"{_qualname(fn)} has no closure variable {name}")
    return cells[name]
