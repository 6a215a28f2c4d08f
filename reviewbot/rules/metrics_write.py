"""A failed write to a metrics writer, shown and dropped (round 24 of the precision benchmark).

`try: if self.enable_tb and self.tb_writer is not None: self.tb_writer.add_scalar(tag=key,
scalar_value=value, global_step=step) except Exception: traceback.print_exc()` (InternEvo's
TensorBoard writer): the try does nothing but hand a value to a metrics writer (TensorBoard's
`SummaryWriter.add_*`, MLflow's `log_metric`/`log_param`), whose output is diagnostics only, and the
handler shows the failure (logging, `print`, `traceback.print_exc()`) and goes on. Training or
serving is the same whether or not the point reaches the dashboard; a failure there must not stop
the work it observes. What is left is a nit (`P3`): the catch-all also hides a bug of the call (a
wrong argument) behind a traceback that a value which always fails prints at every step.

`metrics_write` asks: every statement of the try body is a call of such a method standing alone,
or an `if` whose test calls nothing and whose branches are such statements; the try has no `else:`
or `finally:`; and the handler only shows the failure (at least once) and passes or returns
nothing. The diagnostics class of `broad_except` reads the same from a file's or function's name
(`metrics`, `report`, ...); this one reads it from the call. Near misses, still the swallow: a try
that also computes or stores something (`self.step += 1`), a silent handler, a handler that binds a
substitute.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import TRACEBACK_PRINTS, is_logging_call

# methods of metrics writers whose output is only shown on a dashboard: TensorBoard's
# `SummaryWriter` (torch.utils.tensorboard, tensorboardX) and MLflow's tracking calls
_WRITES = frozenset(
    [
        "add_scalar",
        "add_scalars",
        "add_text",
        "add_histogram",
        "add_image",
        "add_images",
        "add_figure",
        "add_audio",
        "add_video",
        "add_graph",
        "add_embedding",
        "add_pr_curve",
        "add_hparams",
        "add_mesh",
        "add_custom_scalars",
        "log_metric",
        "log_metrics",
        "log_param",
        "log_params",
    ]
)


def _write(stmt: ast.stmt) -> str | None:
    """`writer.add_scalar(...)` standing alone: the method, written with its owner."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func = stmt.value.func
    if isinstance(func, ast.Attribute) and func.attr in _WRITES:
        return ast.unparse(func)
    return None


def _writes(body: list[ast.stmt], found: list[str]) -> bool:
    """Every statement of `body` is a write (`_write`) or an `if` without calls in its test whose
    branches are writes; the writes are added to `found`."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            if any(isinstance(sub, ast.Call) for sub in pysource.walk(stmt.test)):
                return False
            if not _writes(stmt.body, found) or not _writes(stmt.orelse, found):
                return False
            continue
        write = _write(stmt)
        if write is None:
            return False
        found.append(write)
    return True


def _shows(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    func = call.func
    return is_logging_call(call) or (isinstance(func, ast.Attribute) and func.attr in TRACEBACK_PRINTS)


def metrics_write(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The writer's method (`self.tb_writer.add_scalar`) when the try only writes to a metrics writer
    and the handler shows the failure and goes on (see the module docstring); None otherwise."""
    if node.orelse or node.finalbody:
        return None
    found: list[str] = []
    if not _writes(node.body, found) or not found:
        return None
    leaves = all(
        _shows(stmt)
        or isinstance(stmt, ast.Pass)
        or (isinstance(stmt, ast.Return) and (stmt.value is None or ast.unparse(stmt.value) == "None"))
        for stmt in handler.body
    )
    if not leaves or not any(_shows(stmt) for stmt in handler.body):
        return None
    return found[0]
