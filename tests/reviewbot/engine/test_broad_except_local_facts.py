"""broad-except reads the facts around a try from the definitions holding the tries it reads
(`_FileFacts`: the module-level function, or the method through its classes): for each try the
answers are those read from the whole file, and a try in module-level code reads the whole file."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from reviewbot import engine
from reviewbot.rules import broad_except, fallthrough, handler_reach

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


def test_guarded_handlers_are_read_once_per_tree_and_two_revisions_are_not_confused() -> None:
    base = ast.parse(SAMPLE)
    head = ast.parse(SAMPLE.replace('SETTINGS = ""', 'SETTINGS = "none"'))
    first = handler_reach._guarded_handlers((("m.py", base), ("m.py", head)))
    memo = handler_reach._tree_guarded_handlers.memo
    assert base in memo and head in memo
    assert handler_reach._guarded_handlers((("m.py", base), ("m.py", head))) == first
    # the fresh reading of each tree alone, in the same order, is the same answer
    alone = [handler_reach._tree_guarded_handlers.fresh(tree) for tree in (base, head)]
    assert {key for part in alone for key in part} == set(first)
    assert all(first[key] == [g for part in alone for g in part.get(key, [])] for key in first)
    # a key only the head has stays the head's (the changed module-level handler)
    assert [key for key in alone[1] if key not in alone[0]] and all(
        len(first[k]) == 1 for k in alone[1] if k not in alone[0]
    )
