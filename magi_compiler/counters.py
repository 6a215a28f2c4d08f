"""Process-wide compilation counters, for tests and diagnostics.

Granularity: ``num_graphs_seen`` counts backend calls (a restart makes a second one);
``num_backend_compilations`` counts backend calls that returned a callable;
``num_piecewise_graphs_seen`` counts pieces after splitting; ``num_inductor_compiles``,
``num_cache_hits`` and ``num_cache_misses`` count pieces. CUDA graphs (:mod:`magi_compiler.cudagraph`):
``num_cudagraph_captures`` counts captured sizes (all pieces of a graph at one size count
once) and ``cudagraph_capture_us`` / ``cudagraph_capture_bytes`` their total time and growth of
reserved CUDA memory (per size: ``magi_compiler.cudagraph.capture_records``);
``num_cudagraph_replays`` counts calls served by graphs, ``num_cudagraph_uncaptured_calls``
calls above the largest capture size, ``num_cudagraph_recaptures`` re-captures after a
reallocated parameter or buffer. ``num_direct_call_paths`` counts the Inductor pieces whose swapped
call was made to run Inductor's generated code directly (:mod:`magi_compiler.inference_call`; a
piece relinked again counts again).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator


@dataclasses.dataclass
class CompilationCounter:
    num_models_seen: int = 0
    num_graphs_seen: int = 0
    num_backend_compilations: int = 0
    num_piecewise_graphs_seen: int = 0
    num_splitting_ops_seen: int = 0
    num_inductor_compiles: int = 0
    num_eager_pieces: int = 0
    num_cache_hits: int = 0
    num_cache_misses: int = 0
    num_cache_saves: int = 0
    num_cache_save_failures: int = 0
    num_restarts: int = 0
    num_restarts_replayed: int = 0
    num_bytecode_captures: int = 0
    num_swapped_calls: int = 0
    num_direct_call_paths: int = 0
    num_cudagraph_captures: int = 0
    cudagraph_capture_us: int = 0
    cudagraph_capture_bytes: int = 0
    num_cudagraph_replays: int = 0
    num_cudagraph_uncaptured_calls: int = 0
    num_cudagraph_recaptures: int = 0

    def snapshot(self) -> CompilationCounter:
        return dataclasses.replace(self)

    @contextlib.contextmanager
    def expect(self, **deltas: int) -> Iterator[None]:
        """Assert that the named counters grow by exactly the given amounts inside the block."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(deltas) - known)
        if unknown:
            raise ValueError(f"unknown counter(s) {unknown}; known: {sorted(known)}")
        before = self.snapshot()
        yield
        wrong = {
            name: (expected, getattr(self, name) - getattr(before, name))
            for name, expected in deltas.items()
            if getattr(self, name) - getattr(before, name) != expected
        }
        if wrong:
            details = ", ".join(f"{name}: expected +{exp}, got +{got}" for name, (exp, got) in wrong.items())
            raise AssertionError(f"compilation_counter mismatch: {details}")


compilation_counter = CompilationCounter()
