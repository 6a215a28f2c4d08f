"""New code put under an existing catch-all (round 20 of the precision benchmark).

The engine reports a finding on a line the change did not add only when the base has no finding of
the same fingerprint: an unchanged handler keeps its finding's fingerprint, so a swallow that stood
at the base is not reported again. That is right when the handler guards the same code as before,
and wrong when the change puts new code under it: the catch-all now swallows failures of code it
did not guard before, and what the handler's fallback means downstream is new (NeMo-RL's verifier,
whose outer catch-all now also guards a block that mutes its output, scoring every failure 0;
verl's PRIME scoring, whose all-zero batch fallback now covers new code; depyf's catch-all around
`get_jump_target`, whose answer now also decides the dead-code range).

`guards_new_code` answers, for a head finding on a handler and the base finding of the same
fingerprint: the head handler's try body calls something (a callee as written, `run_scoring`,
`self.verify`, `asyncio.wait_for`) that the base handler's try body did not call. Calls rearranged
or given other arguments (`asyncio.gather(wait_for(...))` become `wait_for(future)`: verl's per-row
scoring, whose notes call it nothing at `P2`) are the same code guarded; a try whose body only lost
calls guards no new code. Only the findings of `DATA_FALLBACKS` are asked (the engine's
`_kept`): those whose harm is the fallback value flowing on as data (`reviewbot.rules.data_fallback`),
which a change to the try feeds with new failures. Other classes stay compared by fingerprint alone:
on the tuning corpus their unchanged handlers over changed tries (a per-session boundary, a cache
miss, a per-row score) are judged the same as before the change by the notes.

*A test of the caught exception dropped* (round 22, `drops_exception_test`): the same fingerprint
(rule, message, enclosing name, the handler's label) does not mean the same handler behaviour when
the base's handler tested what it caught (`if out_of_vram(e):` around its fallback) and the head's,
at the same place, tests it no more: every error the clause catches now takes the fallback, which
only the tested ones took before (auto-round's importance-matrix quantization, whose commit dropped
`if out_of_vram(e):`, so any `RuntimeError` is reported as "Out of VRAM" and the model quantized
blockwise). Asked of every `broad-except` and `runtime-error-fallback` finding the engine compares
(`HANDLER_RULES`). Near misses: a head handler that still tests the exception (another predicate,
`if "out of memory" in str(e):`), a base handler that tested something else (a flag).

A finding whose lines the change does not touch is not reported at all, however its try changed.
Round 22 adds one such case (`new_name_fed`, the engine's `_kept`): an unchanged handler that falls
through, over a try the change touches that now binds a name the base's try did not bind, read
after the try in the function holding it. A failure part way through the try now leaves that name
as the statements before the failure set it, and the code after the try reads it: the catch-all
decides a value it did not decide before (depyf's `smallest_jump_in`, the start of a dead-code
range, updated under the catch-all around `get_jump_target`). The swallow is not new; the finding
(`new_binding_finding`, `P2` `<rule>.guards-new-binding`) names the binding and says it is
unconfirmed: whether the partial value is wrong downstream is not read. Near misses: a new binding
read nowhere after the try, a handler that leaves (`return`, `raise`, `continue`, `break`), a try
whose new statements bind nothing.
"""

from __future__ import annotations

import ast
import dataclasses

from reviewbot import pysource
from reviewbot.findings import UNCONFIRMED_CAP, Finding
from reviewbot.rules.common import innermost_function
from reviewbot.severity import Severity

# the message ids whose fallback value flows on as data (`reviewbot.rules.data_fallback`)
DATA_FALLBACKS = frozenset(["broad-except.widens-fallback", "broad-except.constant-data"])
# the rules whose findings stand on a handler that does not pass the error on (`drops_exception_test`,
# `new_binding_finding`)
HANDLER_RULES = frozenset(["broad-except", "runtime-error-fallback"])
# the parameters that name code outside the handler in which the harm is read (round 27: the end a
# handler falls through to, sent on a channel that carries errors, `background_work.end_on_error_channel`)
OUTSIDE_PARAMS = frozenset(["end"])


def harm_outside(finding: Finding) -> bool:
    """A handler finding whose harm is read in code outside the handler's lines (`OUTSIDE_PARAMS`): a
    change there (a channel now carrying errors) makes it new on an unchanged handler, so the engine
    reports it off the changed lines when the base does not have its fingerprint (round 27)."""
    return finding.rule in HANDLER_RULES and not OUTSIDE_PARAMS.isdisjoint(finding.params)


