"""The same computation retried on the CPU, its own failure propagated (round 22 of the precision
benchmark).

`try: w, s, z = quant_func(weight.to(self.device), **cfg)` / `except RuntimeError: err =
traceback.format_exc(); try: w, s, z = quant_func(weight.to("cpu"), **cfg) except Exception:
logger.error(err); raise` (auto-round's RTN fallback): the handler runs the try's statements again
with every device they name replaced by the CPU, and a failure of that retry leaves the handler (the
retry is not guarded, or stands in a nested try whose every handler re-raises). An error that does
not depend on the device (a shape, dtype or programmer error) fails again on the CPU and reaches
the caller, and a success computes what the accelerator would have; what the unfiltered
`except RuntimeError` still takes is an accelerator failure other than out-of-memory, retried on
the CPU under an out-of-memory message. That is a `P3` nit (filter on the out-of-memory error),
not the `P2` of a fallback that hides any error: `runtime-error-fallback.cpu-retry`, the mirror of
`implementation-alternative` (another implementation on the same inputs).

`cpu_retry` asks: the try's statements and the handler's work (the handler's statements, or the body
of its one nested try whose handlers all end in `raise`), logging calls and records of the
traceback (`msg = traceback.format_exc()`) left out, are the same once device moves are set aside:
statements that only move a name to a device (`m.to(dev)`, `model = model.to(dev)`, `x = x.cuda()`)
are dropped, and inside the others every device argument (the argument of `.to(...)`, `.cuda(...)`,
a `device=` keyword; `.cpu()` reads as a move to the CPU) is compared apart; every device the
handler names is the CPU (`"cpu"`, `torch.device("cpu")`), and the try names at least one that is
not. Near misses: other arguments in the retry (`layer_names=[]`: another computation), a retry
inside a try that swallows, a try that already ran on the CPU (only `self.device` set to `"cpu"`
before the call: the attribute's use is not read), a retry on another accelerator.
"""

from __future__ import annotations

import ast
import dataclasses

from reviewbot.exception_index import reraises_same
from reviewbot.rules.common import is_logging_call

# tensor and module methods that move their owner to a device
_MOVES = frozenset(["to", "cuda", "cpu"])
# what a handler keeps of the failed attempt before retrying
_TRACEBACK_RECORDS = frozenset(["traceback.format_exc", "traceback.format_exception"])


@dataclasses.dataclass
class _Work:
    """Statements with their device arguments set aside: `statements` compare as the computation,
    `devices` lists what each device argument was (in source order, moves included)."""

    statements: list[ast.stmt]
    devices: list[ast.expr | None]


def _is_cpu(expr: ast.expr | None) -> bool:
    """`None` stands for `.cpu()`; otherwise the constant `"cpu"` or `torch.device("cpu")`."""
    if expr is None:
        return True
    if isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords:
        expr = expr.args[0]
    return isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value.lower() == "cpu"


def _move(call: ast.expr) -> ast.expr | None | bool:
    """The device a move call names (`x.to(dev)`: `dev`; `x.cuda()`: `"cuda"`; `x.cpu()`: None), or
    False when `call` is no move (`.to()` without a positional argument or `device=` is none)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _MOVES):
        return False
    if call.func.attr == "cpu":
        return None if not call.args and not call.keywords else False
    device = next((k.value for k in call.keywords if k.arg == "device"), None)
    if device is None and call.args:
        device = call.args[0]
    if device is None and call.func.attr == "cuda":
        return ast.Constant("cuda")
    return device if device is not None else False


class _SetAside(ast.NodeTransformer):
    """Replaces each device argument with a placeholder name and records it."""

    def __init__(self) -> None:
        self.devices: list[ast.expr | None] = []

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        device = _move(node)
        if device is not False:
            self.devices.append(device)
            assert isinstance(node.func, ast.Attribute)
            return ast.Call(
                func=ast.Attribute(value=node.func.value, attr="to", ctx=ast.Load()),
                args=[ast.Name(id="<device>", ctx=ast.Load())],
                keywords=[],
            )
        for keyword in node.keywords:
            if keyword.arg == "device":
                self.devices.append(keyword.value)
                keyword.value = ast.Name(id="<device>", ctx=ast.Load())
        return node


def _only_moves(stmt: ast.stmt) -> ast.expr | None | bool:
    """The device when `stmt` only moves a name or attribute (`m.to(dev)`, `m = m.to(dev)`), else False."""
    if isinstance(stmt, ast.Expr):
        value, target = stmt.value, None
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        value, target = stmt.value, stmt.targets[0]
    else:
        return False
    device = _move(value)
    if device is False:
        return False
    assert isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
    owner = value.func.value
    if not isinstance(owner, (ast.Name, ast.Attribute)):
        return False
    if target is not None and ast.unparse(target) != ast.unparse(owner):
        return False
    return device


def _records_traceback(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and ast.unparse(stmt.value.func) in _TRACEBACK_RECORDS
    )


def _work(body: list[ast.stmt]) -> _Work:
    kept: list[ast.stmt] = []
    devices: list[ast.expr | None] = []
    for stmt in body:
        if (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)) or _records_traceback(stmt):
            continue
        device = _only_moves(stmt)
        if device is not False:
            devices.append(device)
            continue
        aside = _SetAside()
        kept.append(aside.visit(_copy(stmt)))
        devices.extend(aside.devices)
    return _Work(kept, devices)


def _copy(stmt: ast.stmt) -> ast.stmt:
    return ast.parse(ast.unparse(stmt)).body[0]


def _retried(handler: ast.ExceptHandler) -> list[ast.stmt] | None:
    """The handler's work: its statements, or the body of its one nested try whose handlers all
    re-raise (records of the traceback and logging around it allowed); None when the retry is guarded
    by a handler that does not re-raise."""
    rest = [
        stmt
        for stmt in handler.body
        if not ((isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)) or _records_traceback(stmt))
    ]
    nested = [stmt for stmt in rest if isinstance(stmt, (ast.Try, ast.TryStar))]
    if not nested:
        return rest
    if len(rest) != 1:
        return None
    inner = nested[0]
    if inner.orelse or inner.finalbody or not all(reraises_same(h) for h in inner.handlers):
        return None
    return inner.body


def cpu_retry(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler runs the try's statements again on the CPU and lets the retry's failure propagate
    (see the module docstring)."""
    retried = _retried(handler)
    if not retried:
        return False
    tried, again = _work(node.body), _work(retried)
    if not tried.statements or not again.devices or not all(_is_cpu(device) for device in again.devices):
        return False
    if all(_is_cpu(device) for device in tried.devices):
        return False
    return len(tried.statements) == len(again.statements) and all(
        ast.dump(one) == ast.dump(other) for one, other in zip(tried.statements, again.statements, strict=True)
    )
