"""The function the bytecode swap runs: Dynamo's captured bytecode, relinked so that one call
switches Dynamo's frame evaluation off once instead of once per helper.

Dynamo's transformed code calls its compiled graph through a global ``__compiled_fn_*``
bound to a ``torch._dynamo.disable`` wrapper, and its prologue calls helpers of
``torch._dynamo.utils`` (``record_pregraph_bytecode_enter`` / ``_exit``, ``call_size``,
``call_stride``), each wrapped to disable Dynamo as well: every wrapper switches the
frame-evaluation callback off and back on, about 1 us a call on CPU. The swapped path runs
the whole call with the callback off (:func:`call_without_dynamo`), so the relinked code
(:func:`relink`) uses unwrapped callables: each graph global is renamed to one bound to what
the wrapper wraps (the backend's function, or its module), and the utils module to :data:`LEAN_UTILS`, whose
helpers skip the wrappers (the pre-graph profiler range is still recorded while a profiler
runs) and which forwards every other attribute to ``torch._dynamo.utils``. A name that is not
there (another torch version's bytecode) is left alone, so that call keeps its wrapper.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo.utils
from torch._dynamo.eval_frame import DisableContext, OptimizedModule

UTILS_GLOBAL = "__import_torch_dot__dynamo_dot_utils"
GRAPH_GLOBAL_PREFIX = "__compiled_fn"
LEAN_UTILS_GLOBAL = "__magi_lean_dynamo_utils"
DIRECT_PREFIX = "__magi_direct"

_NO_RANGE = contextlib.nullcontext()
_set_eval_frame = torch._C._dynamo.eval_frame.set_eval_frame


class _LeanDynamoUtils:
    """``torch._dynamo.utils`` for code that runs with Dynamo's frame evaluation already off."""

    @staticmethod
    def record_pregraph_bytecode_enter() -> contextlib.AbstractContextManager[None]:
        if torch.autograd.profiler._is_profiler_enabled:
            return torch._dynamo.utils.record_pregraph_bytecode_enter()
        return _NO_RANGE

    @staticmethod
    def record_pregraph_bytecode_exit(cm: contextlib.AbstractContextManager[None]) -> None:
        if cm is not _NO_RANGE:
            torch._dynamo.utils.record_pregraph_bytecode_exit(cm)

    @staticmethod
    def call_size(x: Any, i: int) -> int:
        return x.size(i)

    @staticmethod
    def call_stride(x: Any, i: int) -> int:
        return x.stride(i)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch._dynamo.utils, name)


LEAN_UTILS = _LeanDynamoUtils()


def relink(code: types.CodeType, fn_globals: dict[str, Any]) -> types.CodeType:
    """``code`` with its Dynamo-disabled globals renamed to unwrapped twins, which are bound
    in ``fn_globals`` (the entry function's module globals, where Dynamo put the originals).
    The result must only run under :func:`call_without_dynamo`."""
    names = list(code.co_names)
    for index, name in enumerate(names):
        if name == UTILS_GLOBAL and fn_globals.get(name) is torch._dynamo.utils:
            fn_globals[LEAN_UTILS_GLOBAL] = LEAN_UTILS
            names[index] = LEAN_UTILS_GLOBAL
        elif name.startswith(GRAPH_GLOBAL_PREFIX):
            inner = _disabled_callable(fn_globals.get(name))
            if inner is not None:
                direct = DIRECT_PREFIX + name
                fn_globals[direct] = inner
                names[index] = direct
    return code.replace(co_names=tuple(names))


def _disabled_callable(wrapper: Any) -> Callable[..., Any] | None:
    """What a ``torch._dynamo.disable`` wrapper wraps: a function's original, or a module
    (a backend that returns a GraphModule, such as a split graph, gets an ``OptimizedModule``);
    None for anything else."""
    if isinstance(wrapper, OptimizedModule):
        return wrapper._orig_mod if isinstance(wrapper.dynamo_ctx, DisableContext) else None
    if getattr(wrapper, "_torchdynamo_disable", False):
        return getattr(wrapper, "_torchdynamo_orig_callable", None)
    return None


def call_without_dynamo(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with Dynamo's frame-evaluation callback off (as
    ``torch._dynamo.disable`` does), restored afterwards."""
    prior = _set_eval_frame(None)
    try:
        return fn(*args, **kwargs)
    finally:
        _set_eval_frame(prior)
