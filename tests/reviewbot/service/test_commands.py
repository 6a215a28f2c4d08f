"""Slash commands in PR comments, permissions, and fork authorisation of GPU runs.

Comment deliveries are the shared issue_comment examples with `issue.pull_request` added, PR
deliveries the shared pull_request examples (shared/fixtures/github-webhooks/).
"""

from __future__ import annotations

import pytest

from tests.reviewbot.fake_github.webhooks import issue_comment_event, load_payload
from tests.reviewbot.service.harness import Service, wait_until
from tests.reviewbot.service.scenario import SMOKE_SUITE_FILES, Project, good_core
from tests.reviewbot.toy_pytest import NO_PLUGINS

BOT = "reviewbot-test[bot]"


def replies(github, project, number):
    return [
        c
        for c in github.state.comments_on(project.full_name, number)
        if c["user"]["login"] == BOT and "<!-- reviewbot:reply:" in c["body"]
    ]


def test_help_unknown_edited_own_and_plain_issue_comments(service, github, project):
    project.open_pull(1, good_core())
    help_response = service.comment_event(project.full_name, 1, "Thanks!\n/help", "alice")
    assert service.outcome(help_response) == "queued"
    unknown = service.comment_event(project.full_name, 1, "/frobnicate now", "alice")
    assert service.outcome(unknown) == "queued"
    edited = service.comment_event(project.full_name, 1, "/help", "alice", action="edited")
    assert service.outcome(edited) == "ignored-edited"
    quoted = service.comment_event(project.full_name, 1, "```\n/rerun-gpu\n```\n> /review", "alice")
    assert service.outcome(quoted) == "ignored-no-command"
    plain = service.deliver("issue_comment", load_payload("issue_comment", "created.payload", github.origin))
    assert service.outcome(plain) == "ignored-not-pr"
    own = service.comment_event(project.full_name, 1, "/help", BOT, author_type="Bot")
    assert own.status_code == 202
    service.wait_jobs_settled(project.full_name, 1)
    texts = [c["body"] for c in replies(github, project, 1)]
    assert len(texts) == 2, texts  # /help and the unknown command; nothing for edits, quotes or the bot itself
    assert all("/rerun-gpu [SHA] [suite ...]" in t for t in texts)
    assert sum("Unknown command `/frobnicate`" in t for t in texts) == 1
    acknowledged = {r["_comment"] for r in github.state.reactions if r["content"] == "eyes"}
    human = [c["id"] for c in github.state.comments_on(project.full_name, 1) if c["user"]["login"] == "alice"]
    assert set(human[:2]) <= acknowledged


def test_one_comment_gets_each_command_answered_once_and_at_most_five(service, github, project):
    """Anyone may comment: forty `/help` lines made forty identical replies (and as many refusals of
    a repeated `/rerun-gpu`). Repeats count once; past five commands the rest are ignored."""
    project.open_pull(5, good_core())
    body = "\n".join(["/help"] * 40 + ["/rerun-gpu"] * 5 + [f"/frob{n}" for n in range(1, 8)])
    service.comment_event(project.full_name, 5, body, "passer-by")
    service.wait_jobs_settled(project.full_name, 5)
    texts = [c["body"] for c in replies(github, project, 5)]
    assert len(texts) == 5, texts
    assert sum(t.startswith("**reviewbot commands**") for t in texts) == 1  # /help
    assert sum("`/rerun-gpu` runs the GPU suites" in t for t in texts) == 1  # refused once
    assert [n for n in range(1, 8) if f"Unknown command `/frob{n}`" in "".join(texts)] == [1, 2, 3]


def test_rerun_gpu_refused_without_write_permission(service, github, project):
    project.open_pull(2, good_core())
    github.state.set_permission(project.full_name, "reader", "read")
    service.comment_event(project.full_name, 2, "/rerun-gpu", "reader")
    service.wait_jobs_settled(project.full_name, 2)
    [refusal] = replies(github, project, 2)
    assert "@reader" in refusal["body"] and "**write** or **admin**" in refusal["body"] and "`read`" in refusal["body"]
    assert [j.kind for j in service.jobs(project.full_name, 2)] == ["command"]


def test_rerun_gpu_refuses_an_argument_that_is_not_a_suite_name(service, github, project):
    """`/rerun-gpu --cpu` used to be queued and then fail in the runner's argument parser
    ('argument --suites: expected one argument'); it is answered at once."""
    project.open_pull(4, good_core())
    github.state.set_permission(project.full_name, "maintainer", "admin")
    service.comment_event(project.full_name, 4, "/rerun-gpu --cpu", "maintainer")
    jobs = service.wait_jobs_settled(project.full_name, 4)
    assert [(j.kind, j.state) for j in jobs] == [("command", "done")]
    [reply] = replies(github, project, 4)
    assert "the GPU suites did not run: `--cpu` is not a suite name" in reply["body"], reply["body"]


