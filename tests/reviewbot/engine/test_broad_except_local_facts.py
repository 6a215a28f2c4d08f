"""broad-except reads the facts around a try from the definitions holding the tries it reads
(`_FileFacts`: the module-level function, or the method through its classes): for each try the
answers are those read from the whole file, and a try in module-level code reads the whole file."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from reviewbot import engine
from reviewbot.rules import broad_except, common, fallthrough, handler_reach

SAMPLE = textwrap.dedent(
    '''
    import atexit
    import logging

    logger = logging.getLogger(__name__)
    counter = 0


    def cleanup():
        try:
            close_all()
        except Exception:
            pass


    atexit.register(cleanup)


    class Outer:
        """Holds things."""

        try:
            import yaml
        except Exception:
            yaml = None

        class Inner:
            def __exit__(self, *exc):
                try:
                    self.release()
                except Exception:
                    pass

            def warn_version(self):
                try:
                    import numpy
                    version = numpy.__version__
                except Exception:
                    pass
                if version < "2":
                    logger.warning("old numpy %s", version)

        def load(self, paths):
            """Falls back to the default if loading fails."""
            for path in paths:
                try:
                    value = open(path).read()
                    break
                except OSError:
                    continue
            else:
                raise FileNotFoundError(paths)
            try:
                parsed = int(value)
            except Exception:
                return self.default
            finally:
                try:
                    self.close()
                except Exception:
                    pass
            return parsed


    try:
        SETTINGS = open("settings").read()
    except Exception:
        SETTINGS = ""
    print(SETTINGS)
    '''
)


def _answers(facts: broad_except._FileFacts, node: ast.Try) -> tuple:
    handlers = [id(h) for h in node.handlers]
    return (
        id(node) in facts.alternatives,
        facts.following.get(id(node)),
        id(node) in facts.exit_tries,
        [h in facts.documented for h in handlers],
        facts.diagnostic_tries.get(id(node)),
        facts.unbound_at(node),
    )


@pytest.mark.parametrize("name", ["sample", "worker", "sandbox", "artifacts"])
def test_each_try_gets_the_whole_file_s_answers_from_its_definition(name: str) -> None:
    root = Path(engine.__file__).parent
    source = {
        "sample": SAMPLE,
        "worker": (root / "service" / "worker.py").read_text(),
        "sandbox": (root / "sandbox.py").read_text(),
        "artifacts": (root / "gpu_dispatch" / "artifacts.py").read_text(),
    }[name]
    tree = ast.parse(source)
    tries = [n for n in ast.walk(tree) if isinstance(n, ast.Try)]
    assert len(tries) >= 5
    whole = broad_except._FileFacts(tree, [])
    whole._local = tree
    for node in tries:
        alone = broad_except._FileFacts(tree, [node])
        assert _answers(alone, node) == _answers(whole, node), ast.unparse(node)[:80]


def test_the_method_is_the_unit_and_module_level_code_reads_the_whole_file() -> None:
    tree = ast.parse(SAMPLE)
    tries = {n.lineno: n for n in ast.walk(tree) if isinstance(n, ast.Try)}
    by_text = {ast.unparse(n.body[0])[:20]: n for n in tries.values()}
    exit_try = by_text["self.release()"]
    assert [s.name for s in broad_except._FileFacts(tree, [exit_try])._local.body] == ["__exit__"]
    class_body_try = by_text["import yaml"]
    assert [s.name for s in broad_except._FileFacts(tree, [class_body_try])._local.body] == ["Outer"]
    module_try = by_text["SETTINGS = open('set"]
    assert broad_except._FileFacts(tree, [exit_try, module_try])._local is tree
    # the registered callback stays a teardown function though only its definition is read
    cleanup_try = by_text["close_all()"]
    assert id(cleanup_try) in broad_except._FileFacts(tree, [cleanup_try]).exit_tries
    assert fallthrough.unbound_reads(tree)[id(by_text["import numpy"])][0].name == "version"


DISPLAY = textwrap.dedent(
    """
    class Box:
        def __repr__(self):
            return f"Box({self._shown()})"

        def _shown(self):
            try:
                return describe(self.value)
            except Exception:
                return "?"


    def describe(value):
        return str(value)


    def wheel_tag():
        try:
            return compute_tag()
        except Exception:
            return "unknown"


    def check():
        if not available():
            raise RuntimeError(f"no wheel for {wheel_tag()}")
        raise RuntimeError("unsupported")
    """
)


@pytest.mark.parametrize("name", ["display", "sample", "worker", "sandbox", "artifacts"])
def test_display_only_names_are_those_of_both_call_graphs(name: str) -> None:
    root = Path(engine.__file__).parent
    source = {
        "display": DISPLAY,
        "sample": SAMPLE,
        "worker": (root / "service" / "worker.py").read_text(),
        "sandbox": (root / "sandbox.py").read_text(),
        "artifacts": (root / "gpu_dispatch" / "artifacts.py").read_text(),
    }[name]
    tree = ast.parse(source)
    expected = broad_except._display_functions(tree) | broad_except._error_wording_functions(tree)
    names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    only = broad_except._DisplayOnly(tree)
    assert {name for name in names if name in only} == names & expected
    if name == "display":
        assert {"_shown", "describe", "wheel_tag"} <= names & expected


GUARDED = textwrap.dedent(
    """
    import os

    if os.environ.get("A"):
        try:
            setup()
        except Exception:
            pass
    elif os.name == "nt":
        try:
            setup()
        except Exception:
            pass
    else:
        for attempt in range(3):
            try:
                setup()
            except Exception:
                pass
            finally:
                if attempt:
                    try:
                        teardown()
                    except OSError as error:
                        log(error)


    def handle(command):
        match command:
            case "run":
                try:
                    run()
                except Exception:
                    try:
                        setup()
                    except Exception:
                        pass
            case _:
                with lock:
                    if ready:
                        try:
                            setup()
                        except Exception:
                            pass
    """
)


def _guarded_by_walking(tree: ast.AST) -> dict[str, list[handler_reach.Guards]]:
    """The handler keys and guards of every try, from a walk of every node (round 12's reading)."""
    found: dict[str, list[handler_reach.Guards]] = {}

    def visit(node: ast.AST, guards: handler_reach.Guards) -> None:
        if isinstance(node, (ast.Try, ast.TryStar)):
            for handler in node.handlers:
                found.setdefault(handler_reach.handler_key(node, handler), []).append(guards)
        if isinstance(node, ast.If):
            test = ast.dump(node.test)
            for child in node.body:
                visit(child, guards | {(test, False)})
            for child in node.orelse:
                visit(child, guards | {(test, True)})
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guards)

    visit(tree, frozenset())
    return found


