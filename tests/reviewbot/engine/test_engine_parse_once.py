"""What keeps the static review of a large repository cheap: one review parses each distinct source
text once (`pysource.Trees`, shared by the cache-key closure at both revisions, the exception
index and the file rules), `pysource.walk` is `ast.walk` in the same order, the closure digest
still ignores docstrings at any depth and leaves the tree as it was, `pysource.nodes` keeps one
walk per tree object, the rules run on a file's base version only when a head finding needs the
comparison and there only under the compared names, broad-except reads only the tries the change
touches, and the static stages pause the cyclic garbage collector (the trees are acyclic) and
restore it."""

from __future__ import annotations

import ast
import gc
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest
from engine_gitrepos import KEYED_CACHE_KEY, Repo, keyed_repo, sub

from reviewbot import engine, pysource
from reviewbot.engine import run_review
from reviewbot.findings import Finding
from reviewbot.keychange.closure import digest
from reviewbot.rules import FileContext, FileRule, broad_except

# statements that hold others in every kind of statement list: bodies, orelse, handlers, finalbody, match cases
NESTED = '''
"""Module docstring."""
import contextlib


class Outer:
    """Outer."""

    def method(self, value):
        """Method."""
        try:
            def in_try():
                """In a try body."""
                return 1
        except* ValueError:
            def in_handler():
                """In an except* handler."""
        else:
            pass
        finally:
            async def in_finally():
                """In a finally."""
                async with contextlib.nullcontext():
                    return [x async for x in value]
        match value:
            case {"k": [first, *rest]} if first:
                def in_case():
                    """In a match case."""
                    return lambda y: (y := y + 1)
        while value:
            class InLoop:
                """In a loop body."""
        else:
            return f"{value!r:>{len(value)}}"
'''


def test_trees_parse_each_text_once_and_remember_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: Counter[str] = Counter()
    real = pysource.parse

    def counting(source: str, filename: str = "<unknown>") -> ast.Module | None:
        parsed[source] += 1
        return real(source, filename)

    monkeypatch.setattr(pysource, "parse", counting)
    trees = pysource.Trees()
    first = trees.parse("x = 1\n", filename="a.py")
    assert first is not None and trees.parse("x = 1\n", filename="b.py") is first
    assert trees.parse("x = (\n") is None and trees.parse("x = (\n") is None
    assert trees.parse("x = 2\n") is not first
    assert parsed == Counter({"x = 1\n": 1, "x = (\n": 1, "x = 2\n": 1})
    assert len(trees) == 3


