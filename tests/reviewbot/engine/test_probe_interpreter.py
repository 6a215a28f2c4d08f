"""The key probe's interpreter (`cache_key.probe.python` / `.setup`): the reviewed project's code and
dependencies stay out of the bot's environment, and the bot's own package stays out of the probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.interpreter import READY_MARK, dependency_digest
from reviewbot.keychange.probe import run_probe
from reviewbot.repo_config import ConfigError, ProbeConfig, parse_config
from reviewbot.sandbox import availability
from tests.reviewbot.engine.engine_gitrepos import Repo

# prints which of the modules it tries are importable, where `revmod` comes from, and sys.path
PROBE = """
import importlib, json, sys
found = {}
for name in ("revmod", "reviewbot", "yaml", "depmod"):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        found[name] = "missing: " + str(exc)
    else:
        found[name] = getattr(module, "ORIGIN", module.__file__)
factors = {"found": json.dumps(found), "path": json.dumps(sys.path), "exe": sys.executable}
print(json.dumps({"cases": {"c": {"factors": factors, "key": "k"}}}))
"""


def _repo(tmp_path: Path, extra: dict[str, str] | None = None) -> Repo:
    repo = Repo(tmp_path / "repo")
    repo.commit({"revmod.py": 'ORIGIN = "the revision"\n', "probe.py": PROBE, **(extra or {})}, "initial")
    return repo


def _found(repo: Repo, probe: ProbeConfig, env_root: Path | None = None) -> tuple[dict[str, str], list[str], str]:
    with GitRepo(repo.path) as git:
        run = run_probe(git, "main", probe, env_root=env_root)
    assert run.status == "ok", run.error
    factors = run.cases["c"]["factors"]
    return json.loads(factors["found"]), json.loads(factors["path"]), factors["exe"]


def test_default_interpreter_masks_the_bot_package(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    found, path, exe = _found(repo, ProbeConfig("python probe.py"))
    assert exe == sys.executable
    assert found["revmod"] == "the revision"
    assert found["reviewbot"].startswith("missing: reviewbot is not importable from the key probe")
    # the script's directory (the tree), PYTHONPATH: the tree and the mask; then the interpreter's own
    # libraries (an editable install's path hook is a name, not a directory); no checkout of the bot
    assert path[0] == path[1] and path[0].endswith("/wt") and path[2].endswith("/masked"), path
    assert all("/lib/python" in p or p.startswith("__editable__") for p in path[3:]), path


def test_the_bots_own_repository_imports_its_own_reviewbot(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"reviewbot/__init__.py": 'ORIGIN = "the revision\'s reviewbot"\n'})
    found, _, _ = _found(repo, ProbeConfig("python probe.py"))
    assert found["reviewbot"] == "the revision's reviewbot"


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter without the bot's packages: a venv without pip or system site-packages."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-I", "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


def test_configured_python_sees_only_the_revision(tmp_path: Path, bare_venv: Path) -> None:
    repo = _repo(tmp_path)
    python = str(bare_venv / "bin" / "python")
    found, path, exe = _found(repo, ProbeConfig("python probe.py", python=python))
    assert exe == python
    assert found["revmod"] == "the revision"
    assert found["yaml"].startswith("missing: No module named 'yaml'")  # a dependency of the bot
    assert found["reviewbot"].startswith("missing: No module named 'reviewbot'")
    assert not any("/masked" in p for p in path)


def test_configured_python_that_does_not_exist_names_the_key(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with GitRepo(repo.path) as git:
        run = run_probe(git, "main", ProbeConfig("python probe.py", python=str(tmp_path / "no-python")))
    assert run.status == "failed"
    assert run.error.startswith("cache_key.probe.python: ") and "no such interpreter" in run.error


SETUP = (
    'python -c "import os, pathlib, shutil, sysconfig; '
    "shutil.copy('vendor/depmod.py', sysconfig.get_paths()['purelib']); "
    "log = pathlib.Path(os.environ['VIRTUAL_ENV'], 'setup-runs'); log.write_text(log.read_text() + 'x' "
    "if log.exists() else 'x')\""
)


def test_setup_environment_is_built_once_and_holds_the_dependencies(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"vendor/depmod.py": 'ORIGIN = "installed by setup"\n', "requirements.txt": "depmod==1\n"})
    envs = tmp_path / "envs"
    probe = ProbeConfig("python probe.py", setup=SETUP)
    found, _, exe = _found(repo, probe, envs)
    assert found["depmod"] == "installed by setup"
    assert found["revmod"] == "the revision"
    assert found["yaml"].startswith("missing: ")  # the venv has none of the bot's packages
    assert found["reviewbot"].startswith("missing: ")
    (venv,) = [p for p in envs.iterdir() if p.is_dir()]
    assert exe == str(venv / "bin" / "python") and (venv / READY_MARK).is_file()
    again, _, _ = _found(repo, probe, envs)
    assert again == found
    assert (venv / "setup-runs").read_text() == "x"  # the cached environment was reused
    with pytest.raises(ModuleNotFoundError):
        __import__("depmod")  # nothing entered the bot's environment


# The probe of a revision that has an `attack` file tries to plant a `.pth` file (run at every start
# of the interpreter) in the shared environment; every probe reports whether one ran before it.
POISONING_PROBE = """
import json, os, sysconfig
attempt = "none"
if os.path.exists("attack"):
    try:
        with open(os.path.join(sysconfig.get_paths()["purelib"], "zz_poison.pth"), "w") as pth:
            pth.write("import os; os.environ['POISONED'] = 'yes'\\n")
        attempt = "planted"
    except OSError as exc:
        attempt = type(exc).__name__
