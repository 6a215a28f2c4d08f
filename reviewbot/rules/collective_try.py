"""A collective operation inside a swallowing try, named in `broad-except.swallows`'s message (round 25
of the precision benchmark: Mooncake's exchange of IPC handles through `dist.all_gather`).

A catch-all whose try holds a collective (`all_gather`, `all_reduce`, `broadcast`, `barrier`, ...)
fails on one rank at a time: that rank falls back alone while its peers go on, so the ranks can take
different routes after the handler, and the next collective waits for peers that never enter it (a
hang until the process group's timeout, far from the cause), or a failure before the collective
leaves the others waiting in it. The width of the handler is what the rule reports; this says which
harm it has here. The names are the collective vocabulary of `torch.distributed` (which NCCL, Gloo
and MPI wrappers copy), read as the called attribute or name, whatever module it comes from.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import callee

_COLLECTIVES = frozenset(
    [
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "all_reduce",
        "all_to_all",
        "all_to_all_single",
        "barrier",
        "broadcast",
        "broadcast_object_list",
        "gather",
        "gather_object",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "scatter",
        "scatter_object_list",
    ]
)


# the keywords that hand a call a process group (round 27)
_GROUP_KEYWORDS = frozenset(["group", "process_group"])
# the words a query of a group starts with: it asks, every rank on its own (`get_rank(group=g)`)
_QUERY_PREFIXES = ("get_", "is_", "has_")


def collective_call(body: list[ast.stmt]) -> str | None:
    """The first call in `body` (in source order) whose called name is a collective, as written
    (`dist.all_gather`); None when there is none. A call of the builtin-like `reduce` or `gather`
    counts only as a method or module attribute (`dist.reduce(...)`), not as a bare name
    (`functools`' `reduce(f, xs)` imported by name). Since round 27 a call handed a process group by
    keyword (`Communicator(group=self.cpu_group, device=d)`, `DDP(model, process_group=pg)`) is one
    too, a set-up every rank of the group takes part in (a communicator's rendezvous, a broadcast of
    the first state), unless its name asks a question (`get_rank(group=g)`, `is_*`, `has_*`)."""
    calls = [sub for stmt in body for sub in pysource.walk(stmt) if isinstance(sub, ast.Call)]
    for call in sorted(calls, key=lambda call: (call.lineno, call.col_offset)):
        if callee(call) in _COLLECTIVES and isinstance(call.func, ast.Attribute):
            return ast.unparse(call.func)
        if _group_set_up(call):
            return ast.unparse(call.func)
    return None


def _group_set_up(call: ast.Call) -> bool:
    """`call` is handed a process group by keyword and its name is not a query's (round 27)."""
    name = callee(call)
    handed = any(keyword.arg in _GROUP_KEYWORDS for keyword in call.keywords)
    return handed and not name.lower().startswith(_QUERY_PREFIXES)
