"""reviewbot.exception_index on a real git repository in a temp dir: the working tree and a revision."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot.exception_index import index_exceptions, index_revision
from reviewbot.gitrepo import GitRepo

FILES = {
    "pkg/__init__.py": "",
    "pkg/errors.py": """
        import torch


        class CacheError(RuntimeError):
            pass


        class CacheMissError(CacheError):
            '''A miss: compile and store.'''


        class BadConfig(ValueError, KeyError):
            pass


        class TorchOnly(torch.OutOfMemoryError):
            pass


        class NotAnError:
            pass


        class Outer(Exception):
            class Inner(LookupError):
                pass


        def factory():
            class Local(RuntimeError):
                pass

            return Local
        """,
    "pkg/compile/__init__.py": """
        from pkg.errors import CacheError


        class CompileUnsupported(CacheError):
            pass


        class Cycle(Loop):
            pass


        class Loop(Cycle):
            pass


        def load(fn):
            try:
                return fn()
            except CacheError:
                return None
            except (KeyError, errors.BadConfig) as error:
                raise error


        def fail(kind):
            if kind:
                raise CompileUnsupported(kind)
            raise errors.CacheMissError
        """,
    "pkg/calls.py": """
        def leaf():
            return 1


        def mid():
            return leaf() + 1


        def top(pool):
            return pool.submit(mid)


        class Worker:
            def run(self):
                return self.mid()


        def other():
            return 2
        """,
    "pkg/broken.py": "class Broken(RuntimeError:\n",
    ".venv/lib/vendored.py": "class Vendored(RuntimeError):\n    pass\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "repo")
    r.commit(FILES, "exceptions")
    return r


def _names(classes) -> list[str]:
    return [c.full_name for c in classes]


def test_runtime_error_subclasses_are_transitive_and_named_with_their_location(repo: Repo) -> None:
    index = index_exceptions(repo.path)
    assert _names(index.subclasses_of("RuntimeError")) == [
        "pkg.compile.CompileUnsupported",
        "pkg.errors.CacheError",
        "pkg.errors.CacheMissError",
    ]
    miss = index.get("CacheMissError")
    assert miss is not None
    assert (miss.module, miss.path, miss.line, miss.bases) == ("pkg.errors", "pkg/errors.py", 8, ("CacheError",))
    unsupported = index.get("pkg.compile.CompileUnsupported")
    assert unsupported is not None and unsupported.module == "pkg.compile" and unsupported.path.endswith("__init__.py")


def test_builtin_bases_are_followed_through_their_mro(repo: Repo) -> None:
    index = index_exceptions(repo.path)
    everything = _names(index.subclasses_of("Exception"))
    # in path, then line order; everything except third-party-only, local, cyclic, unparsable and vendored classes
    assert everything == [
        "pkg.compile.CompileUnsupported",
        "pkg.errors.CacheError",
        "pkg.errors.CacheMissError",
        "pkg.errors.BadConfig",
        "pkg.errors.Outer",
        "pkg.errors.Outer.Inner",
    ]
    assert _names(index.subclasses_of("LookupError")) == ["pkg.errors.BadConfig", "pkg.errors.Outer.Inner"]
    assert _names(index.subclasses_of("builtins.KeyError")) == ["pkg.errors.BadConfig"]
    assert index.subclasses_of("OSError") == []
    assert index.subclasses_of("NoSuchName") == []
    assert len(index) == 6


def test_repository_classes_as_caught_type(repo: Repo) -> None:
    index = index_exceptions(repo.path)
    assert _names(index.subclasses_of("CacheError")) == ["pkg.compile.CompileUnsupported", "pkg.errors.CacheMissError"]
    assert index.subclasses_of("CacheMissError") == []
    outer = index.get("pkg.errors.Outer")
    assert outer is not None and _names(index.subclasses_of(outer.full_name)) == []
    with pytest.raises(ValueError):
        index.subclasses_of("")


def test_ancestors_and_except_clauses(repo: Repo) -> None:
    index = index_exceptions(repo.path)
    assert _names(index.ancestors_of("CompileUnsupported")) == ["pkg.errors.CacheError"]
    assert _names(index.ancestors_of("CacheMissError")) == ["pkg.errors.CacheError"]
    assert index.ancestors_of("RuntimeError") == []
    [site] = index.handlers_of("CacheError")
    assert (site.path, site.line, site.caught, site.reraises) == ("pkg/compile/__init__.py", 19, ("CacheError",), False)
    [reraising] = index.handlers_of("pkg.errors.BadConfig")
    assert reraising.caught == ("KeyError", "BadConfig") and reraising.reraises
    assert index.handlers_of("CacheMissError") == []  # a clause naming only its base is not listed
    assert index.raised_in("CompileUnsupported") == index.raised_in("pkg.errors.CacheMissError") == ["pkg.compile"]
    assert index.raised_in("CacheError") == []


def test_revision_index_reads_git_not_the_working_tree(repo: Repo) -> None:
    first = repo.sha("HEAD")
    repo.commit({"pkg/more.py": "from pkg.errors import CacheError\n\nclass Evicted(CacheError):\n    pass\n"})
    (repo.path / "pkg" / "uncommitted.py").write_text("class Dirty(RuntimeError):\n    pass\n")
    with GitRepo(repo.path) as git:
        at_first = index_revision(git, first)
        at_head = index_revision(git, "HEAD")
    assert "pkg.more.Evicted" not in _names(at_first.subclasses_of("RuntimeError"))
    assert "pkg.more.Evicted" in _names(at_head.subclasses_of("RuntimeError"))
    assert "pkg.uncommitted.Dirty" not in _names(at_head.subclasses_of("RuntimeError"))
    assert "pkg.uncommitted.Dirty" in _names(index_exceptions(repo.path).subclasses_of("RuntimeError"))


def test_not_a_directory_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        index_exceptions(tmp_path / "absent")


def test_reaching_follows_calls_backwards_by_simple_name(repo: Repo) -> None:
    for index in (index_exceptions(repo.path), index_revision(GitRepo(repo.path), "HEAD")):
        # `top` hands `mid` to a pool (a callback), `Worker.run` calls a method named `mid`
        assert index.reaching({"leaf"}) == {"leaf", "mid", "top", "run"}
        assert index.reaching({"leaf"}, depth=1) == {"leaf", "mid"}
        assert index.reaching({"other"}) == {"other"}
        [site] = index.handlers_of("CacheError")
        assert site.body_calls == {"fn"} and site.try_lines == (18, 18)


HELPERS = '''
def replace_error(error):
    """Always raises."""
    message = f"replacing failed: {error}"
    raise RuntimeError(message) from error


def maybe_error(error):
    if error is None:
        return None
    raise RuntimeError(error)


def gen_error(error):
    yield error
    raise RuntimeError(error)


def twice(error):
    raise ValueError(error)


class Other:
    def twice(self, error):
        return error


def nested(error):
    def inner():
        return 1

    raise RuntimeError(inner())
'''


def test_always_raises_needs_every_definition_to_end_in_a_raise(tmp_path: Path) -> None:
    r = Repo(tmp_path / "helpers")
    r.commit({"pkg/__init__.py": "", "pkg/helpers.py": HELPERS}, "helpers")
    for index in (index_exceptions(r.path), index_revision(GitRepo(r.path), "HEAD")):
        assert index.always_raises("replace_error")
        # a return of a nested function does not count; one of the function itself does
        assert index.always_raises("nested")
        assert not index.always_raises("maybe_error")
        assert not index.always_raises("gen_error")
        # a method of the same simple name that returns: the call cannot be told apart by name
        assert not index.always_raises("twice")
        assert not index.always_raises("undefined")


def test_the_index_says_whether_some_file_imports_torch(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/__init__.py": "", "pkg/loop.py": "import asyncio\n# import torch in a comment\n"}, "no torch")
    assert not index_revision(GitRepo(repo.path), "main").torch_imported
    repo.commit({"pkg/nn.py": "from torch import nn\n"}, "torch")
    assert index_revision(GitRepo(repo.path), "main").torch_imported