def _sources() -> list[str]:
    root = Path(engine.__file__).parent
    return [SAMPLE, GUARDED, *((root / name).read_text() for name in ("service/worker.py", "sandbox.py", "engine.py"))]


@pytest.mark.parametrize("index", range(5))
def test_guarded_handlers_are_those_of_a_walk_of_every_node(index: int) -> None:
    tree = ast.parse(_sources()[index])
    expected = _guarded_by_walking(tree)
    got = handler_reach._guarded_handlers((("m.py", tree),))
    assert set(got) == set(expected) and all(sorted(got[k], key=sorted) == sorted(expected[k], key=sorted) for k in got)
    # each handler's occurrences found by comparing nodes are those of its key
    handlers = handler_reach._tree_guarded_handlers(tree)
    for occurrences in handlers.by_shape.values():
        for node, handler, _ in occurrences:
            found = handlers.occurrences(node, handler)
            assert sorted(found, key=sorted) == sorted(expected[handler_reach.handler_key(node, handler)], key=sorted)


def test_nodes_compare_as_their_dumps() -> None:
    texts = ["x = 1", "x = 1.0", "x = True", "x = -0.0", "x = 0.0", "x = 'a'", "x = b'a'", "x: int = 1", "x: int"]
    texts += ["f(a, b=1)", "f(a, b=2)", "f(a, c=1)", "f(*a)", "global x", "global y", "x = y = 1", "(x, y) = 1"]
    nodes = [ast.parse(text).body[0] for text in texts]
    for first in nodes:
        for second in nodes:
            assert common.same_node(first, second) == (ast.dump(first) == ast.dump(second))
    assert common.same_node(ast.parse("x = 1\n\n").body, ast.parse("x = (\n    1\n)").body)