def test_open_trees_pause_the_cyclic_gc_and_drop_their_trees_on_exit() -> None:
    assert gc.isenabled()
    with pysource.Trees() as trees:
        assert not gc.isenabled()
        tree = trees.parse("x = 1\n")
        assert trees.parse("x = 1\n") is tree and len(trees) == 1
        with pysource.Trees():
            pass
        assert not gc.isenabled()  # an inner block leaves the collector off for the outer one
    assert gc.isenabled() and len(trees) == 0
    gc.disable()
    try:
        with pysource.Trees():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_blocks_of_two_threads_restore_the_collector_only_when_both_are_closed() -> None:
    # two job threads of one worker: A opens, B opens, A closes first, then B
    assert gc.isenabled()
    first, second = pysource.Trees(), pysource.Trees()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # B's review still holds its trees
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_blocks_in_real_threads_leave_the_collector_as_they_found_it() -> None:
    inside = threading.Barrier(4)
    done = threading.Barrier(4)

    def review() -> None:
        with pysource.Trees() as trees:
            trees.parse("x = 1\n")
            inside.wait(timeout=30)
        done.wait(timeout=30)

    threads = [threading.Thread(target=review) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert gc.isenabled()


@pytest.mark.parametrize("name", ["nested", "engine", "broad_except"])
def test_walk_yields_the_nodes_of_ast_walk_in_its_order(name: str) -> None:
    root = Path(engine.__file__).parent
    source = {
        "nested": NESTED,
        "engine": (root / "engine.py").read_text(),
        "broad_except": (root / "rules" / "broad_except.py").read_text(),
    }[name]
    tree = ast.parse(source)
    expected = list(ast.walk(tree))
    got = list(pysource.walk(tree))
    assert len(got) == len(expected) > 50
    assert all(a is b for a, b in zip(got, expected, strict=True))


def test_nodes_are_walk_once_per_tree_object_and_two_revisions_are_not_confused() -> None:
    base = ast.parse("def f():\n    return 1\n")
    head = ast.parse("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    assert pysource.nodes(base) == pysource.nodes(base)
    assert all(a is b for a, b in zip(pysource.nodes(base), pysource.walk(base), strict=True))
    # the same text parsed again is another tree: its own nodes, never the first tree's
    again = ast.parse("def f():\n    return 1\n")
    assert not set(map(id, pysource.nodes(again))) & set(map(id, pysource.nodes(base)))
    names = {n.name for n in pysource.nodes(head) if isinstance(n, ast.FunctionDef)}
    assert names == {"f", "g"}
    assert {n.name for n in pysource.nodes(base) if isinstance(n, ast.FunctionDef)} == {"f"}
    # an entry lives as long as its tree (a weak key): dropping the tree drops it
    entries = len(pysource._below.memo)
    del again
    gc.collect()
    assert len(pysource._below.memo) == entries - 1


def test_digest_ignores_docstrings_in_every_statement_list_and_restores_the_tree() -> None:
    tree = ast.parse(NESTED)
    before = ast.dump(tree, include_attributes=True)
    outer = tree.body[2]
    assert isinstance(outer, ast.ClassDef)
    stripped = ast.parse(NESTED)
    for node in ast.walk(stripped):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                node.body = node.body[1:] or [ast.Pass()]
    # every docstring (seven nested ones among them) is out of the digest, and nothing else is
    assert digest(outer) == digest(stripped.body[1])
    assert digest(outer) != digest(ast.parse(NESTED.replace("return 1", "return 2")).body[2])
    assert ast.dump(tree, include_attributes=True) == before


def test_a_review_parses_each_distinct_source_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = keyed_repo(
        tmp_path / "r",
        {
            "pkg/errors.py": "class CacheMissError(RuntimeError):\n    pass\n",
            "pkg/loader.py": textwrap.dedent(
                """
                def report(error):
                    raise RuntimeError(str(error))


                def load(path):
                    try:
                        return open(path).read()
                    except Exception as error:
                        report(error)
                """
            ),
        },
    )
    repo.branch("feature")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY,
                '        "input_placements": _h(placements),\n',
                '        "input_placements": _h(placements),\n        "graph_signature": _h(config.mode),\n',
            ),
            # the handler's line changes: the rules read it (an untouched one is skipped)
            "pkg/loader.py": sub((repo.path / "pkg/loader.py").read_text(), "report(error)\n", "report(str(error))\n")
            + "\n\ndef size(path):\n    return len(load(path))\n",
        },
        "key: add a factor; loader: size",
    )
    parsed: Counter[str] = Counter()
    real = pysource.parse

    def counting(source: str, filename: str = "<unknown>") -> ast.Module | None:
        parsed[source] += 1
        return real(source, filename)

    monkeypatch.setattr(pysource, "parse", counting)
    run_review(repo.path, "main", "feature", suites="none")
    config = (repo.path / "pkg/config.py").read_text()
    errors = (repo.path / "pkg/errors.py").read_text()
    # the config module is read by the closure at base and at head and by the exception index; the
    # errors module by the exception index only (the handler's last call asks whether `report` raises)
    assert parsed[config] == 1 and parsed[errors] == 1
    assert max(parsed.values()) == 1, [text.splitlines()[:2] for text, n in parsed.items() if n > 1]


