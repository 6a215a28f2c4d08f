"""The compile state behind one ``@magi_compile`` entry (one per instance for classes).

First call: validates and marks the dynamic dims (:mod:`magi_compiler.dynamic_dims`), then compiles through a fresh
``torch.compile(fullgraph=True)`` wrapper and a fresh ``MagiBackend``
(:meth:`EntryState.compile_jit`). Nested decorated calls made while Dynamo traces run
inline (``torch.compiler.is_compiling()``).

The bytecode swap. While Dynamo converts the entry's frame, a bytecode hook captures the
transformed code object; later calls run that code directly (as a function with the
entry's globals and closure), skipping Dynamo's frame evaluation and guard checks. The
contract the user accepts with ``bytecode_swap=True`` (the default): between calls only
the sizes of the dynamic dims change (those named in ``dynamic_arg_dims``; without it, the
inferred dims 0 that the traced graph kept symbolic); module attributes,
parameters' shapes and dtypes, and global flags other than those below keep what they were
when the code was captured. A cheap dispatch signature still guards the arguments themselves:
each tensor argument's dtype, device, rank, contiguity (a non-contiguous one's exact strides) and
static sizes (dynamic sizes only as "at least 2"), the value of each Python scalar, dtype, device,
enum or function argument, the elements of a tuple, list or dict argument and the fields of a
dataclass instance the same way (a tensor in one by its exact shape: only top-level arguments
have dynamic dims), the keyword names, the training flag of the entry's own module and of a
module argument (set by ``model.train()`` and ``model.eval()``; a submodule's own flag is a
module attribute), grad mode, inference mode and whether autocast is on (not its dtype). A call
whose signature was not seen goes through the guarded ``torch.compile`` wrapper (Dynamo checks
guards and recompiles if needed; the new code is captured for that signature), so a new size on
a dynamic dim reuses the captured code while anything else takes the safe path. A call with an
argument of any other type (an object such as a KV cache, whose tensors may grow between calls)
is never swapped: its signature holds an :class:`Opaque`, equal to nothing, and the entry logs
once that such calls keep Dynamo's guards. A dynamic size the traced code's checks bound (``assert t <= block_size`` narrows that
size's range in Dynamo's ShapeEnv) is checked against that range, and a size outside it takes
the guarded path too (:mod:`magi_compiler.size_bounds`; guards relating several sizes are not
checked on the swapped path).
Set ``bytecode_swap=False`` to keep Dynamo's guards on every call.

The swapped call is cheap by construction: the signature's dims per argument position and rank
are memoized, ``bound_self`` is not described (it is the same object on every call), and the
captured code is relinked (:mod:`magi_compiler.swapped_code`) to skip Dynamo's per-helper
``disable`` wrappers, the whole call running with Dynamo's frame evaluation off once, and to call
the compiled graph, or each piece of a split graph, without the wrappers that only matter with
frame evaluation on (``swapped_code.lean_callable``).

Every compile state has its own backend, so Dynamo compiles a decorated class's ``forward``
once per instance; Dynamo's recompile limit, which counts the cache entries of a code object
whichever state made them, is raised while one state compiles by the entries the other states
of that code made, so each state has the whole limit for its own graphs, however many instances
share the code (Hugging Face's decoder layers share one wrapper's code across every layer class).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import inspect
import itertools
import logging
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch._dynamo.exc import BackendCompilerFailed
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

from magi_compiler import dynamic_dims, size_bounds
from magi_compiler.aot.mode import AOTEntryInfo, AOTFallback, AOTStrategy, dynamo_cache_entries
from magi_compiler.backend import CacheMissError, MagiBackend, model_name
from magi_compiler.config import CompileConfig, CompileMode, op_name_parts
from magi_compiler.counters import compilation_counter
from magi_compiler.log import EntryLevelLogger, entry_log_level, parse_level
from magi_compiler.swapped_code import call_without_dynamo, relink

logger = EntryLevelLogger(logging.getLogger(__name__))

DynamicArgDims = Mapping[str, int | Sequence[int]] | None

_model_indices = itertools.count()
_capturing: list[EntryState] = []
_hook_registered = False


def _bytecode_hook(old_code: types.CodeType, new_code: types.CodeType) -> None:
    if _capturing and old_code is _capturing[-1].code:
        _capturing[-1].captured_code = new_code


def _ensure_bytecode_hook() -> None:
    global _hook_registered
    if not _hook_registered:
        torch._dynamo.convert_frame.register_bytecode_hook(_bytecode_hook)
        _hook_registered = True


def _describe_tensor(value: torch.Tensor, dynamic_dims: tuple[int, ...]) -> tuple:
    shape = value.shape
    if dynamic_dims:
        masked = list(shape)
        for dim in dynamic_dims:
            if masked[dim] >= 2:
                masked[dim] = -1
        shape = tuple(masked)
    # a non-contiguous tensor's strides, exactly: Inductor's code asserts the strides it was compiled for
    return (value.dtype, value.device, shape, True if value.is_contiguous() else value.stride(), value.requires_grad)


class Opaque:
    """What the dispatch signature holds for an argument it cannot describe: an object of a type
    other than those :func:`_describe` names (a KV-cache object whose tensors grow between calls,
    say). Equal to nothing, so a signature holding one never matches and the call keeps Dynamo's
    guards."""

    __slots__ = ("kind",)

    def __init__(self, kind: type) -> None:
        self.kind = kind


_BY_VALUE = (
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    enum.Enum,
    types.FunctionType,
    types.BuiltinFunctionType,
)
"""Argument types described by their value: immutable, hashable, compared by equality."""


def _describe(value: Any, dynamic_dims: tuple[int, ...]) -> Any:
    if isinstance(value, torch.Tensor):
        return _describe_tensor(value, dynamic_dims)
    if value is None or isinstance(value, _BY_VALUE):
        return (type(value), value)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_describe(item, ()) for item in value))
    if isinstance(value, dict):
        return (type(value), tuple((key, _describe(item, ())) for key, item in value.items()))
    if isinstance(value, torch.nn.Module):  # a module argument: its train() / eval() flag, as for the entry's own
        return (type(value), value.training)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value), tuple(_describe(getattr(value, name), ()) for name in _field_names(type(value))))
    return Opaque(type(value))


def opaque_types(described: Any) -> list[type]:
    """The types of the arguments a dispatch signature (or part of one) could not describe."""
    if isinstance(described, Opaque):
        return [described.kind]
    if isinstance(described, tuple):
        return [kind for item in described for kind in opaque_types(item)]
    return []


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls))


_any_autocast = torch._C._is_any_autocast_enabled
_grad_enabled = torch.is_grad_enabled
_inference_mode = torch.is_inference_mode_enabled


def _ambient_modes() -> tuple:
    """Grad mode, inference mode and autocast (per device type) of the calling thread; the
    per-device autocast lookups only run when some autocast is on."""
    autocast = _any_autocast() and (torch.is_autocast_enabled("cpu"), torch.is_autocast_enabled("cuda"))
    return (_grad_enabled(), _inference_mode(), autocast)


def _is_dim(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_registered_op(name: str) -> bool:
    """Whether the splitting op ``name`` resolves to an op (and overload) registered with torch now."""
    namespace, op, overload = op_name_parts(name)
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
    except AttributeError:
        return False
    return overload is None or overload in packet.overloads()


class EntryState:
    """The compile state of one entry: ``fn`` called with ``bound_self`` first when given. With
    ``config.log_level`` set, each call runs under that level (:func:`magi_compiler.log.entry_log_level`)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        config: CompileConfig,
        dynamic_arg_dims: DynamicArgDims = None,
        model_tag: str | None = None,
        bound_self: Any = None,
    ) -> None:
        assert isinstance(fn, types.FunctionType), f"EntryState needs a plain function, got {type(fn).__name__}"
        self.fn = fn
        self.code = fn.__code__
        self.config = config
        self.model_tag = model_tag
        self.bound_self = bound_self
        self.aot: bool = config.aot
        self.aot_strategy: AOTStrategy | None = None  # built on the first call of an AOT entry
        self.model_index: int | None = None
        self.backend: MagiBackend | None = None
        self.compiled_callable: Callable[..., Any] | None = None
        self.captured_code: types.CodeType | None = None
        self._swapped: dict[tuple, Callable[..., Any]] = {}
        # the size ranges each swapped code's graph allows, where narrower than the default (size_bounds)
        self._swapped_bounds: dict[tuple, tuple[size_bounds.SizeBound, ...]] = {}
        self._traced_bounds: tuple[size_bounds.SizeBound, ...] = ()
        self._logged_opaque = False
        self._dynamo_entries = 0
        params = list(inspect.signature(fn).parameters.values())
        self._positional_names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._varargs_name = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        self._explicit_dims = self._normalize_dims(dynamic_arg_dims, {p.name for p in params})
        self._dims_cache: dict[tuple[str | None, int], tuple[int, ...]] = {}
        self._signature_dims_memo: dict[tuple[int, int], tuple[int, ...]] = {}
        self._self_offset = 0 if bound_self is None else 1
        # model.train() / model.eval() on the entry's own module change what its code computes
        self._module_self = bound_self if isinstance(bound_self, torch.nn.Module) else None
        # this entry's own log level, in effect during its calls only (magi_compiler.log)
        self._log_level = parse_level(config.log_level, "log_level") if config.log_level.strip() else None
        # what the decorator calls: the entry's call, under its own log level where it has one
        self.call: Callable[..., Any] = self._call if self._log_level is None else self._call_at_level

    @staticmethod
    def _normalize_dims(dims: DynamicArgDims, names: set[str]) -> dict[str, tuple[int, ...]] | None:
        if dims is None:
            return None
        if not isinstance(dims, Mapping):
            raise TypeError(f"dynamic_arg_dims must map parameter names to dims, got {type(dims).__name__}")
        normalized = {}
        for name, value in dims.items():
            if name not in names:
                raise ValueError(
                    f"dynamic_arg_dims names {name!r}, which is not a parameter (parameters: {sorted(names)})"
                )
            listed = (value,) if isinstance(value, int) else value
            if not isinstance(listed, (tuple, list)) or not all(_is_dim(dim) for dim in listed):
                raise TypeError(f"dynamic_arg_dims[{name!r}] must be an int or a list of ints, got {value!r}")
            normalized[name] = tuple(listed)
        return normalized

    @property
    def dims_are_strict(self) -> bool:
        """Whether the dynamic dims were named by the user (strict) or inferred (soft)."""
        return self._explicit_dims is not None

    @property
    def model_name(self) -> str:
        assert self.model_index is not None, "the model has no index before its first compile"
        return model_name(self.model_index, self.model_tag)

    def _full_args(self, args: tuple) -> tuple:
        return args if self.bound_self is None else (self.bound_self, *args)

    def _dims_for(self, name: str | None, value: Any) -> tuple[int, ...]:
        if not isinstance(value, torch.Tensor):
            return ()
        cache_key = (name, value.dim())
        dims = self._dims_cache.get(cache_key)
        if dims is None:
            ndim = value.dim()
            if self._explicit_dims is None:
                wanted: tuple[int, ...] = (0,) if ndim else ()
            else:
                wanted = self._explicit_dims.get(name, ()) if name is not None else ()
                for dim in wanted:
                    if not -ndim <= dim < ndim:
                        raise ValueError(
                            f"dynamic_arg_dims names dim {dim} of {name!r}, which has {ndim} dim(s) in this call"
                        )
            dims = tuple(d % ndim for d in wanted)
            self._dims_cache[cache_key] = dims
        return dims

    def _named_args(self, full_args: tuple, kwargs: Mapping[str, Any]) -> list[tuple[str | None, Any]]:
        named: list[tuple[str | None, Any]] = []
        for position, value in enumerate(full_args):
            name = self._positional_names[position] if position < len(self._positional_names) else self._varargs_name
            named.append((name, value))
        named.extend(kwargs.items())
        return named

    def _signature_dims(self, name: str | None, value: Any) -> tuple[int, ...]:
        """The dims the dispatch signature lets vary: the named ones, or the inferred ones the
        traced graph kept symbolic."""
        dims = self._dims_for(name, value)
        if self._explicit_dims is not None or not dims:
            return dims
        assert self.backend is not None, "the signature of an inferred dim needs the traced graph"
        symbolic = self.backend.symbolic_dims.get(name, frozenset()) if name is not None else frozenset()
        return tuple(d for d in dims if d in symbolic)

    def _name_at(self, position: int) -> str | None:
        names = self._positional_names
        return names[position] if position < len(names) else self._varargs_name

    def _dispatch_signature(self, args: tuple, kwargs: Mapping[str, Any]) -> tuple:
        """The signature of a call with ``args`` (without ``bound_self``, which is the same on
        every call) and ``kwargs``. The signature dims of each argument position (or keyword)
        and rank are memoized in ``_signature_dims_memo``, which a compile clears (an inferred
        dim's symbolic-ness comes from the last graph traced)."""
        memo = self._signature_dims_memo
        described = []
        for position, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                key = (position, value.ndim)
                dims = memo.get(key)
                if dims is None:
                    dims = memo[key] = self._signature_dims(self._name_at(position + self._self_offset), value)
                described.append(_describe_tensor(value, dims))
            else:
                described.append(_describe(value, ()))
        for name, value in kwargs.items():
            described.append((name, _describe(value, self._signature_dims(name, value))))
        module = self._module_self
        return (_ambient_modes(), module is not None and module.training, tuple(described))

    def mark_dynamic_dims(self, full_args: tuple, kwargs: Mapping[str, Any]) -> None:
        """Mark the dynamic dims (:mod:`magi_compiler.dynamic_dims`): named dims strictly (a size
        of 0 or 1 raises ``ValueError``), inferred ones softly."""
        for name, value in self._named_args(full_args, kwargs):
            dims = self._dims_for(name, value)
            if dims:
                dynamic_dims.mark(name, value, dims, strict=self.dims_are_strict)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(*args, **kwargs)

    def _call_at_level(self, *args: Any, **kwargs: Any) -> Any:
        with entry_log_level(self._log_level):
            return self._call(*args, **kwargs)

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        """One call of the entry, made outside Dynamo's tracing (the decorator runs the function
        itself while Dynamo traces, so the swapped path does not ask again)."""
        if self._swapped:
            # only a JIT Magi entry with the swap on fills _swapped (an AOT entry after its fallback)
            signature = self._dispatch_signature(args, kwargs)
            swapped = self._swapped.get(signature)
            if swapped is not None and (
                not self._swapped_bounds or size_bounds.within(self._swapped_bounds.get(signature, ()), args, kwargs)
            ):
                compilation_counter.num_swapped_calls += 1
                if self.bound_self is not None:
                    args = (self.bound_self, *args)
                return call_without_dynamo(swapped, *args, **kwargs)
        full_args = self._full_args(args)
        mode = self.config.compile_mode
        if mode is CompileMode.NONE or torch.compiler.is_compiling():
            return self.fn(*full_args, **kwargs)
        if mode is CompileMode.TORCH_COMPILE:
            if self.compiled_callable is None:
                self.mark_dynamic_dims(full_args, kwargs)
                self.compiled_callable = torch.compile(self.fn, backend=self.config.backend)
            return self.compiled_callable(*full_args, **kwargs)
        if self.aot:
            return self._call_aot(full_args, kwargs)
        if self.compiled_callable is None:
            return self.first_compile(full_args, kwargs)
        if not self.dims_are_strict:  # soft marks live on the tensors: a recompile needs them again
            self.mark_dynamic_dims(full_args, kwargs)
        return self._call_capturing(full_args, kwargs)

    def _call_aot(self, full_args: tuple, kwargs: Mapping[str, Any]) -> Any:
        """One call through the AOT strategy; on its fallback decision this entry goes JIT for the
        rest of the process and the call is retried that way (:mod:`magi_compiler.aot.mode`)."""
        if self.aot_strategy is None:
            index = self.ensure_model_index()
            self.aot_strategy = AOTStrategy(
                AOTEntryInfo(
                    model_name=model_name(index, self.model_tag),
                    fn=self.fn,
                    config=self.config,
                    model_index=index,
                    model_tag=self.model_tag,
                    tensors=self._tensor_args,
                    mark_dims=self._mark_for_aot_compile,
                )
            )
        try:
            outcome = self.aot_strategy(full_args, kwargs)
        except ConstraintViolationError as error:
            raise self._named_dims_error(error) from error
        if not isinstance(outcome, AOTFallback):
            return outcome
        self.aot = False
        self.aot_strategy = None
        self._mark_for_aot_compile(full_args, kwargs, outcome.first)
        return self.compile_jit(full_args, dict(kwargs))

    def _tensor_args(self, full_args: tuple, kwargs: Mapping[str, Any]) -> list[torch.Tensor]:
        return [value for _, value in self._named_args(full_args, kwargs) if isinstance(value, torch.Tensor)]

    def _mark_for_aot_compile(self, full_args: tuple, kwargs: Mapping[str, Any], first: bool) -> None:
        """The first compile marks like JIT does (0/1 sizes are an error); a later one (a guard
        miss) marks only dynamic dims whose size is at least 2, leaving the rest specialised."""
        if first:
            self.mark_dynamic_dims(full_args, kwargs)
            return
        for name, value in self._named_args(full_args, kwargs):
            dims = tuple(dim for dim in self._dims_for(name, value) if value.shape[dim] >= 2)
            dynamic_dims.mark(name, value, dims, strict=self.dims_are_strict)

    def first_compile(self, full_args: tuple, kwargs: Mapping[str, Any]) -> Any:
        """The first call: check and mark the dynamic dims, compile, run."""
        self.mark_dynamic_dims(full_args, kwargs)
        return self.compile_jit(full_args, kwargs)

    def ensure_model_index(self) -> int:
        """This entry's model index (the ``<idx>`` of its cache directory), assigned on first use
        in process order."""
        if self.model_index is None:
            self.model_index = next(_model_indices)
            compilation_counter.num_models_seen += 1
            self._log_unregistered_splitting_ops()
        return self.model_index

    def _log_unregistered_splitting_ops(self) -> None:
        """Warn (once, at the entry's first compile) of split points that resolve to no registered op."""
        if self.config.disable_graph_split:
            return
        unknown = [name for name in self.config.splitting_ops if not _is_registered_op(name)]
        if unknown:
            logger.warning(
                "%s: splitting_ops %s name no registered op; the graph is not split at them (register the "
                "op before the entry's first call, or correct the name)",
                self.model_name,
                unknown,
            )

    def _recompile_limit(self) -> contextlib.AbstractContextManager[None]:
        """Dynamo's recompile limit, raised by the cache entries other states made for the same
        code (Dynamo counts every entry of a code object, whichever backend made it), so each
        state has the whole limit for its own graphs."""
        others = dynamo_cache_entries(self.code) - self._dynamo_entries
        if others <= 0:
            return contextlib.nullcontext()
        limit = torch._dynamo.config.recompile_limit + others
        accumulated = max(torch._dynamo.config.accumulated_recompile_limit, limit)
        return torch._dynamo.config.patch(recompile_limit=limit, accumulated_recompile_limit=accumulated)

    def compile_jit(self, full_args: tuple, kwargs: Mapping[str, Any]) -> Any:
        """Compile through a fresh ``torch.compile`` wrapper and a fresh ``MagiBackend`` and
        run the call; ``full_args`` include ``bound_self``. Safe to call again after a failed
        attempt once the caller removed the code from Dynamo's cache."""
        self.ensure_model_index()
        self.backend = MagiBackend(self.config, self.model_index, self.model_tag)
        self.compiled_callable = torch.compile(self.fn, fullgraph=True, backend=self._recording_bounds(self.backend))
        return self._call_capturing(full_args, kwargs)

    def _recording_bounds(self, backend: MagiBackend) -> Callable[..., Any]:
        """``backend`` as Dynamo calls it, keeping the traced graph's size ranges for the swap."""
        positional_names = self._positional_names[self._self_offset :]

        def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
            compiled = backend(gm, example_inputs)
            self._traced_bounds = size_bounds.traced_size_bounds(positional_names)
            return compiled

        return compile_graph

    def _call_capturing(self, full_args: tuple, kwargs: Mapping[str, Any]) -> Any:
        assert self.compiled_callable is not None
        _ensure_bytecode_hook()
        self.captured_code = None
        self._traced_bounds = ()
        _capturing.append(self)
        try:
            with self._recompile_limit():
                output = self.compiled_callable(*full_args, **kwargs)
        except BackendCompilerFailed as err:
            if isinstance(err.inner_exception, CacheMissError):
                raise err.inner_exception from None
            raise
        except ConstraintViolationError as error:
            raise self._named_dims_error(error) from error
        finally:
            _capturing.pop()
        self._signature_dims_memo.clear()  # a new graph may keep other inferred dims symbolic
        if self.captured_code is not None:
            compilation_counter.num_bytecode_captures += 1
            self._dynamo_entries += 1
            self._swap_in(full_args[self._self_offset :], kwargs)
        return output

    def _swap_in(self, args: tuple, kwargs: Mapping[str, Any]) -> None:
        """Serve later calls with this call's signature by the code just captured, unless the swap
        is off or an argument is of a type the signature cannot describe (logged once)."""
        assert self.captured_code is not None
        if not self.config.bytecode_swap:
            logger.debug("%s: bytecode_swap is off; later calls keep Dynamo's guards", self.model_name)
            return
        signature = self._dispatch_signature(args, kwargs)
        opaque = opaque_types(signature)
        if opaque:
            if not self._logged_opaque:
                self._logged_opaque = True
                logger.info(
                    "%s: arguments of type %s are not described by the dispatch signature (it describes "
                    "tensors, scalars, dtypes, devices, enums, functions, tuples, lists, dicts, dataclasses "
                    "and modules); calls with them keep Dynamo's guards",
                    self.model_name,
                    ", ".join(sorted({kind.__qualname__ for kind in opaque})),
                )
            return
        self._swapped[signature] = self._function_for(self.captured_code)
        if self._traced_bounds:
            self._swapped_bounds[signature] = self._traced_bounds
        else:
            self._swapped_bounds.pop(signature, None)

    def _named_dims_error(self, error: ConstraintViolationError) -> ValueError:
        """The error for a dim named in ``dynamic_arg_dims`` that the traced code does not let vary
        (only named dims are marked strictly, so only they can violate a constraint)."""
        assert self.dims_are_strict, f"a constraint violation without named dims: {error}"
        return ValueError(
            f"{self.model_name}: dynamic_arg_dims={self._explicit_dims} names a dim that "
            f"{self.fn.__qualname__} does not let vary (the code specializes it, or ties it to a dim "
            f"that is not named): name every dim whose size changes with it, or leave it out. "
            f"torch: {error}"
        )

    def _function_for(self, code: types.CodeType) -> Callable[..., Any]:
        """The swapped-in function: ``code`` relinked (:mod:`magi_compiler.swapped_code`) with the
        entry's globals, defaults and closure; it runs under ``call_without_dynamo`` only."""
        swapped = types.FunctionType(
            relink(code, self.fn.__globals__),
            self.fn.__globals__,
            self.fn.__name__,
            self.fn.__defaults__,
            self.fn.__closure__,
        )
        swapped.__kwdefaults__ = self.fn.__kwdefaults__
        return swapped
