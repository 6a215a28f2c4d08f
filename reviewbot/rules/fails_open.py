"""A safety check that fails open (round 25 of the precision benchmark).

```
def _is_neuronx_cc_running() -> bool:
    try:
        result = subprocess.run(["pgrep", "-c", "neuronx-cc"], capture_output=True, text=True)
        return int(result.stdout.strip() or "0") > 0
    except (OSError, ValueError):
        return False
...
compiler_running = _is_neuronx_cc_running()
...
elif state == "locked" and remove_locks and not compiler_running:
    for lock_file in entry_dir.glob("*.lock"):
        lock_file.unlink()
```

A handler of any width, narrow ones included, that does not re-raise and, after logging calls,
returns `True` or `False`: the function answers a yes/no question with it when the question cannot
be asked. What that answer does is read where the file uses it: a call of the function (by simple
name, or as a method of `self` or `cls`) stands as one conjunct of an `if` test (the whole test or
an operand of its `and`), negated or not, or binds a plain name that such a conjunct reads in the
same function; when the handler's constant makes that conjunct true, the `if` body runs on it. If
that body removes files or directories (`shutil.rmtree`, `os.remove`, `os.unlink`, `os.rmdir`,
`os.removedirs`, a `.unlink()`, `.rmdir()` or `.rmtree()` method) whose target reads no name the
check was handed (the check asks about something else than what is removed), the check guards a
deletion and answers "go ahead" when it cannot tell: the deletion runs on exactly the machines
where the check is broken (optimum-neuron's lock clean-up, which deletes a running compiler's lock files when
`pgrep` is not installed). `broad_except` reports it as `P2` `broad-except.fails-open`, before the
width of the handler is read: the harm is the answer, whatever the handler catches.

The criterion is general: it reads the fallback's use (a removal the answer lets through), not a
name or a project; a deletion cannot be undone, so a check in front of one has to fail closed.
Near misses, silent: the same handler answering the value that skips the removal (fails closed), a
check whose `if` body only reports or computes, a check about the removed thing itself (`if not
is_valid(path): shutil.rmtree(path)`: a cache that cannot be read is removed on purpose, the failure
says the thing is broken), and a guard read only as an early exit (`if running: return` before the
removal), which this class does not follow.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import innermost_function, is_logging_call

_REMOVAL_CALLS = frozenset(["shutil.rmtree", "os.remove", "os.unlink", "os.rmdir", "os.removedirs"])
_REMOVAL_METHODS = frozenset(["unlink", "rmdir", "rmtree"])


def _answer(handler: ast.ExceptHandler) -> bool | None:
    """The boolean constant the handler returns after logging calls, or None."""
    if not handler.body:
        return None
    *logs, last = handler.body
    if not all(isinstance(stmt, ast.Expr) and is_logging_call(stmt.value) for stmt in logs):
        return None
    if isinstance(last, ast.Return) and isinstance(last.value, ast.Constant) and isinstance(last.value.value, bool):
        return last.value.value
    return None


def _calls_function(expr: ast.AST, name: str) -> bool:
    """`expr` is a call of `name`, `self.name` or `cls.name`."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    if isinstance(func, ast.Name):
        return func.id == name
    return (
        isinstance(func, ast.Attribute)
        and func.attr == name
        and isinstance(func.value, ast.Name)
        and func.value.id in ("self", "cls")
    )


def _conjuncts(test: ast.expr) -> list[tuple[ast.expr, bool]]:
    """(operand, negated) for the test itself or each operand of its top-level `and`."""
    operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    found = []
    for operand in operands:
        if isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.Not):
            found.append((operand.operand, True))
        else:
            found.append((operand, False))
    return found


def _names(nodes: list[ast.expr]) -> set[str]:
    return {sub.id for node in nodes for sub in pysource.walk(node) if isinstance(sub, ast.Name)}


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(keyword.value for keyword in call.keywords)]


def _removal(body: list[ast.stmt], asked: set[str]) -> str | None:
    """The first call in `body` that removes files or directories, as written, whose target reads
    none of the names in `asked` (the names the check was handed)."""
    for stmt in body:
        for sub in pysource.walk(stmt):
            if not isinstance(sub, ast.Call):
                continue
            text = ast.unparse(sub.func)
            method = isinstance(sub.func, ast.Attribute) and sub.func.attr in _REMOVAL_METHODS
            if text not in _REMOVAL_CALLS and not method:
                continue
            target = [*_arguments(sub), *([sub.func.value] if isinstance(sub.func, ast.Attribute) else [])]
            if not _names(target) & asked:
                return text
    return None


def _bound_names(tree: ast.Module, name: str) -> list[tuple[str, ast.AST, set[str]]]:
    """(the plain name, its function or the module, the names the call is handed) for each `target =
    name(...)` of the file."""
    found: list[tuple[str, ast.AST, set[str]]] = []
    for stmt in pysource.nodes(tree):
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and _calls_function(stmt.value, name)
        ):
            scope = innermost_function(tree, stmt) or tree
            found.append((stmt.targets[0].id, scope, _names(_arguments(stmt.value))))
    return found


def fails_open(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> tuple[str, str] | None:
    """(the checking function, the removal it lets through) when the handler's boolean answer makes
    a conjunct of an `if` true whose body removes files (see the module docstring); None otherwise."""
    answer = _answer(handler)
    if answer is None:
        return None
    function = innermost_function(tree, node)
    if function is None:
        return None
    holders = _bound_names(tree, function.name)
    for stmt in pysource.nodes(tree):
        if not isinstance(stmt, ast.If):
            continue
        for operand, negated in _conjuncts(stmt.test):
            if answer is negated:
                continue  # the handler's answer makes this conjunct false: the body is skipped
            if isinstance(operand, ast.Call) and _calls_function(operand, function.name):
                asked: set[str] | None = _names(_arguments(operand))
            else:
                asked = next(
                    (
                        handed
                        for bound, scope, handed in holders
                        if isinstance(operand, ast.Name)
                        and operand.id == bound
                        and scope in (tree, innermost_function(tree, stmt))
                    ),
                    None,
                )
            if asked is None:
                continue  # not the check
            removal = _removal(stmt.body, asked)
            if removal is not None:
                return function.name, removal
    return None
