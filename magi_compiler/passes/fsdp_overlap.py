"""The whole-graph SimpleFSDP overlap pass: explicit, bucketed, prefetched parameter all-gathers.

Input: the FX graph Dynamo hands the backend for a model wrapped by
`magi_compiler.distributed.data_parallel(..., "fully_shard")`. Every parameter read appears
there as `p.redistribute(placements=[Replicate()]).to_local(grad_placements=[Partial(...)])`
(torch 2.13: `call_method` nodes; older torch: `call_function` nodes named
`prim_redistribute` / `prim_to_local`), placed right before the parameter's first use, so the
all-gathers run serially with compute.

The pass replaces each such pair with `p.to_local()` (the local shard) followed by an explicit
functional collective `_c10d_functional.all_gather_into_tensor` and its `wait_tensor`:
- bucketing (`bucket_mode`): "none" gives one all-gather per parameter; "coalesced" packs
  consecutive parameters (in first-use order, same dtype and process group) into buckets of
  at most `bucket_size_mib` MiB of gathered data, flattened and concatenated into ONE
  all-gather, then split and viewed back to each parameter's shape;
- ordering: buckets are ordered by first use; bucket i's all-gather is issued right before the
  wait of bucket i - `prefetch_depth` (the first `prefetch_depth` buckets at graph start), and
  each wait sits right before its bucket's first use. `prefetch_depth=0` issues each all-gather
  right before its own wait (no overlap, the baseline).

Gradients: the collective's autograd backward is a reduce-scatter of the sum; a `Partial("avg")`
grad placement is reproduced by `magi::grad_scale` (identity forward, gradient times
1/world_size backward) on the local shard, so gradients equal the un-lowered graph's.

A parameter read several times (tied or reused weights) is gathered once for all its reads.
Left unchanged (logged at debug level): parameters whose storage is not `Shard(0)` on a 1-D
mesh (replicate mode has no all-gather; hybrid_shard's replicate-dim all-reduce is not lowered),
shards of unequal size, redistributes whose result has other users than one `to_local`, and
grad placements other than `Partial` sum/avg.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.distributed._functional_collectives  # registers the collectives' autograd
from torch import fx
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

from magi_compiler.config import CompileConfig, FSDPConfig
from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))

BucketMode = Literal["none", "coalesced"]
_BYTES_PER_MIB = 1 << 20


@torch.library.custom_op("magi::grad_scale", mutates_args=())
def grad_scale(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Identity in forward (a copy); multiplies the incoming gradient by `scale` in backward."""
    return x.clone()


