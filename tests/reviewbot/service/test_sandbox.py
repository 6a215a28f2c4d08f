"""PR code against the service that runs it: a real `reviewbot serve`, the fake GitHub, and a PR
whose suite tries to steal the token and the webhook secret (its environment, every /proc/*/environ
it can reach, its ancestors'), write the service's database, and connect to the service's and
GitHub's ports. In the sandbox every attempt fails, so the suite passes and the review reports it
like any other; the same file run outside the sandbox fails (the attempts are real).

Where no sandbox can be built (simulated with an `unshare` that the kernel refuses, as in a
container without user namespaces), the review says why PR code did not run, unless the operator
allowed unsandboxed runs, which then apply to same-repository PRs only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reviewbot.sandbox import availability
from tests.reviewbot.service.harness import SECRET, Service, wait_until
from tests.reviewbot.service.scenario import SMOKE_SUITE_FILES, Project, good_core
from tests.reviewbot.toy_pytest import NO_PLUGINS

SUMMARY_MARKER = "<!-- reviewbot:summary -->"
TOKEN = "test-token"

ESCAPE_TEST = """
import os
import socket
import sqlite3

import pytest

SECRETS = [{secrets}]
DATABASE = {database!r}
WORK_DIR = {work_dir!r}
PORTS = [{ports}]
SERVICE_PIDS = [{pids}]
SETTINGS_FILE = {settings_file!r}


