"""`reviewbot.sandbox` on its own: the environment allow-list, reports taken out of a box without
following links, and a time limit that ends every process of the run (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from reviewbot import sandbox


def test_child_env_is_an_allow_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "REVIEWBOT_WEBHOOK_SECRET": "s",
        "REVIEWBOT_DATABASE_URL": "sqlite:///x",
        "DEPLOY_TOKEN": "t",
        "https_proxy": "http://proxy:1",
        "AWS_SECRET_ACCESS_KEY": "k",
        "CUDA_VISIBLE_DEVICES": "0",
        "LC_ALL": "C.UTF-8",
    }.items():
        monkeypatch.setenv(name, value)
    env = sandbox.child_env(tmp_path / "tree", tmp_path / "scratch", {"EXTRA": "1"})
    assert not {"REVIEWBOT_WEBHOOK_SECRET", "REVIEWBOT_DATABASE_URL", "DEPLOY_TOKEN", "https_proxy"} & set(env)
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert (env["CUDA_VISIBLE_DEVICES"], env["LC_ALL"], env["EXTRA"]) == ("0", "C.UTF-8", "1")
    assert env["PYTHONPATH"] == str(tmp_path / "tree") and env["HOME"] == env["TMPDIR"] == str(tmp_path / "scratch")
    assert env["PATH"] == os.environ["PATH"]


def test_a_report_left_as_a_link_is_not_followed(tmp_path: Path) -> None:
    private = tmp_path / "private.txt"
    private.write_text("the service's secret")
    private.chmod(0o600)
    tree = tmp_path / "wt"
    tree.mkdir()
    with sandbox.box(tree) as box:
        env = sandbox.child_env(tree, box.scratch)
        script = (
            f"import os; out = os.environ['TMPDIR']; os.symlink({str(private)!r}, out + '/r.xml'); "
            "open(out + '/ok.xml', 'w').write('<ok/>')"
        )
        run = box.run_captured([sys.executable, "-c", script], env, 60)
        assert run.returncode == 0, run.stderr
        assert (box.scratch / "r.xml").is_symlink()
        assert not box.take("r.xml", tmp_path / "copied.xml")
        assert box.take("ok.xml", tmp_path / "ok-copy.xml")
    assert not (tmp_path / "copied.xml").exists()
    assert (tmp_path / "ok-copy.xml").read_text() == "<ok/>"


@pytest.mark.skipif(not sandbox.availability().ok, reason=f"no sandbox here: {sandbox.availability().reason}")
def test_the_time_limit_ends_every_process_of_the_run(tmp_path: Path) -> None:
    """A daemon that left its session and process group still dies with the run's PID namespace."""
    token = uuid.uuid4().hex
    tree = tmp_path / "wt"
    tree.mkdir()
    daemon = "import os, time; open(os.environ['TMPDIR'] + '/started', 'w').close(); time.sleep(300)"
    script = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {daemon!r}, '{token}'], start_new_session=True); "
        "time.sleep(300)"
    )
    with sandbox.box(tree) as box:
        run = box.run_captured([sys.executable, "-c", script], sandbox.child_env(tree, box.scratch), 3)
        assert (box.scratch / "started").exists()  # the daemon did run
    assert run.returncode is None and run.seconds < 3 + 2  # not held open by the daemon's copy of the pipes
    assert box.sandboxed and run.isolated

    def alive() -> list[int]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline:
                found.append(int(pid))
        return found

    deadline = time.monotonic() + 5  # the kernel ends the namespace's processes just after its init
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive() == []


def _run_in_box(tmp_path: Path, script: str) -> sandbox.Captured:
    """`python -c script` in a box around an empty worktree, with the child environment, 60 s."""
    tree = tmp_path / "wt"
    tree.mkdir()
    with sandbox.box(tree) as box:
        return box.run_captured([sys.executable, "-c", script], sandbox.child_env(tree, box.scratch), 60)


@pytest.mark.skipif(not sandbox.availability().ok, reason=f"no sandbox here: {sandbox.availability().reason}")
def test_the_fresh_directories_hold_no_more_than_their_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/tmp, /var/tmp and /dev/shm are tmpfs, which lives in the machine's memory: a run filling
    them must meet their size, not the machine's end (the size is made small here)."""
    monkeypatch.setattr(sandbox, "FRESH_SIZE", "4m")
    fill = (
        "import errno, os, sys\n"
        "for place in ('/dev/shm', '/tmp', '/var/tmp'):\n"
        "    try:\n"
        "        open(place + '/fill', 'wb').write(b'x' * (8 << 20))\n"
        "    except OSError as exc:\n"
        "        assert exc.errno == errno.ENOSPC, exc\n"
        "        os.remove(place + '/fill')\n"
        "    else:\n"
        "        sys.exit(place + ' took 8 MB')\n"
        "open('/tmp/small', 'wb').write(b'x' * (1 << 20))\n"
    )
    run = _run_in_box(tmp_path, fill)
    assert run.returncode == 0, run.stderr


@pytest.mark.skipif(not sandbox.availability().ok, reason=f"no sandbox here: {sandbox.availability().reason}")
def test_a_run_cannot_start_more_processes_than_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork bomb meets the run's own process limit (made small here), not the machine's."""
    monkeypatch.setattr(sandbox, "MAX_PROCESSES", 24)
    bomb = (
        "import errno, os, time\n"
        "children = []\n"
        "for _ in range(64):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        assert exc.errno == errno.EAGAIN, exc\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "print('started', len(children))\n"
        "for pid in children:\n"
        "    os.kill(pid, 9)\n"
        "    os.waitpid(pid, 0)\n"
    )
    run = _run_in_box(tmp_path, bomb)
    assert run.returncode == 0, run.stderr
    started = int(run.stdout.split()[-1])
    assert 0 < started < 24, run.stdout


def test_service_state_is_made_private_and_private_state_is_left_untouched(tmp_path: Path) -> None:
    """Found by a failing CI run: the worker restarted while the database file was immutable for a
    moment and died on a chmod it did not need (the file was private already)."""
    shared, private = tmp_path / "shared.txt", tmp_path / "service.sqlite3"
    shared.write_text("a secret")
    shared.chmod(0o644)
    private.write_text("the database")
    private.chmod(0o600)
    subprocess.run(["chattr", "+i", str(private)], check=True)
    try:
        code = f"from reviewbot import sandbox; sandbox.hide_service_state([{str(shared)!r}, {str(private)!r}])"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    finally:
        subprocess.run(["chattr", "-i", str(private)], check=True)
    assert done.returncode == 0, done.stderr
    assert (shared.stat().st_mode & 0o777, private.stat().st_mode & 0o777) == (0o600, 0o600)