def _recording_rules(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the revision of every context the file rules run on."""
    seen: list[str] = []

    def recording(rule: FileRule) -> FileRule:
        def run(ctx: FileContext) -> list[Finding]:
            seen.append(ctx.revision)
            return rule(ctx)

        return run

    monkeypatch.setattr(engine, "FILE_RULES", tuple(recording(rule) for rule in engine.FILE_RULES))
    return seen


LOADER = """
def load(path):
    try:
        data = open(path).read()
        return data
    except Exception:
        return None
"""


def test_rules_run_on_the_base_only_when_a_head_finding_needs_the_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/loader.py": LOADER}, "base")
    repo.branch("new-handler")
    # the old handler's lines are untouched; the new one starts on an added line
    added = sub(LOADER, "return data\n", "return data.strip()\n")
    repo.commit(
        {
            "pkg/loader.py": added
            + "\n\ndef save(path, data):\n    try:\n        open(path, 'w').write(data)\n    except Exception:\n        return False\n    return True\n"
        }
    )
    repo.branch("handler-comment", "main")
    # the old handler's body changes, its `except` line does not: only the base can tell it is not new
    # (a changed body, not only a comment: an unchanged try and handler are moved code, round 12)
    repo.commit({"pkg/loader.py": sub(LOADER, "        return None\n", "        data = None\n        return data\n")})
    seen = _recording_rules(monkeypatch)

    findings = run_review(repo.path, "main", "new-handler", suites="none").findings
    assert [(f.rule, f.qualname) for f in findings] == [("broad-except", "save")]
    assert set(seen) == {"head"}

    seen.clear()
    findings = run_review(repo.path, "main", "handler-comment", suites="none").findings
    assert findings == []
    assert seen.count("base") == len(engine.FILE_RULES) and seen.count("head") == len(engine.FILE_RULES)


TWO_LOADERS = """
def load(path):
    try:
        return open(path).read()
    except Exception:
        return None


def load_bytes(path):
    try:
        return open(path, "rb").read()
    except Exception:
        return b""


try:
    SETTINGS = load("settings.txt").upper()
except Exception:
    SETTINGS = ""
"""


def test_the_base_is_read_under_the_compared_names_only_and_a_module_level_name_reads_it_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/loaders.py": TWO_LOADERS}, "base")
    # `load`'s handler body changes (code: an unchanged try and handler are moved code, round 12),
    # its `except` line does not: compared with the base under `load`
    repo.branch("in-load")
    repo.commit(
        {"pkg/loaders.py": sub(TWO_LOADERS, "        return None\n", "        data = None\n        return data\n")}
    )
    # the module-level handler's body changes: compared under the module's name, the whole base read
    repo.branch("at-module", "main")
    repo.commit({"pkg/loaders.py": sub(TWO_LOADERS, '    SETTINGS = ""\n', "    SETTINGS = str()\n")})
    seen: list[tuple[str, list[int]]] = []
    real = broad_except.check

    def recording(ctx: FileContext) -> list[Finding]:
        tries = sorted(n.lineno for n in ast.walk(ctx.tree) if isinstance(n, ast.Try))
        seen.append((ctx.revision, [line for line in tries if ctx.focus(line, line + 3)]))
        return real(ctx)

    monkeypatch.setattr(engine, "FILE_RULES", (recording, *engine.FILE_RULES[1:]))
    # the head reads the touched try only, the base the tries of `load` only; the base finding there
    # has the head's fingerprint, so nothing is new
    assert run_review(repo.path, "main", "in-load", suites="none").findings == []
    assert seen == [("head", [2]), ("base", [2])]

    seen.clear()
    assert run_review(repo.path, "main", "at-module", suites="none").findings == []
    assert seen == [("head", [15]), ("base", [2, 9, 15])]


def test_the_static_stages_pause_the_cyclic_gc_and_restore_its_state(tmp_path: Path) -> None:
    repo = keyed_repo(tmp_path / "r")
    repo.branch("feature")
    repo.commit({"pkg/cache_key.py": sub(KEYED_CACHE_KEY, "_h(placements)", "_h(list(placements))")}, "key")
    lines: list[tuple[str, bool]] = []

    def progress(line: str) -> None:
        lines.append((line, gc.isenabled()))

    assert gc.isenabled()
    run_review(repo.path, "main", "feature", suites="none", progress=progress)
    assert gc.isenabled()
    static = [enabled for line, enabled in lines if line.startswith(("cache key:", "static rules:"))]
    assert static and not any(static), lines
    assert [enabled for line, enabled in lines if line.startswith(("diff ", "review done"))] == [True, True], lines
    gc.disable()
    try:
        run_review(repo.path, "main", "feature", suites="none")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_broad_except_reads_no_file_facts_when_the_change_touches_no_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/loaders.py": TWO_LOADERS}, "base")
    repo.branch("no-try")
    repo.commit({"pkg/loaders.py": TWO_LOADERS + "\n\ndef size(path):\n    return len(load(path))\n"})
    repo.branch("one-try", "main")
    repo.commit({"pkg/loaders.py": sub(TWO_LOADERS, 'return b""\n', 'return b""  # empty\n')})
    reads: list[int] = []
    real = broad_except._loop_tries

    def counting(tree: ast.AST) -> set[int]:
        reads.append(1)
        return real(tree)

    monkeypatch.setattr(broad_except, "_loop_tries", counting)
    assert run_review(repo.path, "main", "no-try", suites="none").findings == []
    assert reads == []
    run_review(repo.path, "main", "one-try", suites="none")
    assert reads  # the touched try is read, with the file's facts
