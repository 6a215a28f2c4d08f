"""The backend's compiled output in a form Dynamo's AOT compile can save.

``torch.compile(...).aot_compile`` requires the backend to return a
``torch._dynamo.aot_compile_types.SerializableCallable``; a plain callable makes it raise a
``RuntimeError``. ``SerializableCompiledGraph`` wraps what the Magi backend returns:

- an ``fx.GraphModule`` (the split graph): its eager submodules travel inside the graph module
  through ``GraphPickler``; compiled pieces, non-Module callables installed in the module's
  ``__dict__`` under a ``call_module`` target (shadowing the child module of that name, which
  stays registered), travel separately;
- any other callable (an unsplit graph's single piece): as a piece.

A piece that is an Inductor ``CompiledArtifact`` travels as its ``binary`` save format (the
artifact is self-contained, it does not point into the Magi cache) with whether its graph
returns a tuple: a loaded artifact always returns a sequence, and a piece of a split graph
whose graph returns a single value is unwrapped to match the fresh one
(``compiler_interface.with_fresh_outputs``); any other piece travels through ``pickle``.
"""

from __future__ import annotations

import functools
import os
import pickle
import tempfile
from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo.aot_compile_types import SerializableCallable

from magi_compiler.compiler_interface import SingleOutput, artifact_bytes, with_fresh_outputs

# Node metadata that holds live tracing objects GraphPickler cannot (and need not) carry.
_UNPICKLABLE_NODE_META = ("nn_module_stack", "source_fn_stack", "example_value")


def _compiled_piece_names(graph_module: torch.fx.GraphModule) -> list[str]:
    """``call_module`` targets backed by a non-Module callable in the module's ``__dict__``
    (attribute lookup finds it before a registered child module of the same name)."""
    targets = {str(node.target) for node in graph_module.graph.nodes if node.op == "call_module"}
    installed = graph_module.__dict__
    return sorted(t for t in targets if t in installed and not isinstance(installed[t], torch.nn.Module))


def _picklable_graph(graph_module: torch.fx.GraphModule) -> torch.fx.Graph:
    """A copy of ``graph_module``'s graph without the node metadata in ``_UNPICKLABLE_NODE_META``
    (the copy's nodes have metadata dicts of their own)."""
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    value_remap: dict[torch.fx.Node, torch.fx.Node] = {}
    graph = torch.fx.Graph()
    out = graph.graph_copy(graph_module.graph, value_remap)
    graph.output(out, type_expr=output.type)
    for node in graph.nodes:
        for key in _UNPICKLABLE_NODE_META:
            node.meta.pop(key, None)
    return graph


def _graph_shell(graph_module: torch.fx.GraphModule, pieces: list[str]) -> torch.fx.GraphModule:
    """A copy of ``graph_module`` whose compiled pieces are empty placeholder modules; the
    eager pieces (splitting ops) are copies without the tracing metadata, like the outer graph
    (their fake values can have symbolic shapes, which GraphPickler cannot carry)."""
    root: dict[str, Any] = {}
    for node in graph_module.graph.nodes:
        target = str(node.target)
        if node.op == "call_module" and target in pieces:
            root[target] = torch.nn.Module()
        elif node.op == "call_module":
            submodule = graph_module.get_submodule(target)
            is_graph = isinstance(submodule, torch.fx.GraphModule)
            root[target] = torch.fx.GraphModule(submodule, _picklable_graph(submodule)) if is_graph else submodule
        elif node.op == "get_attr":
            root[target] = functools.reduce(getattr, target.split("."), graph_module)
    return torch.fx.GraphModule(root, _picklable_graph(graph_module))


def _dump_piece(piece: Callable[..., Any], returns_tuple: bool) -> tuple[str, Any]:
    """A picklable form of one compiled piece: Inductor artifacts as their binary file contents
    and ``returns_tuple`` (whether the piece's graph returns a tuple)."""
    from torch._inductor import CompiledArtifact

    if isinstance(piece, SingleOutput):  # loaded from the Magi cache
        assert not returns_tuple, "a SingleOutput piece's graph returns a single value"
        piece = piece.artifact
    if isinstance(piece, CompiledArtifact):
        return "inductor", (artifact_bytes(piece), returns_tuple)
    return "pickle", piece


def _load_piece(kind: str, data: Any) -> Callable[..., Any]:
    from torch._inductor import CompiledArtifact

    if kind == "pickle":
        return data
    assert kind == "inductor", f"unknown piece kind {kind!r}"
    artifact_bytes, returns_tuple = data
    with tempfile.TemporaryDirectory(prefix="magi-aot-") as tmp:
        path = os.path.join(tmp, "piece.bin")
        with open(path, "wb") as handle:
            handle.write(artifact_bytes)
        return with_fresh_outputs(CompiledArtifact.load(path=path, format="binary"), returns_tuple)


class SerializableCompiledGraph(SerializableCallable):
    """A runnable compiled graph that Dynamo's AOT compile can serialise and load back."""

    def __init__(self, runnable: Callable[..., Any]) -> None:
        assert callable(runnable), f"expected a callable, got {type(runnable)}"
        self.runnable = runnable

    @classmethod
    def serialize_compile_artifacts(cls, fn: SerializableCompiledGraph) -> bytes:
        from torch._inductor.compile_fx import graph_returns_tuple
        from torch.fx._graph_pickler import GraphPickler, Options

        runnable = fn.runnable
        if not isinstance(runnable, torch.fx.GraphModule):
            # an unsplit graph is a Dynamo graph, which always returns a tuple
            return pickle.dumps(("piece", _dump_piece(runnable, returns_tuple=True)))
        names = _compiled_piece_names(runnable)
        shell_bytes = GraphPickler.dumps(_graph_shell(runnable, names), Options(ops_filter=None))
        pieces = {
            name: _dump_piece(runnable.__dict__[name], graph_returns_tuple(runnable._modules[name])) for name in names
        }
        return pickle.dumps(("graph_module", (shell_bytes, pieces)))

    @classmethod
    def deserialize_compile_artifacts(cls, data: bytes) -> SerializableCompiledGraph:
        from torch._subclasses import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        kind, state = pickle.loads(data)
        if kind == "piece":
            return cls(_load_piece(*state))
        assert kind == "graph_module", f"unknown serialized kind {kind!r}"
        shell_bytes, pieces = state
        graph_module = GraphPickler.loads(shell_bytes, FakeTensorMode(shape_env=ShapeEnv()))
        for name, (piece_kind, piece_data) in pieces.items():
            delattr(graph_module, name)
            graph_module.__dict__[name] = _load_piece(piece_kind, piece_data)
        graph_module.recompile()
        return cls(graph_module)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.runnable(*args, **kwargs)


class SerializingBackend:
    """Wraps a Dynamo backend so that its output is a ``SerializableCompiledGraph``."""

    def __init__(self, backend: Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]) -> None:
        self.backend = backend
        self.compiler_name = getattr(backend, "compiler_name", type(backend).__name__)

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> SerializableCompiledGraph:
        return SerializableCompiledGraph(self.backend(graph_module, example_inputs))