@grad_scale.register_fake
def _grad_scale_fake(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


def _grad_scale_backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
    return grad * ctx.scale, None


def _grad_scale_setup(ctx, inputs, output) -> None:
    ctx.scale = inputs[1]


grad_scale.register_autograd(_grad_scale_backward, setup_context=_grad_scale_setup)


@dataclass
class _ParamGather:
    """One parameter's gather: its redistribute/to_local pairs (one per read of the attribute)."""

    param: fx.Node
    reads: list[tuple[fx.Node, fx.Node]]
    first_use: fx.Node
    first_use_index: int
    local_shape: tuple[int, ...]
    full_shape: tuple[int, ...]
    dtype: torch.dtype
    world_size: int
    group_name: str
    grad_scale: float

    @property
    def gathered_bytes(self) -> int:
        numel = 1
        for size in self.full_shape:
            numel *= size
        return numel * self.dtype.itemsize

    @property
    def local_numel(self) -> int:
        numel = 1
        for size in self.local_shape:
            numel *= size
        return numel


@dataclass
class BucketReport:
    """Where one bucket's collective sits in the post-pass graph (indices into `graph.nodes`)."""

    params: list[str]
    gathered_bytes: int
    issue_index: int
    wait_index: int
    first_use_index: int
    compute_nodes_overlapped: int


@dataclass
class OverlapReport:
    """What the pass did to one graph; `buckets` are in issue order."""

    bucket_mode: str
    prefetch_depth: int
    params_lowered: int
    params_left: list[str] = field(default_factory=list)
    buckets: list[BucketReport] = field(default_factory=list)

    @property
    def all_gathers(self) -> int:
        return len(self.buckets)


def _example_value(node: fx.Node) -> object:
    return node.meta.get("example_value", node.meta.get("val"))


def _is_method(node: fx.Node, name: str) -> bool:
    if node.op == "call_method" and node.target == name:
        return True
    return node.op == "call_function" and getattr(node.target, "__name__", "") == f"prim_{name}"


def is_redistribute(node: fx.Node) -> bool:
    """Whether `node` is a DTensor `redistribute` as Dynamo records it (a parameter gather before the pass)."""
    return _is_method(node, "redistribute")


def _prim_kwargs(node: fx.Node) -> dict:
    """The keyword arguments an older Dynamo closed over in its `prim_*` function."""
    for cell in getattr(node.target, "__closure__", None) or ():
        if isinstance(cell.cell_contents, dict):
            return cell.cell_contents
    return {}


def _node_kwarg(node: fx.Node, name: str) -> object:
    if node.op == "call_method":
        return node.kwargs.get(name)
    return _prim_kwargs(node).get(name)


def _target_placements(redistribute: fx.Node) -> tuple | None:
    value = _example_value(redistribute)
    if isinstance(value, DTensor):
        return tuple(value.placements)
    placements = _node_kwarg(redistribute, "placements")
    return tuple(placements) if placements is not None else None


def _grad_scale_for(to_local: fx.Node, world_size: int) -> float | None:
    grad_placements = _node_kwarg(to_local, "grad_placements")
    if grad_placements is None or len(grad_placements) != 1 or not isinstance(grad_placements[0], Partial):
        return None
    reduce_op = grad_placements[0].reduce_op
    if reduce_op == "avg":
        return 1.0 / world_size
    if reduce_op == "sum":
        return 1.0
    return None


def _match(node: fx.Node, index_of: dict[fx.Node, int]) -> _ParamGather | str:
    """The gather rooted at redistribute `node`, or why it is left alone."""
    source = node.args[0]
    param = _example_value(source) if isinstance(source, fx.Node) else None
    if not isinstance(param, DTensor) or source.op != "placeholder":
        return "redistribute of a non-input tensor"
    if param.device_mesh.ndim != 1 or tuple(param.placements) != (Shard(0),):
        return f"storage placements {tuple(param.placements)} on a {param.device_mesh.ndim}-D mesh"
    if _target_placements(node) != (Replicate(),):
        return "target placements are not (Replicate(),)"
    users = list(node.users)
    if len(users) != 1 or not _is_method(users[0], "to_local"):
        return "redistribute result used other than by one to_local"
    to_local = users[0]
    world_size = param.device_mesh.size()
    scale = _grad_scale_for(to_local, world_size)
    if scale is None:
        return "grad placements other than Partial sum/avg"
    full_shape = tuple(param.shape)
    if not full_shape or full_shape[0] % world_size != 0:
        return f"dim 0 of shape {full_shape} does not split evenly over {world_size} ranks"
    if not to_local.users:
        return "gathered parameter is unused"
    first_use = min(to_local.users, key=index_of.__getitem__)
    return _ParamGather(
        param=source,
        reads=[(node, to_local)],
        first_use=first_use,
        first_use_index=index_of[first_use],
        local_shape=(full_shape[0] // world_size, *full_shape[1:]),
        full_shape=full_shape,
        dtype=param.dtype,
        world_size=world_size,
        group_name=param.device_mesh.get_group(0).group_name,
        grad_scale=scale,
    )


def find_param_gathers(gm: fx.GraphModule) -> tuple[list[_ParamGather], list[str]]:
    """The lowerable parameter gathers in first-use order, and the names of parameters left alone."""
    index_of = {node: i for i, node in enumerate(gm.graph.nodes)}
    by_param: dict[fx.Node, _ParamGather] = {}
    left: list[str] = []
    for node in gm.graph.nodes:
        if not _is_method(node, "redistribute"):
            continue
        match = _match(node, index_of)
        if isinstance(match, str):
            name = node.args[0].name if isinstance(node.args[0], fx.Node) else node.name
            logger.debug("fsdp overlap: leaving %s as is: %s", name, match)
            left.append(name)
            continue
        seen = by_param.get(match.param)
        if seen is None:
            by_param[match.param] = match
        elif seen.grad_scale != match.grad_scale:
            logger.debug("fsdp overlap: leaving a second read of %s as is: other grad placements", match.param.name)
            left.append(match.param.name)
        else:
            # a parameter read twice (tied or reused weights) is gathered once
            seen.reads.extend(match.reads)
            if match.first_use_index < seen.first_use_index:
                seen.first_use, seen.first_use_index = match.first_use, match.first_use_index
    gathers = sorted(by_param.values(), key=lambda g: g.first_use_index)
    return gathers, left


def plan_buckets(
    gathers: list[_ParamGather], bucket_mode: BucketMode, bucket_size_mib: float
) -> list[list[_ParamGather]]:
    """Group gathers (already in first-use order) into buckets; see the module docstring."""
    if bucket_mode == "none":
        return [[g] for g in gathers]
    if bucket_mode != "coalesced":
        raise ValueError(f"bucket_mode must be 'none' or 'coalesced', got {bucket_mode!r}")
    if bucket_size_mib <= 0:
        raise ValueError(f"bucket_size_mib must be positive, got {bucket_size_mib}")
    limit = bucket_size_mib * _BYTES_PER_MIB
    buckets: list[list[_ParamGather]] = []
    size = 0
    for gather in gathers:
        current = buckets[-1] if buckets else None
        fits = (
            current is not None
            and current[0].dtype == gather.dtype
            and current[0].group_name == gather.group_name
            and size + gather.gathered_bytes <= limit
        )
        if fits:
            current.append(gather)
            size += gather.gathered_bytes
        else:
            buckets.append([gather])
            size = gather.gathered_bytes
    return buckets


def _differentiable_all_gather() -> torch._ops.OpOverload:
    """`_c10d_functional.all_gather_into_tensor` where it has autograd (torch >= 2.10 or so),
    else the older `_c10d_functional_autograd` twin, whose backward is the same reduce-scatter."""
    if torch._C._dispatch_has_kernel_for_dispatch_key("_c10d_functional::all_gather_into_tensor", "Autograd"):
        return torch.ops._c10d_functional.all_gather_into_tensor.default
    return torch.ops._c10d_functional_autograd.all_gather_into_tensor.default


_AG = _differentiable_all_gather()
_WAIT = torch.ops._c10d_functional.wait_tensor.default


def _emit_issue(graph: fx.Graph, bucket: list[_ParamGather]) -> fx.Node:
    """Shard -> (scaled, flattened, concatenated) -> all-gather; returns the collective node."""
    head = bucket[0]
    shards = [graph.call_method("to_local", (g.param,)) for g in bucket]
    if len(bucket) == 1:
        send = shards[0]
    else:
        flats = [graph.call_method("reshape", (shard, -1)) for shard in shards]
        send = graph.call_function(torch.cat, (flats,))
    send = graph.call_function(torch.ops.magi.grad_scale.default, (send, head.grad_scale))
    return graph.call_function(_AG, (send, head.world_size, head.group_name))


def _emit_unpack(graph: fx.Graph, bucket: list[_ParamGather], gathered: fx.Node) -> tuple[fx.Node, list[fx.Node]]:
    """The wait and the full parameters (for a coalesced bucket, split and viewed back)."""
    waited = graph.call_function(_WAIT, (gathered,))
    if len(bucket) == 1:
        return waited, [waited]
    world_size = bucket[0].world_size
    rows = graph.call_method("view", (waited, world_size, -1))
    outputs = []
    offset = 0
    for g in bucket:
        piece = graph.call_function(operator.getitem, (rows, (slice(None), slice(offset, offset + g.local_numel))))
        outputs.append(graph.call_method("reshape", (piece, *g.full_shape)))
        offset += g.local_numel
    return waited, outputs


def _first_compute_node(graph: fx.Graph) -> fx.Node:
    for node in graph.nodes:
        if node.op != "placeholder":
            return node
    raise AssertionError("a graph with a gather has a non-placeholder node")


def apply_fsdp_overlap(
    gm: fx.GraphModule, bucket_mode: BucketMode = "coalesced", bucket_size_mib: float = 25.0, prefetch_depth: int = 1
) -> OverlapReport:
    """Lower, bucket and reorder the parameter all-gathers of `gm` in place; returns what it did."""
    if prefetch_depth < 0:
        raise ValueError(f"prefetch_depth must be >= 0, got {prefetch_depth}")
    gathers, left = find_param_gathers(gm)
    buckets = plan_buckets(gathers, bucket_mode, bucket_size_mib)
    report = OverlapReport(bucket_mode, prefetch_depth, params_lowered=len(gathers), params_left=left)
    if not buckets:
        logger.debug("fsdp overlap: no lowerable parameter all-gather in the graph")
        return report
    graph = gm.graph
    start = _first_compute_node(graph)
    collectives: list[fx.Node] = []
    waits: list[fx.Node] = []
    for i, bucket in enumerate(buckets):
        first_use = bucket[0].first_use  # buckets hold gathers in first-use order
        if prefetch_depth == 0:
            anchor = first_use
        elif i >= prefetch_depth:
            anchor = waits[i - prefetch_depth]
        else:
            anchor = start
        with graph.inserting_before(anchor):
            collectives.append(_emit_issue(graph, bucket))
        with graph.inserting_before(first_use):
            wait, outputs = _emit_unpack(graph, bucket, collectives[-1])
        waits.append(wait)
        for g, full in zip(bucket, outputs, strict=True):
            for _, to_local in g.reads:
                to_local.replace_all_uses_with(full)
    # erased only now: `start` may be one of them, and later buckets still insert before it
    for g in gathers:
        for redistribute, to_local in g.reads:
            graph.erase_node(to_local)
            graph.erase_node(redistribute)
    graph.lint()
    gm.recompile()
    report.buckets = _describe(graph, buckets, collectives, waits)
    logger.info(
        "fsdp overlap: %d parameter all-gathers lowered into %d %s bucket(s), prefetch depth %d",
        len(gathers),
        len(buckets),
        bucket_mode,
        prefetch_depth,
    )
    return report


def _describe(
    graph: fx.Graph, buckets: list[list[_ParamGather]], collectives: list[fx.Node], waits: list[fx.Node]
) -> list[BucketReport]:
    index_of = {node: i for i, node in enumerate(graph.nodes)}
    compute_index = [index_of[n] for n in graph.nodes if is_compute_node(n)]
    reports = []
    for bucket, collective, wait in zip(buckets, collectives, waits, strict=True):
        issue, waited = index_of[collective], index_of[wait]
        reports.append(
            BucketReport(
                params=[g.param.name for g in bucket],
                gathered_bytes=sum(g.gathered_bytes for g in bucket),
                issue_index=issue,
                wait_index=waited,
                first_use_index=min(index_of[g.first_use] for g in bucket),
                compute_nodes_overlapped=sum(1 for c in compute_index if issue < c < waited),
            )
        )
    return reports


_COMM_TARGETS = {_AG, _WAIT, torch.ops.magi.grad_scale.default, torch.cat, operator.getitem}


def is_compute_node(node: fx.Node) -> bool:
    """Whether `node` does model math (not DTensor or collective plumbing, not a placeholder or output);
    what `BucketReport.compute_nodes_overlapped` counts."""
    if node.op == "call_function":
        return node.target not in _COMM_TARGETS
    if node.op == "call_method":
        return node.target not in {"to_local", "redistribute", "reshape", "view"}
    return node.op == "call_module"


_SPLIT_GRAPH_REASON = (
    "the overlap pass moves all-gathers across the whole graph, and this model's graph is split "
    "at splitting_ops into separately compiled pieces"
)
_warned_model_tags: set[str | None] = set()


class FSDPOverlapPass:
    """The overlap pass as a full-graph pass of the backend, configured by `FSDPConfig`.

    It requires the whole, unsplit graph: a bucket's all-gather may be issued in front of a
    splitting op and waited on behind it, which would leave an in-flight collective crossing
    two separately compiled pieces.
    """

    def __init__(self, fsdp: FSDPConfig, model_tag: str | None, will_split: bool) -> None:
        assert not will_split, f"FSDPOverlapPass on a split graph ({model_tag=}): {_SPLIT_GRAPH_REASON}"
        self.fsdp = fsdp
        self.model_tag = model_tag

    def __call__(self, gm: fx.GraphModule) -> None:
        logger.info("fsdp overlap: running on a graph of model %s", self.model_tag)
        apply_fsdp_overlap(gm, self.fsdp.bucket_mode, self.fsdp.bucket_size_mib, self.fsdp.prefetch_depth)


def overlap_applies(model_tag: str | None, will_split: bool) -> bool:
    """The guard: whether the overlap pass may run on this model's graph.

    A split graph is skipped, not an error: `enable_fsdp` is process-wide, and a split-graph
    model (a VAE next to an FSDP DiT) may be compiled in the same process. The first skip
    per model tag logs one warning.
    """
    if not will_split:
        return True
    if model_tag not in _warned_model_tags:
        _warned_model_tags.add(model_tag)
        logger.warning(
            "fsdp.enable_fsdp is set, but the FSDP overlap pass is skipped for model %r: %s. "
            "To enable it for this model, pass config_patch={'disable_graph_split': True} to its magi_compile.",
            model_tag,
            _SPLIT_GRAPH_REASON,
        )
    return False


# Inductor's peak-memory reordering moves the all-gathers and their waits (measured on torch
# 2.13), undoing the pass's order; the pass's graphs compile without it.
INDUCTOR_CONFIG_PATCH: dict[str, object] = {"reorder_for_peak_memory": False}


def fsdp_inductor_config_patch(config: CompileConfig, will_split: bool) -> dict[str, object]:
    """The Inductor options the backend applies while compiling a graph the pass ran on."""
    return dict(INDUCTOR_CONFIG_PATCH) if config.fsdp.enable_fsdp and not will_split else {}


def fsdp_overlap_passes(config: CompileConfig, model_tag: str | None, will_split: bool) -> list[FSDPOverlapPass]:
    """The FSDP part of the backend's full-graph pass list (empty unless `fsdp.enable_fsdp`)."""
    if not config.fsdp.enable_fsdp or not overlap_applies(model_tag, will_split):
        return []
    return [FSDPOverlapPass(config.fsdp, model_tag, will_split)]
