"""The function the bytecode swap runs: Dynamo's captured bytecode, relinked so that one call
switches Dynamo's frame evaluation off once instead of once per helper.

Dynamo's transformed code calls its compiled graph through a global ``__compiled_fn_*``
bound to a ``torch._dynamo.disable`` wrapper, and its prologue calls helpers of
``torch._dynamo.utils`` (``record_pregraph_bytecode_enter`` / ``_exit``, ``call_size``,
``call_stride``), each wrapped to disable Dynamo as well: every wrapper switches the
frame-evaluation callback off and back on, about 1 us a call on CPU. The swapped path runs
the whole call with the callback off (:func:`call_without_dynamo`), so the relinked code
(:func:`relink`) uses unwrapped callables: each graph global is renamed to one bound to what
the wrapper wraps, made lean (:func:`lean_callable`), and the utils module to :data:`LEAN_UTILS`, whose
helpers skip the wrappers (the pre-graph profiler range is still recorded while a profiler
runs) and which forwards every other attribute to ``torch._dynamo.utils``. A name that is not
there (another torch version's bytecode) is left alone, so that call keeps its wrapper.

Lean callables. What the backend returns is called through layers that only matter with
Dynamo's frame evaluation on, or that forward their arguments unchanged: an Inductor
``CacheCompiledArtifact`` calls its ``_compiled_fn``, which for a freshly compiled piece is a
further ``disable`` wrapper (about 2 us a call on CPU); a split graph is a ``GraphModule`` whose
every call, and every call of its eagerly run splitting-op pieces, goes through
``nn.Module.__call__`` (about 2-3 us each). :func:`lean_callable` replaces a compiled artifact by
the direct call of Inductor's generated code that :func:`magi_compiler.inference_call.direct_call`
builds for a plain inference graph, or else by its ``_compiled_fn`` (``disable`` wrappers removed:
AOTAutograd's runtime wrapper and Inductor's compiled graph keep their full call path); a piece
loaded from the Magi cache that returns a single value the same way, its first output taken; and a
split graph by the ``forward`` of a twin ``GraphModule`` (same graph) whose pieces are lean too:
compiled pieces as above, the eagerly run splitting-op pieces inlined (the twin's own code calls
their op). Module hooks are not called for these
internal modules on the swapped path (global ``nn.Module`` hooks would see the split graph and its
pieces on the guarded path only); the user's modules are not affected.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo.utils
from torch import fx
from torch._dynamo.eval_frame import DisableContext, OptimizedModule

from magi_compiler.compiler_interface import SingleOutput
from magi_compiler.inference_call import direct_call, first_output, without_disable

UTILS_GLOBAL = "__import_torch_dot__dynamo_dot_utils"
GRAPH_GLOBAL_PREFIX = "__compiled_fn"
LEAN_UTILS_GLOBAL = "__magi_lean_dynamo_utils"
DIRECT_PREFIX = "__magi_direct"

_NO_RANGE = contextlib.nullcontext()
_profiler = torch.autograd.profiler
_set_eval_frame = torch._C._dynamo.eval_frame.set_eval_frame
# Inductor's artifact whose __call__ is ``self._compiled_fn(*args)`` (torch 2.11 and 2.13); None where
# a torch version has no such class (then artifacts keep their own __call__)
try:
    from torch._inductor.standalone_compile import CacheCompiledArtifact as _CACHE_ARTIFACT
except ImportError:
    _CACHE_ARTIFACT = None


class _LeanDynamoUtils:
    """``torch._dynamo.utils`` for code that runs with Dynamo's frame evaluation already off."""

    @staticmethod
    def record_pregraph_bytecode_enter() -> contextlib.AbstractContextManager[None]:
        if _profiler._is_profiler_enabled:
            return torch._dynamo.utils.record_pregraph_bytecode_enter()
        return _NO_RANGE

    @staticmethod
    def record_pregraph_bytecode_exit(cm: contextlib.AbstractContextManager[None]) -> None:
        if cm is not _NO_RANGE:
            torch._dynamo.utils.record_pregraph_bytecode_exit(cm)

    @staticmethod
    def call_size(x: Any, i: int) -> int:
        return x.shape[i]  # a tensor's size as x.size(i) gives it, without parsing the argument

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
                fn_globals[direct] = lean_callable(inner)
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


