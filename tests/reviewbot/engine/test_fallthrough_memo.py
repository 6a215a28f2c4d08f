"""`fallthrough.unbound_reads` reads each statement's bound names from a memo built bottom-up
(`_Stores`) and each function's `global`/`nonlocal` names from one pass over the module: both give
what reading every statement whole gives, at every depth, on nested blocks of every kind."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from reviewbot import engine, pysource
from reviewbot.rules import fallthrough

NESTED = textwrap.dedent(
    """
    import os

    def outer(items, flag):
        total = 0
        for item in items:
            if flag:
                with open(item) as fh, os.scandir(".") as (first, *rest):
                    try:
                        data, [x, *y] = fh.read(), (1, 2, 3)
                        seen = [z for z in data if (w := z)]
                    except* ValueError as exc:
                        handled = exc
                    else:
                        kept: int = 1
                    finally:
                        total += 1
            match item:
                case {"k": [first, *others]} if (g := first):
                    matched = first
                case _:
                    pass
            while total:
                def inner():
                    global counter
                    counter = 1
                    class Local:
                        nonlocal_box = lambda q: (q := 2)
                    return Local
                total -= 1
            else:
                after = total
        try:
            value = items[0]
        except Exception:
            pass
        return value

    def other():
        def deeper():
            def deepest():
                nonlocal marker
                marker = 2
            return deepest
        marker = 1
        return deeper
    """
)


@pytest.mark.parametrize("name", ["nested", "broad_except", "engine"])
def test_the_memo_gives_every_statement_s_names_as_reading_it_whole(name: str) -> None:
    root = Path(engine.__file__).parent
    source = {
        "nested": NESTED,
        "broad_except": (root / "rules" / "broad_except.py").read_text(),
        "engine": (root / "engine.py").read_text(),
    }[name]
    tree = ast.parse(source)
    stores = fallthrough._Stores()
    statements = list(pysource.statements(tree))
    assert len(statements) > 20
    for stmt in reversed(statements):  # inner statements first: outer ones then read the memo
        assert fallthrough._bound(stmt, stores) == fallthrough._bound(stmt), ast.unparse(stmt)[:80]


def test_global_and_nonlocal_names_count_for_every_enclosing_function() -> None:
    tree = ast.parse(NESTED)
    declared = fallthrough._declared_outside(tree)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        expected = {name for n in ast.walk(function) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        assert declared[id(function)] == expected, function.name
    by_name = {f.name: declared[id(f)] for f in functions}
    assert by_name["outer"] == {"counter"} and by_name["other"] == {"marker"} and by_name["deepest"] == {"marker"}


def test_unbound_reads_still_finds_the_name_only_the_try_binds() -> None:
    tree = ast.parse(NESTED)
    tries = {n.lineno: id(n) for n in ast.walk(tree) if isinstance(n, ast.Try)}
    reads = fallthrough.unbound_reads(tree)
    last_try = max(tries)
    assert [(r.name, r.line) for r in reads[tries[last_try]]] == [("value", last_try + 4)]