def test_rerun_gpu_refuses_a_suite_the_heads_configuration_does_not_have(service, github, tmp_path):
    """`/rerun-gpu NAME` with a misspelt suite used to be queued and reported only in the summary,
    after a checkout, as the runner's 'unknown suite(s)'; the reply now refuses it at once and
    names the suites the head's `.reviewbot.yml` has. A PR without the file has none; an invalid
    file is named with its problem."""
    project = Project(tmp_path, github, "octo/suite-names", SMOKE_SUITE_FILES)
    _, head = project.open_pull(1, good_core())
    github.state.set_permission(project.full_name, "maintainer", "admin")
    service.comment_event(project.full_name, 1, "/rerun-gpu smoke smoek", "maintainer")
    jobs = service.wait_jobs_settled(project.full_name, 1)
    assert [(j.kind, j.state) for j in jobs] == [("command", "done")]
    [reply] = replies(github, project, 1)
    assert (
        f"@maintainer the GPU suites did not run: `.reviewbot.yml` at `{head[:12]}` has no suite `smoek` "
        "(its suites: `smoke`)." in reply["body"]
    ), reply["body"]
    bare = Project(tmp_path, github, "octo/no-config")
    bare.open_pull(1, good_core())
    github.state.set_permission(bare.full_name, "maintainer", "admin")
    service.comment_event(bare.full_name, 1, "/rerun-gpu smoke", "maintainer")
    assert [(j.kind, j.state) for j in service.wait_jobs_settled(bare.full_name, 1)] == [("command", "done")]
    [reply] = replies(github, bare, 1)
    assert "has no suite `smoke` (its suites: none)." in reply["body"], reply["body"]
    broken = Project(tmp_path, github, "octo/broken-config", {".reviewbot.yml": "suites: [smoke\n"})
    broken.open_pull(1, good_core())
    github.state.set_permission(broken.full_name, "maintainer", "admin")
    service.comment_event(broken.full_name, 1, "/rerun-gpu smoke", "maintainer")
    assert [(j.kind, j.state) for j in service.wait_jobs_settled(broken.full_name, 1)] == [("command", "done")]
    [reply] = replies(github, broken, 1)
    assert "the GPU suites did not run: `.reviewbot.yml` at" in reply["body"], reply["body"]
    assert "is not valid: not valid YAML" in reply["body"], reply["body"]


def test_a_command_whose_comment_was_deleted_before_it_was_handled_does_nothing(service, github, project):
    """A maintainer comments `/rerun-gpu` and deletes the comment before the worker reads it (the
    fake GitHub answers 404 for it): nothing runs, nothing is posted, the job is not a failure, and
    the handled 404 is no ERROR line (the API client used to log it at ERROR before the job caught it)."""
    project.open_pull(3, good_core())
    github.state.set_permission(project.full_name, "maintainer", "admin")
    pull = github.state.pulls[(project.full_name, 3)]
    response = service.deliver(
        "issue_comment", issue_comment_event(pull, "/rerun-gpu", "maintainer", github.origin, comment_id=987654)
    )
    assert response.status_code == 202 and service.outcome(response) == "queued"
    jobs = service.wait_jobs_settled(project.full_name, 3)
    assert [(j.kind, j.state) for j in jobs] == [("command", "done")]
    assert replies(github, project, 3) == []
    assert github.state.statuses_for(project.full_name, pull["head"]["sha"], "reviewbot/gpu-regression") == []
    log = service.log()
    assert "comment 987654 was deleted before it was handled: ignored" in log, log
    assert [line for line in log.splitlines() if " ERROR " in line and "get_comment" in line] == []


@pytest.fixture(scope="module")
def gpu_service(github, tmp_path_factory):
    svc = Service(tmp_path_factory.mktemp("gpu-service"), github, auto_gpu="true", gpu_suites="smoke").start()
    yield svc
    svc.stop()


def _gpu_states(github, project, sha):
    return [s["state"] for s in github.state.statuses_for(project.full_name, sha, "reviewbot/gpu-regression")]


