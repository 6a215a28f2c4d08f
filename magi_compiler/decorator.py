"""``magi_compile``: the public decorator.

Forms: ``@magi_compile`` / ``@magi_compile(...)`` on an ``nn.Module`` subclass (every
instance's ``forward``, or ``method_name``, is compiled, with one compile state per
instance) or on a plain function; ``magi_compile(obj.method)`` or
``magi_compile(obj, method_name="forward")`` for one instance's method (the compiled
method is installed on that instance).

The configuration is built when an entry's state is created (first call):
``CompileConfig.from_env()`` with ``config_patch`` applied on top.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from magi_compiler.config import CompileConfig, ConfigPatch, apply_config_patch
from magi_compiler.entry_state import DynamicArgDims, EntryState

_STATE_ATTR = "_magi_entry_states"
_NO_STATES: Mapping[str, EntryState] = types.MappingProxyType({})


def _build_config(config_patch: ConfigPatch) -> CompileConfig:
    return apply_config_patch(CompileConfig.from_env(), config_patch)


def get_entry_state(obj: Any, method_name: str = "forward") -> EntryState | None:
    """The compile state behind a decorated function or method wrapper, or behind
    ``method_name`` of an instance (decorated class, or one instance's method); None before
    the first call."""
    holder = getattr(obj, "_magi_state_holder", None)
    if holder is not None:
        return holder.get("state")
    instance_dict = getattr(obj, "__dict__", {})
    state = instance_dict.get(_STATE_ATTR, {}).get(method_name)
    if state is None and method_name in instance_dict:
        return get_entry_state(instance_dict[method_name])
    return state


def magi_compile(
    obj: Any = None,
    *,
    dynamic_arg_dims: DynamicArgDims = None,
    model_tag: str | None = None,
    config_patch: ConfigPatch = None,
    method_name: str | None = None,
) -> Any:
    """Compile a class's method, a function or one instance's method with MagiBackend.

    ``dynamic_arg_dims`` maps argument names to the dims that vary between calls (default:
    dim 0 of every tensor argument); ``model_tag`` names the model in the cache directory.
    """
    options = {"dynamic_arg_dims": dynamic_arg_dims, "model_tag": model_tag, "config_patch": config_patch}
    if obj is None:
        return functools.partial(magi_compile, method_name=method_name, **options)
    if isinstance(obj, type):
        return _compile_class(obj, method_name or "forward", **options)
    if inspect.ismethod(obj):
        return _compile_bound_method(obj.__self__, obj.__func__, obj.__name__, **options)
    if method_name is not None:
        bound = getattr(obj, method_name)
        if not inspect.ismethod(bound):
            raise TypeError(f"{type(obj).__name__}.{method_name} is not a method")
        _compile_bound_method(obj, bound.__func__, method_name, **options)
        return obj
    if inspect.isfunction(obj):
        return _compile_function(obj, **options)
    if isinstance(obj, torch.nn.Module):
        raise TypeError(
            f"magi_compile got a {type(obj).__name__} instance: pass method_name='forward' "
            f"(magi_compile(model, method_name='forward')) or its bound method (magi_compile(model.forward))"
        )
    raise TypeError(f"magi_compile expects a class, a function or a bound method, got {type(obj).__name__}")


def _new_entry_state(fn: Callable[..., Any], bound_self: Any, options: dict[str, Any]) -> EntryState:
    """The compile state of one entry, built on its first call (the config is read then)."""
    return EntryState(
        fn,
        _build_config(options["config_patch"]),
        options["dynamic_arg_dims"],
        options["model_tag"],
        bound_self=bound_self,
    )


def _compile_class(cls: type, method_name: str, **options: Any) -> type:
    original = getattr(cls, method_name, None)
    if not inspect.isfunction(original):
        raise TypeError(f"{cls.__name__}.{method_name} is not a plain method")

    @functools.wraps(original)
    def compiled_method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return original(self, *args, **kwargs)
        state = self.__dict__.get(_STATE_ATTR, _NO_STATES).get(method_name)
        if state is None:
            state = _new_entry_state(original, self, options)
            self.__dict__.setdefault(_STATE_ATTR, {})[method_name] = state
        return state.call(*args, **kwargs)

    setattr(cls, method_name, compiled_method)
    return cls


def _lazy_entry(fn: Callable[..., Any], bound_self: Any, **options: Any) -> Callable[..., Any]:
    holder: dict[str, EntryState] = {}

    @functools.wraps(fn)
    def compiled(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return fn(*args, **kwargs) if bound_self is None else fn(bound_self, *args, **kwargs)
        state = holder.get("state")
        if state is None:
            state = _new_entry_state(fn, bound_self, options)
            holder["state"] = state
        return state.call(*args, **kwargs)

    compiled._magi_state_holder = holder  # type: ignore[attr-defined]
    return compiled


def _compile_function(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    return _lazy_entry(fn, None, **options)


def _compile_bound_method(instance: Any, fn: Callable[..., Any], name: str, **options: Any) -> Callable[..., Any]:
    compiled = _lazy_entry(fn, instance, **options)
    object.__setattr__(instance, name, compiled)
    return compiled
