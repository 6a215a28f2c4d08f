"""Launching the Triton kernels of Inductor's generated ``call()`` without the per-launch checks of
torch 2.11's ``CachingAutotuner.run``.

In torch 2.11, every launch through a kernel object's ``run`` asks for the active debug mode, sets
Triton's allocator (a new closure each time), checks the interpret, autotune, coordinate-descent,
cubin-saving, dump and profiler settings, and then calls the one launcher it has. In a steady state
(one launcher, none of those settings on) that work decides nothing: torch 2.13's ``run`` caches
the launcher after the first launch and calls it directly while neither the profiler nor a debug
mode is active. :func:`lean_kernels` gives torch 2.11 the same steady state for the generated
``call()`` the swapped path runs: a copy of the function over a copy of its module's globals, in
which each kernel object it launches is a :class:`LeanKernel`.

Constraints: apply it only after the generated code has run once (the kernels are compiled,
autotuned down to one launcher, and Triton's allocator is set); a kernel with more than one
launcher, a pending coordinate-descent tuning, cubin saving, launch dumps, the Triton interpreter
or a subclass of ``CachingAutotuner`` (Inductor's benchmarking ones) is left as it is; with torch
2.13's own fast path present nothing is replaced. A :class:`LeanKernel` takes the full ``run``
whenever the profiler or a debug mode is active, or a launch passes keyword arguments, so their
records stay as they are. Triton's allocator is not set again on each launch (as in torch 2.13's
fast path): code that replaces it between two calls replaces it for these kernels too.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from typing import Any

import torch
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
from torch.utils._debug_mode import get_active_debug_mode

logger = logging.getLogger(__name__)

_profiler = torch.autograd.profiler
# the wrapper torch 2.11's Inductor puts around ``call()`` when inputs need alignment checks,
# and the name of its closure cell holding ``call()``
_ALIGN_WRAPPER = "align_inputs_from_check_idxs.<locals>.run"
_ALIGN_CELL = "model"


class LeanKernel:
    """A kernel object whose ``run`` calls its autotuner's single launcher directly, except while
    the profiler or a debug mode is active or for keyword arguments (then the autotuner's ``run``)."""

    __slots__ = ("autotuner", "launcher")

    def __init__(self, autotuner: Any, launcher: Callable[..., Any]) -> None:
        self.autotuner = autotuner
        self.launcher = launcher

    def run(self, *args: Any, stream: int, **kwargs: Any) -> Any:
        if kwargs or _profiler._is_profiler_enabled or get_active_debug_mode() is not None:
            return self.autotuner.run(*args, stream=stream, **kwargs)
        return self.launcher(*args, stream=stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.autotuner, name)


def lean_kernels(current_callable: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    """``current_callable`` (a ``CompiledFxGraph``'s, after one call) with the Triton kernels its
    generated ``call()`` launches replaced by :class:`LeanKernel`; ``current_callable`` itself
    where no kernel qualifies (CPU code, torch 2.13, the module doc's exclusions)."""
    if current_callable.__qualname__ == _ALIGN_WRAPPER and isinstance(current_callable, types.FunctionType):
        return _with_inner(current_callable)
    if isinstance(current_callable, types.MethodType):  # ``runner.call`` of graph-partitioned code
        function = current_callable.__func__
        lean = lean_kernels(function)
        return current_callable if lean is function else types.MethodType(lean, current_callable.__self__)
    if not isinstance(current_callable, types.FunctionType):
        return current_callable
    if hasattr(CachingAutotuner, "_build_fast_launcher"):
        return current_callable  # torch's own steady-state fast path
    module_globals = current_callable.__globals__
    replaced = {}
    for name in current_callable.__code__.co_names:
        kernel = module_globals.get(name)
        if type(kernel) is CachingAutotuner and _steady(kernel):
            replaced[name] = LeanKernel(kernel, kernel.launchers[0])
    if not replaced:
        return current_callable
    logger.debug("%d Triton kernel(s) of %r launched directly", len(replaced), current_callable)
    return types.FunctionType(
        current_callable.__code__,
        {**module_globals, **replaced},
        current_callable.__name__,
        current_callable.__defaults__,
        current_callable.__closure__,
    )


def _steady(kernel: Any) -> bool:
    """Whether torch 2.11's ``CachingAutotuner.run`` of ``kernel`` would only call its launcher."""
    if len(kernel.launchers) != 1 or kernel.triton_interpret:
        return False
    if kernel.dump_launch_params or kernel.dump_launch_tensors:
        return False
    launcher = kernel.launchers[0]
    if getattr(launcher, "store_cubin", False):
        return False
    return not (
        kernel.inductor_meta.get("coordinate_descent_tuning", False)
        and not getattr(launcher.config, "found_by_coordesc", False)
    )


def _with_inner(wrapper: types.FunctionType) -> Callable[[list[Any]], Any]:
    """Torch 2.11's alignment wrapper with :func:`lean_kernels` applied to the ``call()`` it wraps."""
    names = wrapper.__code__.co_freevars
    assert wrapper.__closure__ is not None and _ALIGN_CELL in names, f"{wrapper!r} closes over {names}"
    cells = dict(zip(names, wrapper.__closure__))
    inner = cells[_ALIGN_CELL].cell_contents
    lean = lean_kernels(inner)
    if lean is inner:
        return wrapper
    closure = tuple(types.CellType(lean) if name == _ALIGN_CELL else cells[name] for name in names)
    return types.FunctionType(wrapper.__code__, wrapper.__globals__, wrapper.__name__, wrapper.__defaults__, closure)
