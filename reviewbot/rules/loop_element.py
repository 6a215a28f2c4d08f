"""`key-shares-artifacts.loop-ignores-element`: a key's loop that never reads its element (round 22
of the precision benchmark).

In a function that computes a key (a word of its name is hash, key, fingerprint or digest:
`get_hash`, `cache_key`), a `for` loop over a collection whose body never reads the loop's
variable but reads, on every turn, the value the collection was computed from: `fns =
get_nested_functions(kernel_fn)`, then `for fn in fns: kernel_src = inspect.getsource(kernel_fn)`
(iree-turbine's wave cache). Each turn adds the same inputs to the key, so the elements (the nested
functions) are not in it: two kernels that differ only there get one key and share one cached
artifact. Reported at `P2` on the loop's lines, with "unconfirmed" in its message: the shape says
the elements are left out, not that two real inputs differ only in them (the key probe, when
configured, is what shows a collision).

What counts: the loop's target binds names none of which starts with `_` and none of which its body
(or `else:`) reads; the iterable is a name bound in the function by `name = call(args)`, or a call
itself, and the body reads a plain name passed to that call. Near misses: a loop whose body reads
its element, an iterable from `range(...)` or `enumerate(range(...))` (a count, whose index often
goes unread), a loop variable spelled `_x`, a function whose name says nothing of a key.
"""

from __future__ import annotations

import ast
import re

from reviewbot import pysource
from reviewbot.findings import Finding, Severity
from reviewbot.rules.common import FileContext

# words of a function name that say it computes a key
_KEY_WORDS = frozenset(["hash", "key", "fingerprint", "digest"])
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
# calls that hand on the items of the one they wrap (`enumerate(range(n))` still counts)
_WRAPPERS = frozenset(["enumerate", "reversed"])
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _key_function(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(word.lower() in _KEY_WORDS for word in _WORD_SPLIT.split(function.name) if word)


def _names(node: ast.AST, context: type[ast.expr_context]) -> set[str]:
    return {sub.id for sub in pysource.walk(node) if isinstance(sub, ast.Name) and isinstance(sub.ctx, context)}


def _call_arguments(call: ast.Call) -> set[str]:
    """The plain names passed to `call`, positionally or by keyword."""
    values = [*call.args, *(keyword.value for keyword in call.keywords)]
    return {value.id for value in values if isinstance(value, ast.Name)}


def _counts(call: ast.Call) -> bool:
    """`range(...)`, or `enumerate(...)`/`reversed(...)` of one: the loop counts."""
    if not isinstance(call.func, ast.Name):
        return False
    if call.func.id == "range":
        return True
    return call.func.id in _WRAPPERS and any(isinstance(arg, ast.Call) and _counts(arg) for arg in call.args)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of `function`'s body, not those of functions, classes or lambdas nested in it."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, _SCOPES):
            continue
        found.append(node)
        pending.extend(pysource.children(node))
    return found


def _sources(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.Call]:
    """name -> the call a one-target assignment of `function`'s own body binds it to (for a name
    bound so twice, either)."""
    bound: dict[str, ast.Call] = {}
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
        ):
            bound[node.targets[0].id] = node.value
    return bound


def _ignored_element(loop: ast.For | ast.AsyncFor, sources: dict[str, ast.Call]) -> tuple[str, str, str] | None:
    """(the loop variable, the collection as written, the name read instead) when `loop` never reads
    its element and reads what its collection was computed from (see the module docstring)."""
    targets = _names(loop.target, ast.Store)
    if not targets or any(name.startswith("_") for name in targets):
        return None
    read = set().union(*(_names(stmt, ast.Load) for stmt in [*loop.body, *loop.orelse]))
    if targets & read:
        return None
    call = loop.iter if isinstance(loop.iter, ast.Call) else None
    if isinstance(loop.iter, ast.Name):
        call = sources.get(loop.iter.id)
    if call is None or _counts(call):
        return None
    instead = sorted(_call_arguments(call) & read - targets)
    if not instead:
        return None
    return ", ".join(sorted(targets)), ast.unparse(loop.iter), instead[0]


def check(ctx: FileContext) -> list[Finding]:
    """The findings on the loops of the key functions `ctx.focus` can report (see the module docstring)."""
    findings: list[Finding] = []
    for function in pysource.nodes(ctx.tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _key_function(function):
            continue
        if not ctx.focus(function.lineno, function.end_lineno or function.lineno):
            continue
        sources = _sources(function)
        for loop in _own_nodes(function):
            if not isinstance(loop, (ast.For, ast.AsyncFor)):
                continue
            ignored = _ignored_element(loop, sources)
            if ignored is None:
                continue
            element, collection, instead = ignored
            findings.append(
                Finding(
                    rule="key-shares-artifacts",
                    severity=Severity.P2,
                    path=ctx.path,
                    line_start=loop.lineno,
                    line_end=loop.end_lineno or loop.lineno,
                    message_id="key-shares-artifacts.loop-ignores-element",
                    params={
                        "function": function.name,
                        "element": element,
                        "collection": collection,
                        "instead": instead,
                    },
                    qualname=ctx.qualname(loop.lineno),
                )
            )
    return findings
