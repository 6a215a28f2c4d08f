"""Over-broad exception handling: `broad-except`, `runtime-error-fallback`, `wide-try`.

ruff (pinned, run once per review as a subprocess with JSON output, see `reviewbot.ruff`) reports
bare `except:` (E722) and blind `except Exception` (BLE001); this module classifies those handlers
and adds what ruff cannot know: handlers that log and fall back (ruff exempts them), and the torch
rules for `except RuntimeError`. A handler "re-raises" only when a `raise` statement sits directly in
its body; a conditional raise still swallows the other cases.

- bare / `Exception` / `BaseException` without re-raise: P0 (it swallows `AssertionError`).
  Bare `except:` that re-raises: P3 (it still catches `KeyboardInterrupt`; name the type).
- `except RuntimeError` that does not re-raise, with no `torch.OutOfMemoryError` re-raise before
  it (an earlier handler or an `isinstance` check that raises): P0; with the OOM re-raise but a try
  body holding more than one call: P2.
- a try whose body holds more than one statement with a call and that has a handler which does not
  re-raise (a fallback): P2 `wide-try`. Cleanup handlers that always re-raise are left alone.
"""

from __future__ import annotations

import ast

from reviewbot.findings import Finding, Severity
from reviewbot.rules.common import FileContext

BROAD = {"Exception", "BaseException"}
OOM_NAMES = ("OutOfMemoryError",)


def _caught_names(handler: ast.ExceptHandler) -> list[str] | None:
    """Last name segment of every caught type; None for a bare `except:`."""
    if handler.type is None:
        return None
    elts = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = []
    for elt in elts:
        if isinstance(elt, ast.Name):
            names.append(elt.id)
        elif isinstance(elt, ast.Attribute):
            names.append(elt.attr)
    return names


def _reraises(body: list[ast.stmt]) -> bool:
    return any(isinstance(stmt, ast.Raise) for stmt in body)


def _mentions_oom(node: ast.AST) -> bool:
    return any(
        (isinstance(sub, ast.Attribute) and sub.attr.endswith(OOM_NAMES))
        or (isinstance(sub, ast.Name) and sub.id.endswith(OOM_NAMES))
        for sub in ast.walk(node)
    )


def _oom_reraised(node: ast.Try, index: int) -> bool:
    for earlier in node.handlers[:index]:
        names = _caught_names(earlier) or []
        if any(n.endswith(OOM_NAMES) for n in names) and _reraises(earlier.body):
            return True
    handler = node.handlers[index]
    for sub in ast.walk(handler):
        if isinstance(sub, ast.If) and _mentions_oom(sub.test) and _reraises(sub.body):
            return True
    return False


def _call_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    return [stmt for stmt in body if any(isinstance(sub, ast.Call) for sub in ast.walk(stmt))]


def _handler_finding(
    ctx: FileContext,
    handler: ast.ExceptHandler,
    rule: str,
    severity: Severity,
    message_id: str,
    params: dict[str, object],
    details: str = "",
) -> Finding:
    end = handler.end_lineno or handler.lineno
    return Finding(
        rule=rule,
        severity=severity,
        path=ctx.path,
        line_start=handler.lineno,
        line_end=end,
        message_id=message_id,
        params=params,
        qualname=ctx.qualname(handler.lineno),
        details=details,
    )


def check(ctx: FileContext) -> list[Finding]:
    ruff_lines = {(hit.code, hit.line) for hit in ctx.ruff}
    findings: list[Finding] = []
    for node in ast.walk(ctx.tree):
        if not isinstance(node, (ast.Try, ast.TryStar)) or not node.handlers:
            continue
        calls = _call_statements(node.body)
        runtime_reported = False
        for i, handler in enumerate(node.handlers):
            names = _caught_names(handler)
            reraises = _reraises(handler.body)
            label = "except:" if names is None else f"except {ast.unparse(handler.type) if handler.type else ''}"
            ruff_note = ""
            if ("E722", handler.lineno) in ruff_lines:
                ruff_note = "ruff E722"
            elif handler.type is not None and ("BLE001", handler.type.lineno) in ruff_lines:
                ruff_note = "ruff BLE001"
            if names is None or BROAD & set(names):
                if reraises:
                    if names is None:
                        findings.append(
                            _handler_finding(
                                ctx, handler, "broad-except", Severity.P3, "broad-except.bare-reraises", {}, ruff_note
                            )
                        )
                    continue
                findings.append(
                    _handler_finding(
                        ctx, handler, "broad-except", Severity.P0, "broad-except.swallows", {"label": label}, ruff_note
                    )
                )
                continue
            if "RuntimeError" in names and not reraises:
                runtime_reported = True
                oom = _oom_reraised(node, i)
                if not oom:
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P0,
                            "runtime-error-fallback.no-oom-reraise",
                            {"label": label},
                        )
                    )
                elif len(calls) > 1:
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P2,
                            "runtime-error-fallback.wide",
                            {"label": label, "calls": len(calls)},
                        )
                    )
        swallows = any(not _reraises(h.body) for h in node.handlers)
        if len(calls) > 1 and swallows and not runtime_reported:
            first, last = node.body[0], node.body[-1]
            findings.append(
                Finding(
                    rule="wide-try",
                    severity=Severity.P2,
                    path=ctx.path,
                    line_start=node.lineno,
                    line_end=last.end_lineno or first.lineno,
                    message_id="wide-try.many-calls",
                    params={"calls": len(calls)},
                    qualname=ctx.qualname(node.lineno),
                )
            )
    return findings
