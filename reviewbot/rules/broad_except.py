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
    msg: tuple[str, str],
    why: tuple[str, str],
    fix: tuple[str, str],
    details: str = "",
) -> Finding:
    end = handler.end_lineno or handler.lineno
    return Finding(
        rule=rule,
        severity=severity,
        path=ctx.path,
        line_start=handler.lineno,
        line_end=end,
        message=msg[0],
        why=why[0],
        fix=fix[0],
        message_zh=msg[1],
        why_zh=why[1],
        fix_zh=fix[1],
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
                                ctx,
                                handler,
                                "broad-except",
                                Severity.P3,
                                (
                                    "bare `except:` re-raises but still catches `KeyboardInterrupt` and `SystemExit`",
                                    "裸 `except:` 虽然重新抛出，但仍会捕获 `KeyboardInterrupt` 和 `SystemExit`",
                                ),
                                (
                                    "A bare handler reads as a catch-all; naming the type states the intent.",
                                    "裸处理器看起来像是捕获一切；写明异常类型才能表达意图。",
                                ),
                                (
                                    "Write `except BaseException:` (cleanup then `raise`) or the exact type.",
                                    "改为 `except BaseException:`（清理后 `raise`）或写出确切的异常类型。",
                                ),
                                ruff_note,
                            )
                        )
                    continue
                findings.append(
                    _handler_finding(
                        ctx,
                        handler,
                        "broad-except",
                        Severity.P0,
                        (
                            f"`{label}` turns every error into a fallback or silence",
                            f"`{label}` 把所有错误变成了回退路径或静默",
                        ),
                        (
                            (
                                "It swallows `AssertionError` (programmer errors), `torch.OutOfMemoryError` and Dynamo's "
                                "internal errors along with the one failure it was written for, so real bugs surface later "
                                "as wrong results or a silently slower path."
                            ),
                            (
                                "它连同原本要处理的那一种失败一起吞掉了 `AssertionError`（程序员错误）、`torch.OutOfMemoryError` "
                                "和 Dynamo 的内部错误，真正的缺陷会在之后以错误结果或悄然变慢的路径出现。"
                            ),
                        ),
                        (
                            (
                                "Catch the narrowest exception the fallback is for, around the one call that raises it; "
                                "let everything else propagate."
                            ),
                            "只在会抛出该异常的那一个调用周围捕获回退所针对的最窄异常类型，其他异常一律向上传播。",
                        ),
                        ruff_note,
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
                            (
                                f"`{label}` falls back without re-raising `torch.OutOfMemoryError` first",
                                f"`{label}` 回退前没有先重新抛出 `torch.OutOfMemoryError`",
                            ),
                            (
                                (
                                    "`torch.OutOfMemoryError` and Dynamo's internal errors (`torch._dynamo.exc.TorchDynamoException`) "
                                    "are `RuntimeError` subclasses: this handler hides an OOM or a compiler bug behind the fallback."
                                ),
                                (
                                    "`torch.OutOfMemoryError` 和 Dynamo 的内部错误（`torch._dynamo.exc.TorchDynamoException`）"
                                    "都是 `RuntimeError` 的子类：这个处理器把显存不足或编译器缺陷藏在了回退路径后面。"
                                ),
                            ),
                            (
                                (
                                    "Add `except torch.OutOfMemoryError: raise` before it (or `if isinstance(e, torch.OutOfMemoryError): raise`), "
                                    "and narrow the try to the one call whose failure the fallback handles."
                                ),
                                (
                                    "在它之前加上 `except torch.OutOfMemoryError: raise`（或 `if isinstance(e, torch.OutOfMemoryError): raise`），"
                                    "并把 try 收窄到回退所针对的那一个调用。"
                                ),
                            ),
                        )
                    )
                elif len(calls) > 1:
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P2,
                            (
                                f"`{label}` covers {len(calls)} statements with calls, more than the one failure it means",
                                f"`{label}` 覆盖了 {len(calls)} 条含调用的语句，超出了它要处理的那一种失败",
                            ),
                            (
                                (
                                    "OOM is re-raised, but Dynamo's internal errors are `RuntimeError` subclasses too: any of the "
                                    "covered calls can fail into the fallback."
                                ),
                                "虽然 OOM 会被重新抛出，但 Dynamo 的内部错误同样是 `RuntimeError` 的子类：被覆盖的任一调用都可能落入回退。",
                            ),
                            (
                                "Move the other calls out of the try so it guards only the call the fallback is for.",
                                "把其他调用移出 try，让它只保护回退所针对的那一个调用。",
                            ),
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
                    message=f"try body holds {len(calls)} statements with calls; it should protect one",
                    why="Each extra call widens what the handler silently treats as the expected failure.",
                    fix="Keep only the call that raises the handled exception inside `try`; move the rest to `else:` or after.",
                    message_zh=f"try 块包含 {len(calls)} 条含调用的语句，应当只保护一个调用",
                    why_zh="每多一个调用，处理器就多把一种失败当作预期失败悄悄处理。",
                    fix_zh="`try` 中只保留会抛出被处理异常的那个调用，其余移到 `else:` 或之后。",
                    qualname=ctx.qualname(node.lineno),
                )
            )
    return findings