factors = {"poisoned": os.environ.get("POISONED", "no"), "attempt": attempt}
print(json.dumps({"cases": {"c": {"factors": factors, "key": "k"}}}))
"""


@pytest.mark.skipif(not availability().ok, reason=f"no sandbox on this machine: {availability().reason}")
def test_one_revisions_probe_cannot_change_the_shared_environment(tmp_path: Path) -> None:
    """Revisions with the same dependencies share one setup environment: a PR's probe that writes
    into it would run its code in the probes of every later revision (other PRs, the base side)."""
    repo = Repo(tmp_path / "repo")
    repo.commit({"probe.py": POISONING_PROBE, "requirements.txt": "x\n"}, "initial")
    probe, envs = ProbeConfig("python probe.py", setup="python -c pass"), tmp_path / "envs"
    attacker = repo.commit({"attack": "1"}, "attacker")
    victim = repo.commit({"attack": None}, "victim")
    with GitRepo(repo.path) as git:
        runs = [run_probe(git, rev, probe, env_root=envs) for rev in (attacker, victim)]
    assert [run.status for run in runs] == ["ok", "ok"], [run.error for run in runs]
    assert runs[0].cases["c"]["factors"] == {"poisoned": "no", "attempt": "PermissionError"}
    assert runs[1].cases["c"]["factors"] == {"poisoned": "no", "attempt": "none"}
    (venv,) = [p for p in envs.iterdir() if p.is_dir()]
    owners = {path.lstat().st_uid for path in [venv, *venv.rglob("*")]}
    assert owners == {os.geteuid()}, owners  # nothing of it stays with the box's uid


def test_environment_key_follows_the_dependency_files_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"requirements.txt": "a==1\n"})
    with GitRepo(repo.path) as git:
        first = dependency_digest(git, repo.sha("main"), sys.executable, "pip install -r requirements.txt")
        repo.commit({"revmod.py": 'ORIGIN = "changed code"\n'})
        assert dependency_digest(git, repo.sha("main"), sys.executable, "pip install -r requirements.txt") == first
        repo.commit({"requirements-dev.txt": "b==2\n"})
        second = dependency_digest(git, repo.sha("main"), sys.executable, "pip install -r requirements.txt")
        assert second != first
        assert dependency_digest(git, repo.sha("main"), sys.executable, "pip install .") != second


def test_failing_setup_fails_the_probe_naming_the_key_and_is_retried(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    envs = tmp_path / "envs"
    probe = ProbeConfig("python probe.py", setup="python -c \"raise SystemExit('no index here')\"")
    with GitRepo(repo.path) as git:
        run = run_probe(git, "main", probe, env_root=envs)
    assert run.status == "failed"
    assert run.error.startswith("cache_key.probe.setup: exited with code 1") and "no index here" in run.error
    assert not any((p / READY_MARK).exists() for p in envs.iterdir() if p.is_dir())


@pytest.mark.parametrize(
    ("probe", "key"),
    [
        ({"command": "python p.py", "python": "venv/bin/python"}, "cache_key.probe.python"),
        ({"command": "python p.py", "python": 3}, "cache_key.probe.python"),
        ({"command": "python p.py", "setup": ""}, "cache_key.probe.setup"),
        ({"command": "python p.py", "setup": ["pip", "install"]}, "cache_key.probe.setup"),
        ({"command": "python p.py", "setup_timeout_s": 0}, "cache_key.probe.setup_timeout_s"),
        ({"command": "python p.py", "interpreter": "x"}, "cache_key.probe.interpreter"),
    ],
)
def test_bad_interpreter_keys_are_named(probe: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(json.dumps({"cache_key": {"probe": probe}}))
    assert str(caught.value).startswith(f"{key}: ")


def test_interpreter_keys_parse() -> None:
    config = parse_config(
        json.dumps(
            {"cache_key": {"probe": {"command": "python p.py", "python": "python3.11", "setup": "pip install ."}}}
        )
    )
    assert config.probe == ProbeConfig("python p.py", python="python3.11", setup="pip install .")


def test_review_says_why_the_probe_did_not_run(tmp_path: Path) -> None:
    from reviewbot.engine import run_review
    from reviewbot.render import render_markdown
    from reviewbot.repo_config import load_config

    config = "cache_key:\n  roots: [keymod.key]\n  probe:\n    command: python probe.py\n"
    repo = _repo(tmp_path, {".reviewbot.yml": config, "keymod.py": "def key(x):\n    return str(x)\n"})
    repo.branch("feature")
    repo.commit({"revmod.py": 'ORIGIN = "changed, the key not"\n'})
    review = run_review(repo.path, "main", "feature", suites="static", config=load_config(repo.path, "feature"))
    assert review.key_change is not None and review.key_change.probe_status == "not-run"
    text = render_markdown(review)
    # revmod.py exists at the merge base, so the probe ran there to list the files the key hashes
    assert "static closure is unchanged (1 definitions compared). The key probe did not compare keys" in text
    without = run_review(
        repo.path, "main", "feature", suites="static", config=parse_config("cache_key:\n  roots: [keymod.key]\n")
    )
    assert "No key probe is configured (`cache_key.probe` in .reviewbot.yml)." in render_markdown(without)


def test_installation_paths_cover_a_venv_and_its_base_but_never_root(bare_venv: Path) -> None:
    from reviewbot.keychange.interpreter import ProbeSetupError, installation_paths

    base = Path(os.path.realpath(bare_venv / "bin" / "python")).parent.parent
    assert installation_paths(str(bare_venv / "bin" / "python")) == tuple(sorted({str(bare_venv), str(base)}))
    with pytest.raises(ProbeSetupError, match=r"^cache_key.probe.python: /python is installed at /"):
        installation_paths("/python")


def test_a_probe_that_cannot_import_a_dependency_says_so_in_one_line(tmp_path: Path) -> None:
    # found on xdit-project/xDiT: a probe importing the package, whose `__init__` imports the absent
    # `diffusers`, was reported with its whole traceback flattened into the review's line, naming
    # the temporary worktree's path
    repo = _repo(tmp_path, {"pkg/__init__.py": "from pkg import inner\n", "pkg/inner.py": "import no_such_dep_h17\n"})
    with GitRepo(repo.path) as git:
        run = run_probe(git, "main", ProbeConfig('python -c "import pkg"'))
    assert run.status == "failed"
    assert run.error == "probe exited with code 1: ModuleNotFoundError: No module named 'no_such_dep_h17'", run.error
    # without an exception line, the last lines of its stderr, the worktree's path removed
    with GitRepo(repo.path) as git:
        plain = run_probe(
            git, "main", ProbeConfig("python -c \"import os, sys; sys.exit('bad ' + os.getcwd() + '/x.py')\"")
        )
    assert plain.error == "probe exited with code 1: bad x.py", plain.error
