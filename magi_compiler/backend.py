"""``MagiBackend``: the callable handed to Dynamo.

For each Dynamo graph it runs the full-graph passes, splits the graph at
``config.splitting_ops`` (unless ``disable_graph_split``), compiles every non-splitting
piece with Inductor (``backend="inductor"``) or keeps it as it is (``backend="eager"``),
and returns a callable. Compiled pieces are looked up in and saved to the persistent
cache (``magi_compiler.cache``).

One backend object serves one compile state. Its cache directory is computed on its first
call and reused by every later call, in particular by the second call that Dynamo's
restart analysis (``RestartAnalysis``) makes for the same graph: the factors that feed the
key (traced files, Inductor config) may change in between. Graphs are numbered in the order
they compile; the index records how many restarts each took, and a warm process replays
that many restarts (a cheap AOTAutograd trace raises the same restart) before it loads the
graph's artifacts, because the first trace's graph differs from the one that was saved.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx
from torch._dynamo.exc import RestartAnalysis

from magi_compiler.cache import ArtifactIndex, ArtifactKey, model_cache_dir
from magi_compiler.cache_key import cache_key, cache_key_factors
from magi_compiler.compiler_interface import INDUCTOR, compile_piece, load_artifact, save_artifact
from magi_compiler.config import CompileConfig, CudaGraphMode
from magi_compiler.counters import compilation_counter
from magi_compiler.cudagraph import cudagraph_skip_reason, plan_graph, wrap_compiled_graph
from magi_compiler.dynamic_dims import symbolic_local_dims
from magi_compiler.log import EntryLevelLogger
from magi_compiler.passes import build_full_graph_passes, inductor_config_patch
from magi_compiler.splitting import Piece, split_graph

logger = EntryLevelLogger(logging.getLogger(__name__))

GENERAL_SHAPE = "general"
ARTIFACT_SUBDIR = "artifacts"


class CacheMissError(RuntimeError):
    """Raised on a cache miss when ``assert_cache_hit`` is set."""


def model_name(model_index: int, model_tag: str | None) -> str:
    return f"model_{model_index}" + (f"_{model_tag}" if model_tag else "")


class MagiBackend:
    """The Dynamo backend of one compile state of the model ``model_index`` / ``model_tag``."""

    def __init__(self, config: CompileConfig, model_index: int, model_tag: str | None) -> None:
        self.config = config
        self.model_index = model_index
        self.model_tag = model_tag
        self.cache_dir: str | None = None
        self.key_factors: dict[str, str] | None = None
        self.graphs_compiled = 0
        self.restarts_of_current_graph = 0
        # per local argument of the traced frame, the dims symbolic in the last graph traced
        self.symbolic_dims: dict[str, frozenset[int]] = {}
        self.cudagraph_skip_logged = False

    @property
    def model_name(self) -> str:
        return model_name(self.model_index, self.model_tag)

    @property
    def compiler_name(self) -> str:
        return self.config.backend

    def __call__(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        compilation_counter.num_graphs_seen += 1
        self.symbolic_dims = symbolic_local_dims(gm)
        index = None
        if self.config.disable_cache:
            logger.info("%s: disable_cache is set; compiling without the artifact cache", self.model_name)
        else:
            index = ArtifactIndex(self._resolve_cache_dir(example_inputs))
        graph = self.graphs_compiled
        try:
            if index is not None and self.restarts_of_current_graph < index.restart_count(graph):
                self._replay_restart(gm, example_inputs, graph)
            compiled = self._compile_graph(gm, example_inputs, graph, index)
        except RestartAnalysis:
            self.restarts_of_current_graph += 1
            compilation_counter.num_restarts += 1
            logger.info(
                "%s: graph %d restarted Dynamo's analysis (restart %d)",
                self.model_name,
                graph,
                self.restarts_of_current_graph,
            )
            raise
        self.graphs_compiled += 1
        self.restarts_of_current_graph = 0
        compilation_counter.num_backend_compilations += 1
        return compiled

    def _resolve_cache_dir(self, example_inputs: Sequence[Any]) -> str:
        if self.cache_dir is None:
            traced = torch._guards.TracingContext.get_traced_code() or []
            self.key_factors = cache_key_factors(self.config, [code.co_filename for code in traced], example_inputs)
            key = cache_key(self.key_factors)
            root = self.config.resolved_cache_root_dir
            self.cache_dir = model_cache_dir(root, self.model_index, self.model_tag, key)
            logger.info("%s: cache directory %s (factors %s)", self.model_name, self.cache_dir, self.key_factors)
        return self.cache_dir

    def _replay_restart(self, gm: fx.GraphModule, example_inputs: Sequence[Any], graph: int) -> None:
        """Trace ``gm`` with AOTAutograd only, which raises the restart the cold run saw."""
        from functorch.compile import make_boxed_func
        from torch._functorch.aot_autograd import aot_module_simplified

        try:
            aot_module_simplified(gm, list(example_inputs), fw_compiler=lambda g, _: make_boxed_func(g.forward))
        except RestartAnalysis:
            compilation_counter.num_restarts_replayed += 1
            raise
        logger.warning(
            "%s: the index records a restart for graph %d, but replaying it did not restart; "
            "its cached artifacts may not match and will be used only if they load",
            self.model_name,
            graph,
        )

    def _compile_graph(
        self, gm: fx.GraphModule, example_inputs: Sequence[Any], graph: int, index: ArtifactIndex | None
    ) -> Callable[..., Any]:
        will_split = bool(self.config.splitting_ops) and not self.config.disable_graph_split
        if self.config.splitting_ops and self.config.disable_graph_split:
            logger.info(
                "%s: disable_graph_split is set; not splitting at %s", self.model_name, self.config.splitting_ops
            )
        code_hash = hashlib.sha256((gm.code + repr(_ambient_codegen_state())).encode()).hexdigest()[:16]
        slot = graph
        if index is not None and index.graph_code_hash(graph) not in (None, code_hash):
            found = index.graph_with_code(code_hash)
            slot = found if found is not None else index.free_graph()
            logger.info(
                "%s: graph %d is cached as graph %d (number %d holds another graph: the model was called "
                "in another order, or under another grad or autocast mode)",
                self.model_name,
                graph,
                slot,
                graph,
            )
        cudagraph_mode = self._cudagraph_mode(example_inputs)
        # planned before the passes, which may drop the output nodes' example values
        cudagraph_plan = plan_graph(gm) if cudagraph_mode is not CudaGraphMode.NONE else None
        for graph_pass in build_full_graph_passes(self.config, self.model_tag, will_split):
            graph_pass(gm)
        new_artifacts: dict[ArtifactKey, Any] = {}

        def compile_one(piece_index: int, module: fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
            compilation_counter.num_piecewise_graphs_seen += 1
            return self._compile_or_load(slot, piece_index, module, inputs, index, new_artifacts)

        if will_split:
            split_gm, pieces = split_graph(gm, self.config.splitting_ops)
            compilation_counter.num_splitting_ops_seen += sum(p.is_splitting_op for p in pieces)
            _PiecewiseCompiler(split_gm, pieces, compile_one).run_fake(example_inputs)
            compiled: Callable[..., Any] = split_gm
            splitting = {p.name for p in pieces if p.is_splitting_op}
        else:
            with torch._inductor.config.patch(inductor_config_patch(self.config, will_split)):
                compiled = compile_one(0, gm, example_inputs)
        if index is not None and (new_artifacts or index.graph_code_hash(slot) != code_hash):
            self._save(index, slot, code_hash, new_artifacts)
        if cudagraph_plan is not None:
            split = (split_gm, splitting) if will_split else None
            name = f"{self.model_name} graph {graph}"
            compiled = wrap_compiled_graph(
                cudagraph_plan,
                compiled,
                cudagraph_mode,
                self.config.cudagraph_capture_sizes,
                name,
                split,
                self.config.cudagraph_capture_all,
            )
        return compiled

    def _cudagraph_mode(self, example_inputs: Sequence[Any]) -> CudaGraphMode:
        """The configured mode, or NONE (logged once per backend) where CUDA graphs do not apply."""
        mode = self.config.cudagraph_mode
        if mode is CudaGraphMode.NONE:
            return mode
        reason = cudagraph_skip_reason(example_inputs, self.config.aot)
        if reason is None:
            return mode
        if not self.cudagraph_skip_logged:
            self.cudagraph_skip_logged = True
            logger.warning(
                "%s: cudagraph_mode=%s does not apply (%s); running as NONE", self.model_name, mode.name, reason
            )
        return CudaGraphMode.NONE

    def _compile_or_load(
        self,
        graph: int,
        piece_index: int,
        module: fx.GraphModule,
        inputs: Sequence[Any],
        index: ArtifactIndex | None,
        new_artifacts: dict[ArtifactKey, Any],
    ) -> Callable[..., Any]:
        """``graph``: the number the graph is cached under (its own code's); ``index`` is the
        cache directory's index (None without a cache)."""
        key = ArtifactKey(GENERAL_SHAPE, piece_index, self.compiler_name)
        cacheable = index is not None and self.compiler_name == INDUCTOR
        if cacheable:
            assert index is not None
            path = index.lookup(graph, key)
            loaded = load_artifact(path, module) if path is not None else None
            if loaded is not None:
                compilation_counter.num_cache_hits += 1
                logger.debug("%s: cache hit for graph %d piece %d", self.model_name, graph, piece_index)
                return loaded
            compilation_counter.num_cache_misses += 1
            if self.config.assert_cache_hit:
                raise CacheMissError(
                    f"MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss for {self.model_name} in {self.cache_dir}: "
                    f"graph index {graph}, piece {piece_index} ({self.compiler_name}, shape {GENERAL_SHAPE}) "
                    "is not in the cache"
                )
        compiled, artifact = compile_piece(module, inputs, self.compiler_name)
        if cacheable and artifact is not None:
            new_artifacts[key] = artifact
        return compiled

    def _save(self, index: ArtifactIndex, graph: int, code_hash: str, artifacts: dict[ArtifactKey, Any]) -> None:
        saved: dict[ArtifactKey, str] = {}
        for key, artifact in artifacts.items():
            name = f"graph{graph}_{code_hash}_piece{key.graph_index}_{key.compiler_name}.bin"
            relative = os.path.join(ARTIFACT_SUBDIR, name)
            if save_artifact(artifact, os.path.join(index.cache_dir, relative)):
                saved[key] = relative
        index.record(graph, self.restarts_of_current_graph, code_hash, saved)


def _ambient_codegen_state() -> tuple:
    """Global state that changes what AOTAutograd and Inductor generate for one FX graph:
    grad mode (training vs inference graph) and autocast per device type."""
    autocast = tuple(
        (device, torch.is_autocast_enabled(device), str(torch.get_autocast_dtype(device))) for device in ("cpu", "cuda")
    )
    return (torch.is_grad_enabled(), autocast)


class _PiecewiseCompiler(fx.Interpreter):
    """Runs the split module on fake inputs, compiling each non-splitting piece on the way
    (it needs the piece's own fake inputs) and swapping it into the split module."""

    def __init__(
        self,
        split_gm: fx.GraphModule,
        pieces: list[Piece],
        compile_one: Callable[[int, fx.GraphModule, Sequence[Any]], Callable[..., Any]],
    ) -> None:
        super().__init__(split_gm)
        self.piece_numbers = {piece.name: number for number, piece in enumerate(pieces) if not piece.is_splitting_op}
        self.compile_one = compile_one

    def run_fake(self, example_inputs: Sequence[Any]) -> None:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch.fx.experimental.proxy_tensor import enable_python_dispatcher

        fake_mode = torch._guards.detect_fake_mode(example_inputs)
        assert fake_mode is not None, "MagiBackend must be called by Dynamo with fake inputs in context"
        fake_args = [
            fake_mode.from_tensor(t) if isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor) else t
            for t in example_inputs
        ]
        with fake_mode, enable_python_dispatcher():
            self.run(*fake_args)

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        output = super().call_module(target, args, kwargs)
        if target in self.piece_numbers:
            submodule = self.fetch_attr(target)
            self.module.__dict__[target] = self.compile_one(self.piece_numbers[target], submodule, args)
        return output