def _parent(pid):
    with open(f"/proc/{{pid}}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def _ancestors():
    chain, pid = [], os.getpid()
    while pid > 0:
        chain.append(pid)
        pid = _parent(pid)
    return chain


def test_environment_holds_no_secret():
    text = "\\0".join(f"{{k}}={{v}}" for k, v in os.environ.items())
    assert not [s for s in SECRETS if s in text]
    assert not [k for k in os.environ if k.startswith(("REVIEWBOT_", "GITHUB_", "GH_")) or k.lower().endswith("_proxy") and k.lower() != "no_proxy"]


def test_no_readable_process_environment_holds_a_secret():
    pids = set(_ancestors()) | set(SERVICE_PIDS) | {{int(p) for p in os.listdir("/proc") if p.isdigit()}}
    read = []
    for pid in sorted(pids):
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as environ:
                data = environ.read().decode(errors="replace")
        except OSError:
            continue
        read.append(pid)
        assert not [s for s in SECRETS if s in data], pid
    assert os.getpid() in read  # the attempt is real: this process's own environment is readable


def test_the_service_processes_are_not_visible():
    for pid in SERVICE_PIDS:
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as cmdline:
                assert b"reviewbot" not in cmdline.read()
        except OSError:
            pass


def test_the_database_cannot_be_opened_or_written():
    with pytest.raises(OSError):
        open(DATABASE, "r+b")
    with pytest.raises(sqlite3.Error):
        connection = sqlite3.connect(DATABASE)
        connection.execute("INSERT INTO authorisations (repo, pr, head_sha, granted_by, granted_at) VALUES ('x', 1, 'f', 'me', 0)")
        connection.commit()


def test_the_settings_file_holds_no_secret_for_this_code():
    try:
        with open(SETTINGS_FILE) as settings:
            data = settings.read()
    except OSError:
        return
    assert not [s for s in SECRETS if s in data]


def test_the_work_directory_is_out_of_reach():
    try:
        names = os.listdir(WORK_DIR)
    except OSError:
        return
    assert names == []


@pytest.mark.parametrize("port", PORTS)
def test_the_service_and_github_cannot_be_reached(port):
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
"""


def _escape_files(service: Service) -> dict[str, str]:
    assert service.server is not None
    test = ESCAPE_TEST.format(
        secrets=", ".join(repr(s) for s in (SECRET, TOKEN)),
        database=str(service.db_path),
        work_dir=str(service.tmp / "work"),
        ports=", ".join(str(p) for p in (service.port, int(service.github.origin.rsplit(":", 1)[1]))),
        pids=str(service.server.pid),
        settings_file=str(service.tmp / "reviewbot.yml"),
    )
    return {
        ".reviewbot.yml": f"suites:\n  escape:\n    command: python -m pytest -q -p no:cacheprovider {NO_PLUGINS} "
        "tests_escape/test_escape.py\n    gpus: 0\n    timeout_s: 120\n",
        "tests_escape/test_escape.py": textwrap.dedent(test),
    }


def _summary(github, project, number) -> str:
    [summary] = [c for c in github.state.comments_on(project.full_name, number) if SUMMARY_MARKER in c["body"]]
    return summary["body"]


def _final(github, project, sha, context="reviewbot/static"):
    states = [s["state"] for s in github.state.statuses_for(project.full_name, sha, context)]
    return states[-1] if states and states[-1] != "pending" else None


@pytest.fixture(scope="module")
def service(github, tmp_path_factory):
    """Deployed with a settings file (`REVIEWBOT_CONFIG`) holding the token (only there) and the
    secret (also in serve's environment, which wins)."""
    tmp = tmp_path_factory.mktemp("service")
    svc = Service(tmp, github)
    settings_file = tmp / "reviewbot.yml"
    settings_file.write_text(f"webhook_secret: {SECRET}\ngithub_token: {svc.env.pop('REVIEWBOT_GITHUB_TOKEN')}\n")
    settings_file.chmod(0o644)
    svc.env["REVIEWBOT_CONFIG"] = str(settings_file)
    yield svc.start()
    svc.stop()


@pytest.mark.skipif(not availability().ok, reason=f"no sandbox on this machine: {availability().reason}")
def test_pr_code_cannot_reach_secrets_database_or_service(service, github, tmp_path):
    project = Project(tmp_path, github, "octo/escape")
    files = _escape_files(service)
    _, head = project.open_pull(1, {**good_core(), **files})
    authorisations = service.query("SELECT COUNT(*) AS n FROM authorisations")[0].n
    service.pull_event("opened", project.full_name, 1)
    jobs = service.wait_jobs_settled(project.full_name, 1, timeout=180)
    assert [j.state for j in jobs] == ["done"], (jobs, service.log())
    body = _summary(github, project, 1)
    assert "| `escape` | passed | 8✓ 0✗ 0⊘ |" in body, body
    assert (service.tmp / "reviewbot.yml").stat().st_mode & 0o777 == 0o600  # made private like the secret files
    assert _final(github, project, head) == "success"
    assert service.query("SELECT COUNT(*) AS n FROM authorisations")[0].n == authorisations
    assert service.server is not None and service.server.poll() is None

    # The same file outside the sandbox, with the service's environment: the attempts succeed.
    control = tmp_path / "control"
    control.mkdir()
    (control / "test_escape.py").write_text(files["tests_escape/test_escape.py"])
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_PLUGINS.split(), "test_escape.py"],
        cwd=control,
        env=service.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    failed = {line.split("::")[1].split(" ")[0] for line in run.stdout.splitlines() if line.startswith("FAILED")}
    assert {
        "test_environment_holds_no_secret",
        "test_no_readable_process_environment_holds_a_secret",
        "test_the_service_processes_are_not_visible",
        "test_the_database_cannot_be_opened_or_written",
        "test_the_work_directory_is_out_of_reach",
        "test_the_settings_file_holds_no_secret_for_this_code",
    } <= failed, run.stdout
    assert sum(name.startswith("test_the_service_and_github_cannot_be_reached") for name in failed) == 2


REFUSING_UNSHARE = "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"


def _without_sandbox(tmp: Path, github, **settings) -> Service:
    tmp.mkdir()
    fake_bin = tmp / "bin"
    fake_bin.mkdir()
    (fake_bin / "unshare").write_text(REFUSING_UNSHARE)
    (fake_bin / "unshare").chmod(0o755)
    svc = Service(tmp, github, **settings)
    svc.env["PATH"] = f"{fake_bin}{os.pathsep}{svc.env['PATH']}"
    return svc.start()


def test_without_a_sandbox_pr_code_does_not_run_and_the_review_says_why(github, tmp_path):
    service = _without_sandbox(tmp_path / "svc", github)
    try:
        project = Project(tmp_path, github, "octo/nosandbox", SMOKE_SUITE_FILES)
        _, head = project.open_pull(1, good_core())
        service.pull_event("opened", project.full_name, 1)
        assert [j.state for j in service.wait_jobs_settled(project.full_name, 1)] == ["done"], service.log()
        body = _summary(github, project, 1)
        assert "This PR's code did not run (the cache-key probe, the test plan and the suites)" in body, body
        assert "no sandbox can be built on this worker" in body
        # the refusing `unshare` (or a kernel refusing namespaces itself); not being root comes first
        assert ("Operation not permitted" if os.geteuid() == 0 else "not root") in body
        assert "REVIEWBOT_UNSANDBOXED=1" in body
        assert "| `smoke` |" not in body
        assert _final(github, project, head) == "success"
        assert "no sandbox for PR code" in service.log()
    finally:
        service.stop()


def test_unsandboxed_runs_are_for_same_repository_prs_only(github, tmp_path):
    service = _without_sandbox(tmp_path / "svc", github, unsandboxed="true")
    try:
        project = Project(tmp_path, github, "octo/unsandboxed", SMOKE_SUITE_FILES)
        _, own = project.open_pull(1, good_core())
        service.pull_event("opened", project.full_name, 1)
        assert [j.state for j in service.wait_jobs_settled(project.full_name, 1)] == ["done"], service.log()
        assert "| `smoke` | passed | 1✓ 0✗ 0⊘ |" in _summary(github, project, 1)
        assert _final(github, project, own) == "success"

        _, fork_head = project.open_pull(2, good_core("\n\ndef f() -> int:\n    return 1\n"), fork_of="stranger/x")
        service.pull_event("opened", project.full_name, 2)
        service.wait_jobs_settled(project.full_name, 2)
        github.state.set_permission(project.full_name, "maintainer", "write")
        service.comment_event(project.full_name, 2, "/rerun-gpu smoke", "maintainer")
        wait_until(lambda: _final(github, project, fork_head, "reviewbot/gpu-regression"), timeout=90)
        service.wait_jobs_settled(project.full_name, 2)
        body = _summary(github, project, 2)
        assert "unsandboxed runs are allowed for same-repository PRs only" in body, body
        assert "The GPU suites did not run" in body and "| `smoke` |" not in body
        assert _final(github, project, fork_head, "reviewbot/gpu-regression") == "error"
        assert service.query("SELECT COUNT(*) AS n FROM suite_runs WHERE repo = :r", r=project.full_name)[0].n == 0
    finally:
        service.stop()