def test_fork_gpu_runs_only_for_the_head_a_maintainer_authorised(gpu_service, github, tmp_path):
    """Same-repo PRs get the GPU suites automatically; a fork PR's code runs only for the exact head
    a maintainer authorised with /rerun-gpu, and a later push needs a new authorisation."""
    service = gpu_service
    project = Project(tmp_path, github, "octo/forked", SMOKE_SUITE_FILES)
    _, own_head = project.open_pull(1, good_core())
    service.pull_event("opened", project.full_name, 1)
    _, fork_head = project.open_pull(
        2, good_core("\n\ndef fork() -> int:\n    return 2\n"), fork_of="stranger/forked", author="stranger"
    )
    service.pull_event("opened", project.full_name, 2)
    service.wait_jobs_settled(project.full_name, 1)
    service.wait_jobs_settled(project.full_name, 2)
    assert _gpu_states(github, project, own_head) == ["pending", "success"]
    assert [j.kind for j in service.jobs(project.full_name, 2)] == ["review"]
    assert _gpu_states(github, project, fork_head) == []
    summary = next(c for c in github.state.comments_on(project.full_name, 2) if "reviewbot:summary" in c["body"])
    assert "wait for a maintainer's `/rerun-gpu`" in summary["body"]

    github.state.set_permission(project.full_name, "maintainer", "write")
    service.comment_event(project.full_name, 2, "/rerun-gpu smoke", "maintainer")
    wait_until(
        lambda: _gpu_states(github, project, fork_head)[-1:] == ["success"], timeout=90, what="the authorised GPU run"
    )
    service.wait_jobs_settled(project.full_name, 2)
    authorised = service.query("SELECT head_sha, granted_by FROM authorisations WHERE repo = :r", r=project.full_name)
    assert [(a.head_sha, a.granted_by) for a in authorised] == [(fork_head, "maintainer")]
    rows = service.query(
        "SELECT suite, status, head_sha FROM suite_runs WHERE repo = :r AND pr = 2", r=project.full_name
    )
    assert [(r.suite, r.status, r.head_sha) for r in rows] == [("smoke", "passed", fork_head)]

    newer = project.new_head(2, good_core("\n\ndef more() -> int:\n    return 1\n"))
    service.pull_event("synchronize", project.full_name, 2)
    service.wait_jobs_settled(project.full_name, 2)
    assert [j.kind for j in service.jobs(project.full_name, 2) if j.head_sha == newer] == ["review"]
    assert _gpu_states(github, project, newer) == []


GPU_SUITE_FILES = {
    ".reviewbot.yml": "suites:\n  gpu-smoke:\n    command: python -m pytest -q -p no:cacheprovider "
    f"{NO_PLUGINS} tests_gpu/test_gpu.py\n"
    "    gpus: 1\n    timeout_s: 300\n",
    "tests_gpu/test_gpu.py": "import torch\n\n\ndef test_cuda_matmul():\n    x = torch.ones(8, 8, device='cuda')\n"
    "    assert float((x @ x).sum()) == 512.0\n",
}


def test_rerun_gpu_runs_the_gpu_suites_locally_and_reports_them(service, github, tmp_path):
    """`/rerun-gpu` without names runs every suite needing a GPU through the local dispatcher. On a
    machine without a GPU the suite is reported as not run: the status is `error`, never success."""
    import torch

    project = Project(tmp_path, github, "octo/gpu-local", GPU_SUITE_FILES)
    _, head = project.open_pull(1, good_core())
    github.state.set_permission(project.full_name, "maintainer", "admin")
    service.comment_event(project.full_name, 1, "/rerun-gpu", "maintainer")
    wait_until(
        lambda: _gpu_states(github, project, head)[-1:] not in ([], ["pending"]),
        timeout=300,
        what="the GPU suite status",
    )
    service.wait_jobs_settled(project.full_name, 1)
    [run] = service.query("SELECT suite, status, result FROM suite_runs WHERE repo = :r", r=project.full_name)
    summary = next(c for c in github.state.comments_on(project.full_name, 1) if "reviewbot:summary" in c["body"])
    assert "### GPU regression suites" in summary["body"] and "`gpu-smoke`" in summary["body"]
    if not torch.cuda.is_available():
        assert (run.suite, run.status) == ("gpu-smoke", "not-run")
        assert _gpu_states(github, project, head) == ["pending", "error"]
        assert "needs 1 GPU(s)" in summary["body"]
        pytest.skip("no CUDA device: the GPU suite's pass is checked on a GPU machine only (not-run path checked)")
    assert (run.suite, run.status) == ("gpu-smoke", "passed")
    assert _gpu_states(github, project, head) == ["pending", "success"]