def lean_callable(compiled: Any) -> Any:
    """The cheapest callable that does what ``compiled`` (the backend's output, or a piece of a
    split graph) does when called with Dynamo's frame evaluation off (see the module doc):
    an Inductor ``CacheCompiledArtifact``'s ``_compiled_fn`` without ``disable`` wrappers, a
    ``GraphModule``'s forward run by a twin whose pieces are lean; anything else unchanged."""
    if _CACHE_ARTIFACT is not None and type(compiled) is _CACHE_ARTIFACT:
        inner = getattr(compiled, "_compiled_fn", None)
        if inner is None:
            return compiled
        inner = without_disable(inner)
        return direct_call(inner) or inner
    if isinstance(compiled, SingleOutput):
        return first_output(lean_callable(compiled.artifact))
    if isinstance(compiled, fx.GraphModule):
        return _lean_graph_module(compiled)
    return compiled


def _lean_graph_module(gm: fx.GraphModule) -> Callable[..., Any]:
    """``gm.forward`` of a twin of ``gm`` (same graph) whose pieces are lean: compiled pieces
    (callables in ``gm.__dict__``) through :func:`lean_callable`, a submodule whose graph only
    calls functions (a splitting-op piece) inlined, any other submodule made lean the same way."""
    graph = fx.Graph()
    env: dict[fx.Node, Any] = {}
    root: dict[str, Any] = {}
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "output":
            graph.output(fx.map_arg(node.args[0], env.__getitem__))
            continue
        if node.op == "call_module" and target not in gm.__dict__:
            submodule = gm.get_submodule(target)
            if _inlinable(submodule, node):
                env[node] = _inline(graph, submodule, fx.map_arg(node.args, env.__getitem__))
                continue
            root[target] = lean_callable(submodule)
        elif node.op == "call_module":
            root[target] = lean_callable(gm.__dict__[target])
        elif node.op == "get_attr":
            root[target] = _attr(gm, target)
        env[node] = graph.node_copy(node, env.__getitem__)
    return fx.GraphModule(root, graph, class_name=type(gm).__name__).forward


def _inlinable(submodule: torch.nn.Module, call: fx.Node) -> bool:
    """Whether ``submodule``, called by ``call``, is a GraphModule of placeholders (one per
    positional argument of the call) and function calls only."""
    if not isinstance(submodule, fx.GraphModule) or call.kwargs:
        return False
    ops = [node.op for node in submodule.graph.nodes]
    return ops.count("placeholder") == len(call.args) and set(ops) <= {"placeholder", "call_function", "output"}


def _inline(graph: fx.Graph, submodule: fx.GraphModule, args: tuple) -> Any:
    """Copy ``submodule``'s graph into ``graph`` with its placeholders bound to ``args``; returns
    what its output node returns (a node, or a structure of nodes)."""
    env: dict[fx.Node, Any] = {}
    placeholders = iter(args)
    for node in submodule.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(placeholders)
        elif node.op == "output":
            return fx.map_arg(node.args[0], env.__getitem__)
        else:
            env[node] = graph.node_copy(node, env.__getitem__)
    raise AssertionError(f"the graph of {type(submodule).__name__} has no output node")


def _attr(module: torch.nn.Module, target: str) -> Any:
    value: Any = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def call_without_dynamo(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with Dynamo's frame-evaluation callback off (as
    ``torch._dynamo.disable`` does), restored afterwards."""
    prior = _set_eval_frame(None)
    try:
        return fn(*args, **kwargs)
    finally:
        _set_eval_frame(prior)
