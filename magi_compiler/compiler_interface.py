"""Compiling one graph piece with Inductor (or keeping it eager), saving and loading it.

Artifacts use Inductor's own serialization (``torch._inductor.standalone_compile`` and
``CompiledArtifact.save/load`` in the ``binary`` format, one file per piece).
"""

from __future__ import annotations

import logging
import os
import tempfile
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor

from magi_compiler.counters import compilation_counter
from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))

INDUCTOR = "inductor"
EAGER = "eager"

# each artifact load_artifact loaded -> the file it came from: a loaded artifact keeps no bytes
# Inductor could save again, the file holds them
_loaded_from: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def compile_piece(
    gm: fx.GraphModule, example_inputs: Sequence[Any], compiler_name: str
) -> tuple[Callable[..., Any], Any]:
    """Compile ``gm`` for its (fake) ``example_inputs``; returns (callable, artifact or None).

    Must run inside Dynamo's backend call. Dynamic shapes come from the fake mode of the values
    Dynamo recorded on ``gm`` (:func:`_dynamic_shapes_source`). The inputs must be
    flat (no tuple or list): Inductor would flatten them only in the callable it returns, not
    in the artifact it saves, so a loaded artifact would be called differently
    (``magi_compiler.splitting`` keeps piece inputs flat).
    """
    nested = [i for i, value in enumerate(example_inputs) if isinstance(value, (tuple, list, dict))]
    assert not nested, f"graph inputs {nested} are containers; compiled graphs take flat inputs"
    if compiler_name == EAGER:
        compilation_counter.num_eager_pieces += 1
        return gm, None
    assert compiler_name == INDUCTOR, f"unknown compiler {compiler_name!r}"
    from torch._inductor import standalone_compile

    compilation_counter.num_inductor_compiles += 1
    inputs = _dynamo_fake_inputs(gm, example_inputs)
    artifact = standalone_compile(gm, inputs, dynamic_shapes=_dynamic_shapes_source(gm))
    return artifact, artifact


def _dynamic_shapes_source(gm: fx.GraphModule) -> str:
    """Where ``standalone_compile`` takes ``gm``'s fake mode from: ``"from_graph"`` (the fake
    mode of the tensors Dynamo recorded on its outputs, the one its inputs' fake values belong to)
    when an output has one, else ``"from_tracing_context"``.

    The tracing context holds the fresh fake mode Dynamo gives backends, sharing Dynamo's
    ShapeEnv; AOTAutograd fakifies the inputs again in it, and a Python float argument (a 0-d
    tensor whose ``item()`` carries a symbolic float) loses that link, so its value is specialized
    and every new value compiles again (plain ``torch.compile`` keeps it symbolic). A graph without
    a recorded fake tensor output (a piece returning only sizes) has no other fake mode to offer.
    """
    (output,) = gm.graph.find_nodes(op="output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    for value in values:
        if isinstance(value, fx.Node) and isinstance(value.meta.get("example_value"), FakeTensor):
            return "from_graph"
    return "from_tracing_context"


def _dynamo_fake_inputs(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any]:
    """The fake tensors Dynamo recorded on ``gm``'s placeholders, in place of the real example inputs.

    Handing Inductor the real tensors makes AOTAutograd fakify them afresh: every dim gets a new
    symbol with no source (parameters included), and a guard Inductor adds on such a symbol (CUDA
    codegen's 32-bit indexing check) makes Dynamo's guard building fail with "sources must not be
    empty". Dynamo's own fake values carry its symbols and sources. Inputs without a recorded fake
    value (pieces of a split graph, already fake) pass through unchanged.
    """
    placeholders = gm.graph.find_nodes(op="placeholder")
    assert len(placeholders) == len(example_inputs), "one example input per placeholder"
    fakes = []
    for node, value in zip(placeholders, example_inputs, strict=True):
        recorded = node.meta.get("example_value")
        is_fake_tensor = isinstance(recorded, torch.Tensor) and isinstance(value, torch.Tensor)
        fakes.append(recorded if is_fake_tensor else value)
    return fakes


def save_artifact(artifact: Any, path: str) -> bool:
    """Save ``artifact`` to ``path`` atomically; a failure to serialize is logged and returns False.

    Serializing a graph with DTensor inputs is known to fail on some torch versions (no
    AOTAutograd artifact to bundle); that must cost a future cache miss, not this run.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".bin")
    os.close(fd)
    try:
        artifact.save(path=tmp, format="binary")
    except RuntimeError as err:
        if isinstance(err, torch.OutOfMemoryError):
            raise
        os.unlink(tmp)
        compilation_counter.num_cache_save_failures += 1
        logger.warning("could not save compiled artifact %s (%s); it will be recompiled next time", path, err)
        return False
    os.replace(tmp, path)
    compilation_counter.num_cache_saves += 1
    return True


def load_artifact(path: str, gm: fx.GraphModule) -> Callable[..., Any] | None:
    """Load the artifact compiled from ``gm`` at ``path``; a missing or unreadable one is
    logged and returns None.

    A loaded artifact always returns a sequence, while a freshly compiled one returns what
    ``gm`` returns; for a graph returning a single value the result is unwrapped to match.
    """
    from torch._inductor import CompiledArtifact
    from torch._inductor.compile_fx import graph_returns_tuple

    try:
        loaded = CompiledArtifact.load(path=path, format="binary")
    except FileNotFoundError:
        logger.warning("cached artifact %s is missing; recompiling", path)
        return None
    except (OSError, EOFError, RuntimeError) as err:
        if isinstance(err, torch.OutOfMemoryError):
            raise
        logger.warning("cached artifact %s could not be loaded (%s); recompiling", path, err)
        return None
    _loaded_from[loaded] = path
    return with_fresh_outputs(loaded, graph_returns_tuple(gm))


def artifact_bytes(artifact: Any) -> bytes:
    """The ``binary`` save format of a compiled artifact, or of one ``load_artifact`` loaded (read
    back from its file). Raises RuntimeError where there is none (as ``CompiledArtifact.save``
    does), also when the file of a loaded artifact is gone."""
    path = _loaded_from.get(artifact)
    if path is None:
        with tempfile.TemporaryDirectory(prefix="magi-artifact-") as tmp:
            path = os.path.join(tmp, "piece.bin")
            artifact.save(path=path, format="binary")
            with open(path, "rb") as handle:
                return handle.read()
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError as err:
        raise RuntimeError(f"the artifact loaded from {path} cannot be saved: the file is gone") from err


def with_fresh_outputs(loaded: Callable[..., Any], returns_tuple: bool) -> Callable[..., Any]:
    """``loaded`` (an artifact loaded from its saved form, which always returns a sequence)
    returning what the freshly compiled artifact returned: for a graph that does not return a
    tuple (``returns_tuple`` False, see ``torch._inductor.compile_fx.graph_returns_tuple``),
    its single value."""
    return loaded if returns_tuple else SingleOutput(loaded)


class SingleOutput:
    """A loaded artifact of a graph that returns a single value, returning that value; the
    artifact stays reachable (``artifact``) so that AOT can save it again."""

    def __init__(self, artifact: Callable[..., Any]) -> None:
        self.artifact = artifact

    def __call__(self, *args: Any) -> Any:
        return self.artifact(*args)[0]