def try_of_handler(tree: ast.AST, line: int) -> ast.Try | ast.TryStar | None:
    """The try statement one of whose handlers starts at `line`."""
    for node in pysource.statements(tree):
        if isinstance(node, (ast.Try, ast.TryStar)) and any(handler.lineno == line for handler in node.handlers):
            return node
    return None


def _callees(body: list[ast.stmt]) -> set[str]:
    """The callees of the calls in `body`, as written (`ast.unparse` of the called expression)."""
    return {ast.unparse(sub.func) for stmt in body for sub in pysource.walk(stmt) if isinstance(sub, ast.Call)}


def guards_new_code(head_tree: ast.AST, head_line: int, base_tree: ast.AST, base_line: int) -> bool:
    """The try of the head handler at `head_line` calls something the try of the base handler at
    `base_line` did not (see the module docstring); False when either is not found."""
    head_try = try_of_handler(head_tree, head_line)
    base_try = try_of_handler(base_tree, base_line)
    if head_try is None or base_try is None:
        return False
    return bool(_callees(head_try.body) - _callees(base_try.body))


def _handler_in(node: ast.Try | ast.TryStar, line: int) -> ast.ExceptHandler:
    return next(handler for handler in node.handlers if handler.lineno == line)


def _handler_at(tree: ast.AST, line: int) -> ast.ExceptHandler | None:
    node = try_of_handler(tree, line)
    return None if node is None else _handler_in(node, line)


def _tests_caught(handler: ast.ExceptHandler) -> bool:
    """An `if` (or a conditional expression) of the handler's own code tests the caught name."""
    if handler.name is None:
        return False
    for stmt in handler.body:
        for sub in pysource.walk(stmt):
            if isinstance(sub, (ast.If, ast.IfExp, ast.While)) and any(
                isinstance(name, ast.Name) and name.id == handler.name for name in ast.walk(sub.test)
            ):
                return True
    return False


def drops_exception_test(head_tree: ast.AST, head_line: int, base_tree: ast.AST, base_line: int) -> bool:
    """The base handler at `base_line` tested its caught exception and the head handler at
    `head_line` does not (see the module docstring); False when either is not found."""
    head = _handler_at(head_tree, head_line)
    base = _handler_at(base_tree, base_line)
    if head is None or base is None:
        return False
    return _tests_caught(base) and not _tests_caught(head)


_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _assigned(body: list[ast.stmt]) -> set[str]:
    """The plain names that assignments (`=`, `+=`, annotated) in `body` bind, nested scopes aside."""
    names: set[str] = set()
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(sub.id for target in targets for sub in pysource.walk(target) if isinstance(sub, ast.Name))
        pending.extend(pysource.children(node))
    return names


def names_fed(tree: ast.Module, line: int) -> list[str]:
    """The names the try of the handler at `line` binds that are read after the try in the function
    holding it (the module for a try outside functions), in the order of their first read after
    it; none when the handler leaves (`return`, `raise`, `continue`, `break`) or is not found."""
    node = try_of_handler(tree, line)
    if node is None or any(isinstance(stmt, _LEAVES) for stmt in _handler_in(node, line).body):
        return []
    bound = _assigned(node.body)
    end = node.end_lineno or node.lineno
    scope: ast.AST = innermost_function(tree, node) or tree
    reads = sorted(
        (sub.lineno, sub.col_offset, sub.id)
        for sub in pysource.walk(scope)
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in bound and sub.lineno > end
    )
    return list(dict.fromkeys(name for _, _, name in reads))


def new_name_fed(head_tree: ast.Module, head_line: int, base_tree: ast.AST, base_line: int) -> str | None:
    """The first of `names_fed` of the head handler at `head_line` that the try of the base handler
    at `base_line` did not bind (see the module docstring); None when there is none."""
    base_try = try_of_handler(base_tree, base_line)
    if base_try is None:
        return None
    before = _assigned(base_try.body)
    return next((name for name in names_fed(head_tree, head_line) if name not in before), None)


def new_binding_finding(finding: Finding, name: str) -> Finding:
    """`finding` (on an unchanged handler the base has too) as the round-22 `P2`: its try now binds
    `name`, which the code after the try reads. Not anchored to a changed line (`in_diff` False);
    `P2` unconfirmed whatever cap the handler's own finding had (round 26: a catch-all around one
    operation is capped at `P3`, its new binding is not)."""
    assert finding.rule in HANDLER_RULES, finding.rule
    return dataclasses.replace(
        finding,
        severity=Severity.P2,
        unconfirmed_cap=UNCONFIRMED_CAP,
        message_id=f"{finding.rule}.guards-new-binding",
        params={"label": finding.params["label"], "name": name},
        extra={},
        in_diff=False,
    )
