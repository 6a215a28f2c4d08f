"""`silent-gate`: a condition that skips work a configuration flag asked for, with no log.

Within a function, a "flag check" is an `if` whose test reads a configuration attribute (an
attribute chain with a segment named like `config`, `cfg`, `settings`... see
`config_attribute_names`). A gate is an early exit (`return`, `continue`, `break`) under an `if`
whose body logs nothing and whose test adds a condition other than the flag, placed where the flag
asked for the work: after a flag check that exits early when the flag is off, inside the body of a
flag check, or `or`-ed with the flag in the same test. Raising is loud, so it is not a gate.
Severity P2-MAINTAIN.
"""

from __future__ import annotations

import ast

from reviewbot.findings import Finding, Severity
from reviewbot.rules.common import FileContext, contains_logging

EXITS = (ast.Return, ast.Continue, ast.Break)


def _is_config_chain(node: ast.AST, names: tuple[str, ...]) -> bool:
    if not isinstance(node, ast.Attribute):
        return False
    segments: list[str] = []
    cur: ast.AST = node
    while isinstance(cur, ast.Attribute):
        segments.append(cur.attr)
        cur = cur.value
    if isinstance(cur, ast.Name):
        segments.append(cur.id)
    # the config object itself must be a prefix segment, the flag the last one
    return any(any(n in seg.lower() for n in names) for seg in segments[1:])


def _reads_config(test: ast.AST, names: tuple[str, ...]) -> bool:
    return any(_is_config_chain(sub, names) for sub in ast.walk(test))


def _only_config(test: ast.AST, names: tuple[str, ...]) -> bool:
    """The test is the flag alone (possibly negated or compared to a constant)."""
    if isinstance(test, ast.UnaryOp):
        return _only_config(test.operand, names)
    if isinstance(test, ast.Compare):
        parts = [test.left, *test.comparators]
        return all(_is_config_chain(p, names) or isinstance(p, ast.Constant) for p in parts)
    if isinstance(test, ast.BoolOp):
        return all(_only_config(v, names) for v in test.values)
    return _is_config_chain(test, names)


def _exits_silently(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], EXITS) and not contains_logging(body)


def _gate_finding(ctx: FileContext, node: ast.If) -> Finding:
    cond = ast.unparse(node.test)
    if len(cond) > 80:
        cond = cond[:77] + "..."
    return Finding(
        rule="silent-gate",
        severity=Severity.P2,
        path=ctx.path,
        line_start=node.lineno,
        line_end=node.end_lineno or node.lineno,
        message=f"`if {cond}` skips work a configuration flag asked for without logging",
        why="A user who enabled the flag sees no effect and no reason; the skip is invisible in logs and bug reports.",
        fix="Log on the skipping path (the `reviewbot`/`magi_compiler` logger, naming the flag and the condition), "
        "or raise if the combination is invalid.",
        message_zh=f"`if {cond}` 在没有日志的情况下跳过了配置开关要求执行的工作",
        why_zh="打开开关的用户看不到任何效果，也看不到原因；这次跳过在日志和问题报告中都不可见。",
        fix_zh="在跳过路径上记录日志（使用 `reviewbot`/`magi_compiler` logger，写明开关和条件），或在组合无效时抛出异常。",
        qualname=ctx.qualname(node.lineno),
    )


def _scan(ctx: FileContext, body: list[ast.stmt], flag_active: bool, findings: list[Finding]) -> None:
    names = ctx.config.config_attribute_names
    active = flag_active
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _scan(ctx, stmt.body, False, findings)
            continue
        if isinstance(stmt, ast.ClassDef):
            _scan(ctx, stmt.body, False, findings)
            continue
        if isinstance(stmt, ast.If):
            reads = _reads_config(stmt.test, names)
            only = reads and _only_config(stmt.test, names)
            silent_exit = _exits_silently(stmt.body)
            if silent_exit and not only and (active or (reads and isinstance(stmt.test, ast.BoolOp))):
                findings.append(_gate_finding(ctx, stmt))
            if reads:
                if isinstance(stmt.body[-1], EXITS):
                    active = True  # flag off -> exit; the rest of the block is work the flag asked for
                _scan(ctx, stmt.body, True, findings)
            else:
                _scan(ctx, stmt.body, active, findings)
            _scan(ctx, stmt.orelse, active, findings)
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _scan(ctx, inner, active, findings)
        for handler in getattr(stmt, "handlers", []):
            _scan(ctx, handler.body, active, findings)


def check(ctx: FileContext) -> list[Finding]:
    findings: list[Finding] = []
    _scan(ctx, ctx.tree.body, False, findings)
    return findings