def test_guarded_handlers_are_read_once_per_tree_and_two_revisions_are_not_confused() -> None:
    base = ast.parse(GUARDED)
    head = ast.parse(GUARDED.replace('os.name == "nt"', 'os.name == "posix"'))
    first = handler_reach._guarded_handlers((("m.py", base), ("m.py", head)))
    memo = handler_reach._tree_guarded_handlers.memo
    assert base in memo and head in memo
    assert handler_reach._guarded_handlers((("m.py", base), ("m.py", head))) == first
    # each tree read alone by a walk of every node gives the same occurrences, base's first
    alone = [_guarded_by_walking(tree) for tree in (base, head)]
    assert {key for part in alone for key in part} == set(first)
    assert all(first[key] == [g for part in alone for g in part.get(key, [])] for key in first)
    # the `setup()` handlers in the changed `elif` and in its `else:` have guards only the head has
    (node,) = ast.parse("try:\n    setup()\nexcept Exception:\n    pass\n").body
    assert isinstance(node, ast.Try)
    key = handler_reach.handler_key(node, node.handlers[0])
    assert len(set(alone[1][key]) - set(alone[0][key])) == 2


def _scope_by_walking(tree: ast.Module, node: ast.stmt) -> list[ast.stmt] | None:
    if any(stmt is node for stmt in tree.body):
        return tree.body
    for scope in ast.walk(tree):
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(stmt is node for stmt in scope.body):
            return scope.body
    return None


def _enclosing_by_walking(tree: ast.Module, node: ast.stmt) -> str | None:
    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        pending: list[ast.AST] = list(function.body)
        while pending:
            current = pending.pop()
            if current is node:
                return function.name
            if not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                pending.extend(ast.iter_child_nodes(current))
    return None


@pytest.mark.parametrize("index", range(5))
def test_scope_and_enclosing_function_are_those_of_a_walk(index: int) -> None:
    tree = ast.parse(_sources()[index])
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    assert any(handler_reach.enclosing_function(tree, stmt) for stmt in statements)
    for stmt in statements:
        assert handler_reach._scope_of(tree, stmt) is _scope_by_walking(tree, stmt), ast.unparse(stmt)[:60]
        assert handler_reach.enclosing_function(tree, stmt) == _enclosing_by_walking(tree, stmt)


def _error_wording_by_scope_lists(tree: ast.Module) -> frozenset[str]:
    """`broad_except._error_wording_functions` as round 11 wrote it: each statement's own scope
    listed whole (`_own_scope`) before its calls are read."""
    uses: dict[str, list[tuple[str, bool]]] = {}
    defined: set[str] = set()

    def record(node: ast.AST, within: str, on_error_path: bool) -> None:
        for sub in broad_except._own_scope(node):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub is not node:
                visit_function(sub)
            elif isinstance(sub, ast.Call):
                func = sub.func
                if isinstance(func, ast.Name):
                    uses.setdefault(func.id, []).append((within, on_error_path))
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                    uses.setdefault(func.attr, []).append((within, on_error_path))

    def visit_function(function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        defined.add(function.name)
        tail = len(function.body)
        if isinstance(function.body[-1], ast.Raise):
            tail = 0
            for index, stmt in enumerate(function.body):
                if any(isinstance(sub, ast.Return) for sub in broad_except._own_scope(stmt)):
                    tail = index + 1
        for index, stmt in enumerate(function.body):
            record(stmt, function.name, index >= tail)

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit_function(stmt)
        else:
            record(stmt, "<module>", False)
    wording: set[str] = set()
    grown = True
    while grown:
        grown = False
        for name in defined - wording:
            calls = uses.get(name, [])
            if calls and all(on_error_path or within in wording for within, on_error_path in calls):
                wording.add(name)
                grown = True
    return frozenset(wording)


@pytest.mark.parametrize("index", range(6))
def test_error_wording_functions_are_those_of_whole_scope_lists(index: int) -> None:
    tree = ast.parse([DISPLAY, *_sources()][index])
    assert broad_except._error_wording_functions(tree) == _error_wording_by_scope_lists(tree)
    if index == 0:
        assert "wheel_tag" in broad_except._error_wording_functions(tree)
