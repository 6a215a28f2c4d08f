"""CUDA graphs for compiled graphs: ``cudagraph_mode`` ``PIECEWISE`` and ``FULL``.

One compiled Dynamo graph gets one :class:`GraphDispatcher`, built by :func:`wrap_compiled_graph`.

Sizes. A graph may have at most one dynamic size (one symbol in its inputs' shapes). A call of
size ``n`` is padded up to the smallest capture size ``N >= n`` (:func:`padded_size`): every
user input is copied into a static buffer of size ``N`` on its dynamic dim (rows ``n:`` keep
what an earlier call left there), the graph of size ``N`` is replayed and every output whose
dim is the dynamic size is sliced back to ``n`` (:func:`slice_outputs`). Padding is correct
only for graphs whose rows along the dynamic dim are independent (a reduction over that dim
sees the padding rows), the same contract vLLM makes. A size above the largest capture size
runs the compiled code without graphs (logged once per graph). Sizes 0 and 1 are never
captured for a dynamic graph: Dynamo specializes them, so such calls never reach it. A graph
without a dynamic size gets one graph for its one shape.

Capture. The first call captures the largest size, then the call's own padded size; every other
size is captured on the first call that needs it (``capture_all``: the first call captures
every size, largest first, and no later call captures). Each capture follows one warm-up run;
all graphs of one entry (all pieces, all sizes) share one memory pool, which the largest size,
captured first, sizes; graphs are replayed one at a time, never concurrently. Each graph is
recorded on a side stream that waits for the current one (:func:`record_graph`), without the
device synchronization and allocator cache emptying that ``torch.cuda.graph`` does on entry, once
per graph: ``PIECEWISE`` records one graph per piece and size, each piece replayed once after
its capture (the call capturing a size returns that pass's outputs). Capture time and memory (growth
of reserved CUDA memory around the capture) per size are logged at INFO and recorded in
``capture_records`` (totals in ``compilation_counter``).

Addresses. ``PIECEWISE`` captures each compiled piece (:class:`PieceGraphs`) while splitting
ops run eagerly between the graphs. A splitting op's output gets a new address on every call,
so each piece copies such inputs into its own static buffers before a replay; inputs coming
from the entry's arguments or from another piece's graph already have stable addresses. (The
alternative, an out-parameter contract on splitting ops, would spare these copies but constrain
every splitting op; the copies cost one device copy per eager output per call.)

Outputs. A graph keeps its CUDA outputs as aliases that do not own their memory
(:func:`unowned_outputs`), as vLLM does: once a capturing pass is over, the memory its outputs and
intermediates hold goes back to the shared pool, so every later capture (smaller sizes, other
pieces) reuses what the largest size reserved instead of growing the pool by its own outputs. A
replay returns (slices of) those aliases: they are valid until the entry's next call, which
overwrites them or hands their memory to another graph, and they do not keep the memory alive.
Clone what must outlive the call. The call that captures a size returns its capturing pass's own
tensors (they own their memory while the caller holds them).

Reallocation. Every tensor argument not passed as a plain local argument of the entry
(parameters, buffers, globals) is baked into the graphs by address. Each call compares their
``data_ptr``s with those seen at capture; any change (``model.to(...)``,
``load_state_dict(assign=True)``) drops every graph of the entry's graph and captures again, so
a stale address is never replayed.

Graphs apply only to inference graphs (compiled with grad off, or with no input requiring
grad) whose tensor inputs are all on CUDA; a graph that cannot be captured (several dynamic
sizes, a dynamic dim that is not the size itself, a non-contiguous input) runs without graphs,
logged once with the reason. Graphs are never saved to the artifact cache.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import operator
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import fx
from torch._dynamo.source import LocalSource

from magi_compiler.config import CudaGraphMode
from magi_compiler.counters import compilation_counter
from magi_compiler.log import EntryLevelLogger
from magi_compiler.swapped_code import lean_callable

logger = EntryLevelLogger(logging.getLogger(__name__))

STATIC_SIZE = 0
"""The size key of a graph without a dynamic size."""

_LEAVES = (torch.Tensor, int, float, bool, torch.SymInt)


@dataclasses.dataclass(frozen=True)
class CaptureRecord:
    """One size captured: the graph's name, its size (``STATIC_SIZE`` for a static graph), the
    seconds its warm-up and capture took and the bytes of reserved CUDA memory they added."""

    name: str
    mode: str
    size: int
    seconds: float
    bytes: int


capture_records: list[CaptureRecord] = []
"""Every size captured in this process, in capture order."""


def padded_size(n: int, sizes: Sequence[int]) -> int | None:
    """The smallest of ``sizes`` (sorted ascending) that is ``>= n``; None above the largest."""
    position = bisect.bisect_left(sizes, n)
    return sizes[position] if position < len(sizes) else None


def padding_table(sizes: Sequence[int]) -> list[int]:
    """``table[n]`` is ``padded_size(n, sizes)`` for every ``0 <= n <= max(sizes)``."""
    return [padded_size(n, sizes) for n in range(sizes[-1] + 1)]  # type: ignore[misc]


def slice_outputs(outputs: Sequence[Any], dims: Sequence[int | None], n: int) -> list[Any]:
    """Each output narrowed to ``n`` along its dim in ``dims`` (None: returned as it is)."""
    return [out if dim is None else out.narrow(dim, 0, n) for out, dim in zip(outputs, dims, strict=True)]


_DATA_PTR = torch.Tensor.data_ptr


def static_addresses(args: Sequence[Any], indices: Sequence[int]) -> tuple[int, ...]:
    """The ``data_ptr`` of each argument at ``indices``: graphs captured with one tuple may be
    replayed only while a call's tuple is equal to it."""
    return tuple(map(_DATA_PTR, [args[i] for i in indices]))


