"""Full-graph passes the backend runs on Dynamo's FX graph before splitting.

A pass is a callable taking the ``fx.GraphModule`` and rewriting it in place.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import fx

from magi_compiler.config import CompileConfig
from magi_compiler.passes.fsdp_overlap import fsdp_inductor_config_patch, fsdp_overlap_passes
from magi_compiler.passes.noop_elimination import eliminate_noops_and_dead_code

GraphPass = Callable[[fx.GraphModule], None]


def build_full_graph_passes(config: CompileConfig, model_tag: str | None, will_split: bool) -> list[GraphPass]:
    """The passes to run, in order, for a model compiled with ``config``.

    ``will_split`` says whether the graph is split at ``splitting_ops`` afterwards.
    """
    return [eliminate_noops_and_dead_code, *fsdp_overlap_passes(config, model_tag, will_split)]


def inductor_config_patch(config: CompileConfig, will_split: bool) -> dict[str, object]:
    """Inductor options to apply while compiling the graph the passes rewrote (a function of
    ``config``, which is in the cache key, so the key covers them)."""
    return fsdp_inductor_config_patch(config, will_split)
