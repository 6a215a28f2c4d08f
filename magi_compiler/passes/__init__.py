"""Full-graph passes the backend runs on Dynamo's FX graph before splitting.

A pass is a callable taking the ``fx.GraphModule`` and rewriting it in place.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import fx

from magi_compiler.config import CompileConfig
from magi_compiler.passes.noop_elimination import eliminate_noops_and_dead_code

GraphPass = Callable[[fx.GraphModule], None]


def build_full_graph_passes(config: CompileConfig, model_tag: str | None, will_split: bool) -> list[GraphPass]:
    """The passes to run, in order, for a model compiled with ``config``.

    ``will_split`` says whether the graph is split at ``splitting_ops`` afterwards.
    """
    del config, model_tag, will_split  # no pass depends on them yet; the FSDP pass will
    return [eliminate_noops_and_dead_code]