@dataclasses.dataclass(frozen=True)
class GraphPlan:
    """How the arguments and outputs of one Dynamo graph relate to its dynamic size.

    ``size_arg``: the argument index holding the size as an int, or ``(index, dim)`` of a
    tensor argument whose dim is the size; None for a static graph. ``user_inputs`` maps the
    index of each copied tensor argument to its dynamic dim (or None). ``static_inputs`` are
    the indices of tensor arguments captured by address. ``size_ints`` are the indices of int
    arguments equal to the size. ``output_dims`` gives each output's dynamic dim (or None).
    """

    size_arg: int | tuple[int, int] | None
    user_inputs: dict[int, int | None]
    static_inputs: tuple[int, ...]
    size_ints: tuple[int, ...]
    output_dims: tuple[int | None, ...]

    def size_of(self, args: Sequence[Any]) -> int:
        if self.size_arg is None:
            return STATIC_SIZE
        if isinstance(self.size_arg, int):
            return args[self.size_arg]
        index, dim = self.size_arg
        return args[index].shape[dim]


def _expr(value: Any) -> Any:
    return value.node.expr if isinstance(value, torch.SymInt) else None


def plan_graph(gm: fx.GraphModule) -> GraphPlan | str:
    """The plan of Dynamo graph ``gm``, or the reason it cannot be captured."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    symbols: set[Any] = set()
    for node in placeholders:
        value = node.meta.get("example_value")
        sizes = value.shape if isinstance(value, torch.Tensor) else [value]
        for size in sizes:
            if isinstance(size, torch.SymInt):
                symbols |= size.node.expr.free_symbols
            elif not isinstance(size, int):
                return f"input {node.name} is a {type(value).__name__}, not a tensor or an int size"
    if len(symbols) > 1:
        return f"it has {len(symbols)} dynamic sizes {sorted(map(str, symbols))}; padding needs exactly one"
    symbol = next(iter(symbols), None)
    size_arg: int | tuple[int, int] | None = None
    user_inputs: dict[int, int | None] = {}
    static_inputs: list[int] = []
    size_ints: list[int] = []
    for index, node in enumerate(placeholders):
        value = node.meta["example_value"]
        if not isinstance(value, torch.Tensor):
            if symbol is None or _expr(value) != symbol:
                return f"the input {node.name}={value!r} is not the dynamic size itself"
            size_ints.append(index)
            size_arg = index if not isinstance(size_arg, int) else size_arg
            continue
        dims = [d for d, size in enumerate(value.shape) if isinstance(size, torch.SymInt)]
        if any(_expr(value.shape[d]) != symbol for d in dims):
            return f"a dim of input {node.name} is an expression of the dynamic size, not the size itself"
        if len(dims) > 1:
            return f"input {node.name} has the dynamic size on more than one dim"
        grapharg = node.meta.get("grapharg")
        is_local = grapharg is not None and isinstance(grapharg.source, LocalSource)
        if dims or is_local:
            if not _is_contiguous(value):
                return f"input {node.name} is not contiguous"
            user_inputs[index] = dims[0] if dims else None
            if dims and size_arg is None:
                size_arg = (index, dims[0])
        else:
            static_inputs.append(index)
    output_dims: list[int | None] = []
    for out in gm.graph.output_node().args[0]:
        value = out.meta.get("example_value") if isinstance(out, fx.Node) else out
        if not isinstance(value, torch.Tensor):
            if value is None:
                output_dims.append(None)
                continue
            return f"an output is a {type(value).__name__}, not a tensor"
        dims = [d for d, size in enumerate(value.shape) if isinstance(size, torch.SymInt)]
        if any(_expr(value.shape[d]) != symbol for d in dims) or len(dims) > 1:
            return "an output's dynamic dim is not the dynamic size itself (it could not be sliced back)"
        output_dims.append(dims[0] if dims else None)
    return GraphPlan(size_arg, user_inputs, tuple(static_inputs), tuple(size_ints), tuple(output_dims))


def _is_contiguous(value: torch.Tensor) -> bool:
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    expected = 1
    for size, stride in reversed(list(zip(value.shape, value.stride(), strict=True))):
        if not guard_or_false(size == 1) and not guard_or_false(stride == expected):
            return False
        expected = expected * size
    return True


def unstable_piece_args(split_gm: fx.GraphModule, splitting_pieces: set[str]) -> dict[str, tuple[int, ...]]:
    """For each compiled piece of ``split_gm``, the positions of its arguments that do not have a
    stable address: those not coming from the graph's inputs or from a compiled piece."""

    def origin(node: fx.Node) -> fx.Node:
        while node.op == "call_function" and node.target is operator.getitem:
            node = node.args[0]
        return node

    unstable: dict[str, tuple[int, ...]] = {}
    for node in split_gm.graph.find_nodes(op="call_module"):
        if node.target in splitting_pieces:
            continue
        assert not node.kwargs, f"piece {node.target} is called with keyword arguments"
        positions = []
        for position, arg in enumerate(node.args):
            if not isinstance(arg, fx.Node):
                continue
            source = origin(arg)
            stable = source.op == "placeholder" or (
                source.op == "call_module" and source.target not in splitting_pieces
            )
            if not stable:
                positions.append(position)
        unstable[str(node.target)] = tuple(positions)
    return unstable


