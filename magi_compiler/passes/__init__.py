"""Full-graph passes the backend runs on Dynamo's FX graph before splitting.

A pass is a callable taking the ``fx.GraphModule`` and rewriting it in place.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import fx

from magi_compiler.config import CompileConfig
from magi_compiler.log import logger
from magi_compiler.passes.noop_elimination import eliminate_noops_and_dead_code

GraphPass = Callable[[fx.GraphModule], None]


def build_full_graph_passes(config: CompileConfig, model_tag: str | None, will_split: bool) -> list[GraphPass]:
    """The passes to run, in order, for a model compiled with ``config``.

    ``will_split`` says whether the graph is split at ``splitting_ops`` afterwards.
    """
    del will_split  # only the FSDP overlap pass depends on it
    if config.fsdp.enable_fsdp:
        logger.warning(
            "%s: fsdp.enable_fsdp is set, but this build has no FSDP overlap pass; skipping it", model_tag or "model"
        )
    return [eliminate_noops_and_dead_code]
