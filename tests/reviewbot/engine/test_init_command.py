"""`reviewbot init` end to end: a real git repository shaped like a compiler project
(compiler_project.py), the real command in a fresh process for the exit codes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from compiler_project import compiler_repo, run_reviewbot
from engine_gitrepos import Repo

from reviewbot.init_config import propose_config
from reviewbot.repo_config import parse_config


def _init(repo: Repo, *args: str) -> subprocess.CompletedProcess:
    return run_reviewbot(repo, "init", *args)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return compiler_repo(tmp_path / "mycc")


def test_proposes_the_backend_method_and_the_config_class_with_reasons(repo: Repo) -> None:
    proposal = propose_config(repo.path)
    roots = {c.value: c.reason for c in proposal.roots}
    assert list(roots) == ["mycc.backend.MyBackend.cache_dir", "mycc.config.CompileConfig"], roots
    assert "builds a cache path" in roots["mycc.backend.MyBackend.cache_dir"]
    assert "self.artifact_key" in roots["mycc.backend.MyBackend.cache_dir"]
    assert "dataclass" in roots["mycc.config.CompileConfig"] and "self.config" in roots["mycc.config.CompileConfig"]
    considered = {c.value: c.reason for c in proposal.considered}
    # the hashing helper and the key method are reached from the cache_dir root, so not listed again
    assert "in the closure of `mycc.backend.MyBackend.cache_dir`" in considered["mycc.utils.stable_hash"]
    assert "mycc.backend.MyBackend.artifact_key" in considered
    # nothing that does not hash is proposed
    assert not any(name.endswith(("compile", "log_stats", "pretty")) for name in [*roots, *considered])
    suites = {s.name: s for s in proposal.suites}
    assert set(suites) == {"unit", "gpu"}
    assert (suites["unit"].gpus, suites["gpu"].gpus) == (0, 1)
    assert suites["gpu"].command == "python -m pytest tests/gpu -q" and "CUDA" in suites["gpu"].reason

    text = proposal.to_yaml()
    config = parse_config(text)
    assert config.key_roots == ("mycc.backend.MyBackend.cache_dir", "mycc.config.CompileConfig")
    assert config.probe is None  # a commented template: the repository has to write the probe
    assert "#   command: python -m mycc.reviewbot_probe" in text
    lines = text.splitlines()
    for root in config.key_roots:  # each candidate's reason is the comment right above it
        assert lines[lines.index(f"    - {root}") - 1].startswith("    # ")


def test_write_refuses_to_overwrite_and_check_validates(repo: Repo) -> None:
    printed = _init(repo)
    assert printed.returncode == 0, printed.stderr
    assert not (repo.path / ".reviewbot.yml").exists()

    wrote = _init(repo, "--write")
    assert wrote.returncode == 0, wrote.stderr
    target = repo.path / ".reviewbot.yml"
    assert target.read_text() == printed.stdout

    again = _init(repo, "--write")
    assert again.returncode == 2 and again.stderr.strip().count("\n") == 0, again.stderr
    assert "exists; pass --force" in again.stderr and "Traceback" not in again.stderr
    target.write_text("language: en\n")
    forced = _init(repo, "--write", "--force")
    assert forced.returncode == 0 and target.read_text() == printed.stdout

    ok = _init(repo, "--check")
    assert ok.returncode == 0 and "is valid" in ok.stderr, ok.stderr

    data = yaml.safe_load(target.read_text())
    data["cache_key"]["roots"] = ["mycc.backend.MyBackend.cache_dri", "mycc.config.CompileConfg"]
    data["suites"]["unit"]["command"] = "python -m pytest tests/units -q"
    target.write_text(yaml.safe_dump(data))
    bad = _init(repo, "--check")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 3 and "Traceback" not in bad.stderr, bad.stderr
    assert "'mycc.backend.MyBackend.cache_dri' names nothing" in lines[0]
    assert "'mycc.config.CompileConfg' names nothing" in lines[1]
    assert "suites.unit.command: 'tests/units' does not exist" in lines[2]

    target.write_text("cache_key:\n  rots: []\n")
    invalid = _init(repo, "--check")
    assert invalid.returncode == 2 and "cache_key.rots: unknown key" in invalid.stderr


def test_bad_input_is_one_line(repo: Repo, tmp_path: Path) -> None:
    for args, fragment in (
        (["--check"], "no such file"),
        (["--revision", "nope"], "--revision 'nope' names no commit"),
        (["--force"], "--force only goes with --write"),
    ):
        proc = _init(repo, *args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert fragment in proc.stderr


def test_probe_template_names_the_package_of_the_key_roots(tmp_path: Path) -> None:
    # found on hao-ai-lab/FastVideo: a repository-root __init__.py (module "__init__") and another
    # package sorting first made the template say `python -m __init__.reviewbot_probe`
    repo = compiler_repo(tmp_path / "mycc", replace={"__init__.py": "", "aaa_plugin/__init__.py": "X = 1\n"})
    proposal = propose_config(repo.path)
    assert proposal.roots and proposal.probe_module == "mycc.reviewbot_probe"
    keyless = compiler_repo(tmp_path / "plain", replace={"__init__.py": "", "aaa_plugin/__init__.py": "X = 1\n"})
    keyless.commit({"mycc/backend.py": None, "mycc/config.py": None, "mycc/utils.py": None}, "no key")
    bare = propose_config(keyless.path)
    assert not bare.roots and bare.probe_module == "aaa_plugin.reviewbot_probe"


def test_suites_also_come_from_a_packages_own_test_directory(tmp_path: Path) -> None:
    # found on hao-ai-lab/FastVideo: 82 of its test files live in fastvideo/tests/, which no suite named
    test = "def test_ok():\n    assert True\n"
    repo = compiler_repo(
        tmp_path / "mycc",
        replace={"mycc/tests/__init__.py": "", "mycc/tests/unit/test_a.py": test, "mycc/tests/test_b.py": test},
    )
    suites = {s.name: s for s in propose_config(repo.path).suites}
    assert set(suites) == {"unit", "gpu", "mycc_unit", "mycc_tests_root"}
    assert suites["mycc_unit"].command == "python -m pytest mycc/tests/unit -q"
    assert suites["mycc_tests_root"].command == "python -m pytest mycc/tests --ignore=mycc/tests/unit -q"
    assert suites["mycc_unit"].gpus == 0 and "test files under mycc/tests/unit/" in suites["mycc_unit"].reason


def test_files_named_like_tests_that_define_none_give_no_suite(tmp_path: Path) -> None:
    # found on pytorch/data: test/_utils/_common_utils_for_test.py (helpers) and
    # test/smoke_test/smoke_test.py (a script) each gave a suite that pytest ends with exit code 5
    helpers = "def make_dataset(n):\n    return list(range(n))\n"
    unittest_case = "import unittest\n\n\nclass Checks(unittest.TestCase):\n    def test_ok(self):\n        pass\n"
    repo = compiler_repo(
        tmp_path / "mycc",
        replace={
            "tests/_utils/_common_utils_for_test.py": helpers,
            "tests/smoke_test/smoke_test.py": "print('ok')\n",
            "tests/cases/cases_test.py": unittest_case,
        },
    )
    suites = {s.name: s for s in propose_config(repo.path).suites}
    assert set(suites) == {"unit", "gpu", "cases"}


def test_suites_come_from_test_files_beside_the_modules_when_there_is_no_test_directory(tmp_path: Path) -> None:
    # found on pytorch/torchft: 23 `*_test.py` files beside its modules, and init proposed no suite
    test = "def test_ok():\n    assert True\n"
    repo = compiler_repo(tmp_path / "mycc")
    repo.commit(
        {
            "tests/unit/test_config.py": None,
            "tests/gpu/test_backend_cuda.py": None,
            "mycc/config_test.py": test,
            "mycc/passes/fuse_test.py": test,
            "examples/demo_test.py": test,
        }
    )
    (suite,) = propose_config(repo.path).suites
    assert (suite.name, suite.command, suite.gpus) == ("mycc", "python -m pytest mycc -q", 0)
    assert suite.reason.startswith("test files beside the modules under mycc/ (no test directory): 2 test file(s)")


def test_probe_template_without_roots_names_the_largest_package(tmp_path: Path) -> None:
    # found on xdit-project/xDiT: no key roots, and a two-file `entrypoints` package sorting
    # before the library `xfuser` made the template say `python -m entrypoints.reviewbot_probe`
    repo = compiler_repo(
        tmp_path / "xfuser",
        replace={
            "entrypoints/__init__.py": "",
            "entrypoints/launch.py": "X = 1\n",
            "zlib_pkg/__init__.py": "",
            "zlib_pkg/core.py": "Y = 1\n",
            "zlib_pkg/runner.py": "Z = 1\n",
            "zlib_pkg/config.py": "W = 1\n",
        },
    )
    repo.commit({"mycc/backend.py": None, "mycc/config.py": None, "mycc/utils.py": None}, "no key")
    proposal = propose_config(repo.path)
    assert not proposal.roots and proposal.probe_module == "zlib_pkg.reviewbot_probe"
    assert "#   command: python -m zlib_pkg.reviewbot_probe" in proposal.to_yaml()