def weak_alias(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor of ``tensor``'s dtype, device, size, strides and storage offset over the same
    memory that does not own that memory: freeing ``tensor`` (and every other owner) returns the
    memory to its allocator, or graph pool, while the alias still points at it."""
    storage = tensor.untyped_storage()
    unowned = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), tensor.device, storage.nbytes())
    empty = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    return empty.set_(unowned, tensor.storage_offset(), tensor.shape, tensor.stride())


def _unowned(value: Any) -> Any:
    return weak_alias(value) if isinstance(value, torch.Tensor) and value.is_cuda else value


def unowned_outputs(outputs: Any) -> Any:
    """What a graph keeps of its outputs: every CUDA tensor in ``outputs`` as its
    :func:`weak_alias`; anything else (a CPU tensor the capture computed on the host, a
    non-tensor) as it is, since only the graph's CUDA memory is rewritten by a replay.

    A plain list or tuple of leaves, what a compiled piece returns, is mapped directly;
    anything nested goes through pytree, which costs more per capture."""
    if type(outputs) in (list, tuple) and all(value is None or isinstance(value, _LEAVES) for value in outputs):
        return type(outputs)(_unowned(value) for value in outputs)
    return pytree.tree_map_only(torch.Tensor, _unowned, outputs)


def reserved_bytes() -> int:
    """CUDA memory reserved by this process's caching allocator on the current device, as
    ``torch.cuda.memory_reserved()`` reports it, without flattening and sorting every statistic
    of the allocator (a millisecond per call on a big host, twice per capture)."""
    stats = torch.cuda.memory_stats_as_nested_dict()
    return stats.get("reserved_bytes", {}).get("all", {}).get("current", 0)


def record_graph(
    pool: Any, stream: torch.cuda.Stream, fn: Callable[..., Any], args: Sequence[Any]
) -> tuple[torch.cuda.CUDAGraph, Any]:
    """A graph of ``fn(*args)`` recorded in memory pool ``pool`` on the side stream ``stream``,
    and what the call returned (tensors the graph's replays overwrite; recording runs nothing).

    The work already queued on the current stream is ordered before the recording and the
    recording before later work, without synchronizing the device; the allocator's cache is
    kept, so memory it holds is not returned to the device for the graph."""
    graph = torch.cuda.CUDAGraph()
    current = torch.cuda.current_stream()
    stream.wait_stream(current)
    torch.cuda.set_stream(stream)
    try:
        graph.capture_begin(pool)
        try:
            outputs = fn(*args)
        finally:
            graph.capture_end()
    finally:
        torch.cuda.set_stream(current)
    current.wait_stream(stream)
    return graph, outputs


class CaptureSession:
    """State shared by one graph's dispatcher and its pieces: the size being replayed or
    captured (None: run the compiled code without graphs), the memory pool and the side stream
    graphs are recorded on (both made by the dispatcher's first capture)."""

    def __init__(self) -> None:
        self.size: int | None = None
        self.capturing = False
        self.pool: Any = None
        self.stream: torch.cuda.Stream | None = None


@dataclasses.dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    inputs: list[Any]
    outputs: Any


class PieceGraphs:
    """One compiled piece under ``PIECEWISE``: a graph per size, captured when the session
    captures; arguments at ``unstable`` positions are copied into static buffers before a replay.

    A contiguous unstable argument's buffer is a prefix of one flat buffer per position, made at
    the piece's first capture (the largest size: the dispatcher captures it first) and shared by
    every size that fits in it; graphs are replayed one at a time, so sizes never need their
    copies at once."""

    def __init__(self, compiled: Callable[..., Any], unstable: Sequence[int], session: CaptureSession) -> None:
        self.compiled = compiled
        self.unstable = tuple(unstable)
        self.session = session
        self.graphs: dict[int, _Captured] = {}
        self.flat: dict[int, torch.Tensor] = {}

    def __call__(self, *args: Any) -> Any:
        size = self.session.size
        if size is None:
            return self.compiled(*args)
        captured = self.graphs.get(size)
        if captured is None:
            assert self.session.capturing, f"no graph of size {size} outside a capture"
            return self._capture(size, args)
        for position in self.unstable:
            captured.inputs[position].copy_(args[position])
        captured.graph.replay()
        return captured.outputs

    def _capture(self, size: int, args: Sequence[Any]) -> Any:
        inputs = list(args)
        for position in self.unstable:
            inputs[position] = self._static_copy(position, args[position])
        self.compiled(*inputs)  # warm-up: lazy initialization stays out of the graph
        assert self.session.stream is not None, "a piece captures only inside its dispatcher's capture"
        graph, outputs = record_graph(self.session.pool, self.session.stream, self.compiled, inputs)
        graph.replay()  # capturing runs nothing: the eager ops after this piece need real values
        self.graphs[size] = _Captured(graph, inputs, unowned_outputs(outputs))
        return outputs

    def _static_copy(self, position: int, value: torch.Tensor) -> torch.Tensor:
        """A static buffer holding ``value``: a prefix of the position's flat buffer when
        ``value`` is contiguous, fits and gets the same strides, else a clone of its own."""
        if not value.is_contiguous():
            return value.clone()
        flat = self.flat.get(position)
        if flat is None:
            flat = self.flat[position] = torch.empty(value.numel(), dtype=value.dtype, device=value.device)
        if flat.dtype != value.dtype or flat.numel() < value.numel():
            return value.clone()
        buffer = flat[: value.numel()].view(value.shape)
        if buffer.stride() != value.stride():  # a size-1 dim with another stride: keep the layout
            return value.clone()
        buffer.copy_(value)
        return buffer

    def reset(self) -> None:
        for captured in self.graphs.values():
            captured.graph.reset()
        self.graphs.clear()
        self.flat.clear()


class GraphDispatcher:
    """One compiled Dynamo graph under CUDA graphs: pads, replays, slices (see the module doc).

    ``runner`` runs the graph: the split module whose compiled pieces are ``pieces``
    (``PIECEWISE``), or the compiled graph itself (``FULL``).
    """

    def __init__(
        self,
        runner: Callable[..., Any],
        plan: GraphPlan,
        mode: CudaGraphMode,
        capture_sizes: Sequence[int],
        session: CaptureSession,
        pieces: Sequence[PieceGraphs],
        name: str,
        capture_all: bool = False,
    ) -> None:
        assert mode is not CudaGraphMode.NONE
        self.runner = runner
        self.capture_all = capture_all
        self.plan = plan
        self.mode = mode
        self.session = session
        self.pieces = list(pieces)
        self.name = name
        if plan.size_arg is None:
            self.sizes = [STATIC_SIZE]
        else:
            self.sizes = [size for size in sorted(capture_sizes) if size >= 2]
            assert self.sizes, "no capture size >= 2"
        self.table = padding_table(self.sizes)
        self.max_size = self.sizes[-1]
        self.static_args: dict[int, list[Any]] = {}
        self.shared_buffers: dict[int, torch.Tensor] = {}
        self.full_graphs: dict[int, _Captured] = {}
        self.captured_ptrs: tuple[int, ...] | None = None
        self.logged_above_max = False

    def __call__(self, *args: Any) -> Any:
        n = self.plan.size_of(args)
        if n > self.max_size:
            compilation_counter.num_cudagraph_uncaptured_calls += 1
            if not self.logged_above_max:
                self.logged_above_max = True
                logger.info(
                    "%s: size %d is above the largest CUDA graph capture size %d; running without graphs",
                    self.name,
                    n,
                    self.max_size,
                )
            return self.runner(*args)
        fresh: dict[int, Any] = {}
        if self.captured_ptrs is None:
            fresh = self.begin(args)
        elif static_addresses(args, self.plan.static_inputs) != self.captured_ptrs:
            compilation_counter.num_cudagraph_recaptures += 1
            logger.warning(
                "%s: a parameter or buffer captured in the CUDA graphs was reallocated "
                "(model.to(...), load_state_dict(assign=True)?); capturing them again",
                self.name,
            )
            self.reset()
            fresh = self.begin(args)
        size = self.table[n]
        static_args = self.static_args.get(size)
        outputs = fresh.get(size)
        if static_args is None:
            static_args, outputs = self.capture_size(size, args)
        if outputs is None:
            for index, dim in self.plan.user_inputs.items():
                target = static_args[index]
                if dim is not None and n != size:
                    target = target.narrow(dim, 0, n)
                target.copy_(args[index])
            outputs = self._replay(size, static_args)
        compilation_counter.num_cudagraph_replays += 1
        if n == size:
            return outputs
        return type(outputs)(slice_outputs(outputs, self.plan.output_dims, n))

    def _replay(self, size: int, static_args: list[Any]) -> Any:
        if self.mode is CudaGraphMode.FULL:
            captured = self.full_graphs[size]
            captured.graph.replay()
            return captured.outputs
        self.session.size = size
        try:
            return self.runner(*static_args)
        finally:
            self.session.size = None

    def reset(self) -> None:
        """Drop every graph and static buffer of this graph."""
        for captured in self.full_graphs.values():
            captured.graph.reset()
        self.full_graphs.clear()
        for piece in self.pieces:
            piece.reset()
        self.static_args.clear()
        self.shared_buffers.clear()
        self.captured_ptrs = None
        self.session.pool = None

    def begin(self, args: Sequence[Any]) -> dict[int, Any]:
        """Record the captured addresses, make the pool and the shared static buffers, and
        capture the largest size (every size, largest first, with ``capture_all``); returns
        {the last size captured: its capturing pass's outputs, or None (``capture_size``)}: an
        earlier size's may share buffers the later captures overwrote.

        Running out of CUDA memory here drops what was made and raises ``OutOfMemoryError``
        naming the size and ``cudagraph_capture_sizes``: the largest size is the likely cause."""
        self.captured_ptrs = static_addresses(args, self.plan.static_inputs)
        self.session.pool = torch.cuda.graph_pool_handle()
        if self.session.stream is None:
            self.session.stream = torch.cuda.Stream()
        try:
            for index, dim in self.plan.user_inputs.items():
                value = args[index]
                if dim is None:
                    self.shared_buffers[index] = torch.empty_like(value, memory_format=torch.contiguous_format)
                elif dim == 0:
                    self.shared_buffers[index] = value.new_zeros((self.max_size, *value.shape[1:]))
            for size in reversed(self.sizes) if self.capture_all else [self.max_size]:
                _, outputs = self.capture_size(size, args)
        except torch.OutOfMemoryError as error:
            self.reset()
            raise torch.OutOfMemoryError(
                f"{self.name}: out of CUDA memory capturing CUDA graphs of the largest capture size "
                f"{self.max_size} (the first call captures it): give this model smaller "
                f"cudagraph_capture_sizes ({error})"
            ) from error
        return {size: outputs}

    def capture_size(self, size: int, args: Sequence[Any]) -> tuple[list[Any], Any]:
        """Capture ``size`` with static buffers filled from the call's ``args``; returns them and,
        under ``PIECEWISE``, the capturing run's outputs (every piece replayed after its capture,
        so they hold this call's values; None under ``FULL``, whose recording runs nothing)."""
        n = self.plan.size_of(args)
        static_args = list(args)
        for index in self.plan.size_ints:
            static_args[index] = size
        for index, dim in self.plan.user_inputs.items():
            value = args[index]
            if dim is None:
                buffer = self.shared_buffers[index]
            elif dim == 0:
                buffer = self.shared_buffers[index][:size]
            else:
                shape = list(value.shape)
                shape[dim] = size
                buffer = value.new_zeros(shape)
            rows = min(n, size) if dim is not None else None
            target = buffer if rows is None else buffer.narrow(dim, 0, rows)
            target.copy_(value if rows is None else value.narrow(dim, 0, rows))
            static_args[index] = buffer
        self.static_args[size] = static_args
        return static_args, self._capture(size, static_args)

    def _capture(self, size: int, static_args: list[Any]) -> Any:
        torch.cuda.synchronize()
        reserved = reserved_bytes()
        start = time.perf_counter()
        outputs = None
        if self.mode is CudaGraphMode.FULL:
            self.runner(*static_args)  # warm-up
            assert self.session.stream is not None
            graph, recorded = record_graph(self.session.pool, self.session.stream, self.runner, static_args)
            self.full_graphs[size] = _Captured(graph, static_args, unowned_outputs(recorded))
        else:
            self.session.size = size
            self.session.capturing = True
            try:
                outputs = self.runner(*static_args)
            finally:
                self.session.size = None
                self.session.capturing = False
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        grown = reserved_bytes() - reserved
        compilation_counter.num_cudagraph_captures += 1
        compilation_counter.cudagraph_capture_us += round(seconds * 1e6)
        compilation_counter.cudagraph_capture_bytes += grown
        capture_records.append(CaptureRecord(self.name, self.mode.name, size, seconds, grown))
        logger.info(
            "%s: captured %s CUDA graph(s) of size %s in %.3f s; reserved CUDA memory grew by %.1f MiB",
            self.name,
            self.mode.name,
            "static" if size == STATIC_SIZE else size,
            seconds,
            grown / 2**20,
        )
        return outputs


def cudagraph_skip_reason(example_inputs: Sequence[Any], aot: bool) -> str | None:
    """Why CUDA graphs do not apply to a graph with these (fake) inputs, or None if they do."""
    if aot:
        return "AOT entries are saved whole and do not carry CUDA graphs"
    if not torch.cuda.is_available():
        return "CUDA is not available"
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    if not tensors or any(t.device.type != "cuda" for t in tensors):
        return "the graph's inputs are not all on CUDA"
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return "it was compiled with grad enabled for inputs that require grad (a training graph)"
    return None


def wrap_compiled_graph(
    plan: GraphPlan | str,
    compiled: Callable[..., Any],
    mode: CudaGraphMode,
    capture_sizes: Sequence[int],
    name: str,
    split: tuple[fx.GraphModule, set[str]] | None,
    capture_all: bool = False,
) -> Callable[..., Any]:
    """``compiled`` under ``mode``; ``plan`` is :func:`plan_graph` of the Dynamo graph it was
    compiled from (a string: the reason it cannot be captured).

    ``split`` is the split module and the names of its splitting-op pieces when the graph
    was split (``compiled`` is then that split module). Returns ``compiled`` itself when the
    graph cannot be captured (logged with the reason). The dispatcher runs ``compiled`` through
    its lean twin (:func:`magi_compiler.swapped_code.lean_callable`), so it must be called with
    Dynamo's frame evaluation off, as the backend's output always is.
    """
    if isinstance(plan, str):
        logger.warning("%s: cudagraph_mode=%s does not apply to this graph: %s", name, mode.name, plan)
        return compiled
    session = CaptureSession()
    pieces: list[PieceGraphs] = []
    if mode is CudaGraphMode.PIECEWISE and split is None:
        piece = PieceGraphs(lean_callable(compiled), (), session)
        pieces.append(piece)
        runner: Callable[..., Any] = piece
    elif mode is CudaGraphMode.PIECEWISE:
        split_gm, splitting_pieces = split
        for target, unstable in unstable_piece_args(split_gm, splitting_pieces).items():
            piece = PieceGraphs(lean_callable(split_gm.__dict__[target]), unstable, session)
            split_gm.__dict__[target] = piece
            pieces.append(piece)
        runner = lean_callable(split_gm)
    else:
        assert split is None, "FULL mode with a split graph (CompileConfig rejects it)"
        runner = lean_callable(compiled)
    return GraphDispatcher(runner, plan, mode, capture_sizes, session, pieces, name, capture_all)
