"""`/rerun-gpu` on a fork PR authorises the head the maintainer saw, against a real `reviewbot serve`
and the fake GitHub: a push that arrives after the comment was written (whichever of the two
deliveries comes first) makes the bot refuse and name the SHA to approve; `/rerun-gpu <sha>` with a
prefix of the current head is the explicit form; every reply names the SHA it authorised.

Deliveries are the shared pull_request/issue_comment examples with the times GitHub sets
(`pull_request.updated_at` of a synchronize: the push; `comment.created_at`: the writing).
"""

from __future__ import annotations

import time

from tests.reviewbot.fake_github.webhooks import github_time, issue_comment_event, pull_request_event
from tests.reviewbot.service.harness import wait_until
from tests.reviewbot.service.scenario import SMOKE_SUITE_FILES, Project, good_core

BOT = "reviewbot-test[bot]"


def _replies(github, project, number):
    return [
        c["body"]
        for c in github.state.comments_on(project.full_name, number)
        if c["user"]["login"] == BOT and "<!-- reviewbot:reply:" in c["body"]
    ]


def _authorised(service, project):
    rows = service.query("SELECT head_sha FROM authorisations WHERE repo = :r ORDER BY id", r=project.full_name)
    return [r.head_sha for r in rows]


def _gpu_final(github, project, sha):
    states = [s["state"] for s in github.state.statuses_for(project.full_name, sha, "reviewbot/gpu-regression")]
    return states[-1] if states and states[-1] != "pending" else None


def _comment(service, github, project, number, body, author, written_at):
    """A comment written at `written_at` (UNIX seconds); returns the delivery response."""
    from tests.reviewbot.fake_github.routes.issues import add_comment

    state = github.state
    with state.lock:
        comment = add_comment(state, project.full_name, number, body, state.user(author))
    payload = issue_comment_event(
        state.pulls[(project.full_name, number)],
        body,
        author,
        github.origin,
        comment_id=comment["id"],
        created_at=github_time(written_at),
    )
    response = service.deliver("issue_comment", payload)
    assert response.status_code == 202, response.text
    return response


def _push(service, github, project, number, files, pushed_at):
    head = project.new_head(number, files)
    payload = pull_request_event(
        "synchronize", github.state.pulls[(project.full_name, number)], github.origin, updated_at=github_time(pushed_at)
    )
    response = service.deliver("pull_request", payload)
    assert response.status_code == 202, response.text
    return head, response


def test_a_push_while_the_command_waits_is_not_authorised(service, github, tmp_path):
    """The maintainer writes `/rerun-gpu` at head A; the author pushes B before the command job reads
    the PR. The bot must not run B: it replies naming B and the explicit form; `/rerun-gpu <B>` runs it."""
    project = Project(tmp_path, github, "octo/race", SMOKE_SUITE_FILES)
    _, first = project.open_pull(1, good_core(), fork_of="stranger/race", author="stranger")
    service.pull_event("opened", project.full_name, 1)
    service.wait_jobs_settled(project.full_name, 1)
    github.state.set_permission(project.full_name, "maintainer", "write")

    held = github.state.add_fault("GET", rf"/repos/{project.full_name}/pulls/1$", delay=4)
    written = time.time() - 5
    service.outcome(_comment(service, github, project, 1, "/rerun-gpu smoke", "maintainer", written))
    wait_until(lambda: held.times == 0, what="the command job to read the PR")
    second, push = _push(service, github, project, 1, good_core("\n\ndef evil() -> int:\n    return 0\n"), time.time())
    service.outcome(push)
    jobs = service.wait_jobs_settled(project.full_name, 1)

    assert _authorised(service, project) == []
    assert not [j for j in jobs if j.kind == "gpu"]
    assert _gpu_final(github, project, first) is None and _gpu_final(github, project, second) is None
    [refusal] = _replies(github, project, 1)
    assert "the GPU suites did not run" in refusal and "after your comment was written" in refusal
    assert f"`{second}`" in refusal and f"`/rerun-gpu {second[:12]}`" in refusal

    stale = _comment(service, github, project, 1, f"/rerun-gpu {first[:7]}", "maintainer", time.time())
    service.outcome(stale)
    service.wait_jobs_settled(project.full_name, 1)
    assert _authorised(service, project) == []
    assert f"`{first[:7]}` is not this PR's head" in _replies(github, project, 1)[-1]

    explicit = _comment(service, github, project, 1, f"/rerun-gpu {second[:7]} smoke", "maintainer", time.time())
    service.outcome(explicit)
    wait_until(lambda: _gpu_final(github, project, second), timeout=120, what="the GPU run of the named head")
    service.wait_jobs_settled(project.full_name, 1)
    assert _authorised(service, project) == [second]
    assert _gpu_final(github, project, second) == "success"
    assert _replies(github, project, 1)[-1].startswith(f"@maintainer GPU suites queued for `{second}`")
    runs = service.query("SELECT head_sha, suite FROM suite_runs WHERE repo = :r", r=project.full_name)
    assert [(r.head_sha, r.suite) for r in runs] == [(second, "smoke")]


def test_a_push_delivered_before_the_comment_still_counts(service, github, tmp_path):
    """GitHub delivers the push (made after the comment was written) before the comment: the head the
    service knows is the new one, but the push's own time shows the maintainer did not see it. A
    comment written after the push authorises the head, and the reply names it."""
    project = Project(tmp_path, github, "octo/reordered-approval", SMOKE_SUITE_FILES)
    _, first = project.open_pull(2, good_core(), fork_of="stranger/reordered", author="stranger")
    service.pull_event("opened", project.full_name, 2)
    service.wait_jobs_settled(project.full_name, 2)
    github.state.set_permission(project.full_name, "maintainer", "admin")

    written = time.time() - 10
    second, push = _push(service, github, project, 2, good_core("\n\ndef g() -> int:\n    return 2\n"), written + 5)
    service.outcome(push)
    service.outcome(_comment(service, github, project, 2, "/rerun-gpu smoke", "maintainer", written))
    service.wait_jobs_settled(project.full_name, 2)
    assert _authorised(service, project) == []
    [refusal] = _replies(github, project, 2)
    assert f"a push (`{second[:12]}`) reached this PR after your comment was written" in refusal

    # The explicit form names the head, but a commit can be made to match a short prefix: a head
    # pushed after the comment was written is not the one its author looked at.
    named = _comment(service, github, project, 2, f"/rerun-gpu {second[:7]} smoke", "maintainer", written)
    service.outcome(named)
    service.wait_jobs_settled(project.full_name, 2)
    assert _authorised(service, project) == []
    assert (
        f"`{second[:12]}`, which `{second[:7]}` names, was pushed after your comment was written"
        in (_replies(github, project, 2)[-1])
    )

    service.outcome(_comment(service, github, project, 2, "/rerun-gpu smoke", "maintainer", time.time() + 1))
    wait_until(lambda: _gpu_final(github, project, second), timeout=120, what="the GPU run")
    service.wait_jobs_settled(project.full_name, 2)
    assert _authorised(service, project) == [second]
    reply = _replies(github, project, 2)[-1]
    assert f"GPU suites queued for `{second}` (this fork's code is authorised at exactly this commit)" in reply
    assert _gpu_final(github, project, first) is None


def test_a_short_prefix_of_a_head_whose_push_was_not_delivered_is_not_authorised(service, github, tmp_path):
    """The head moved on GitHub, but its `synchronize` delivery has not arrived: a 7-digit prefix could
    name a commit made to match it and pushed after the comment, so the bot refuses and names the whole
    SHA; once the push is delivered with a time before the comment, the same prefix runs it."""
    project = Project(tmp_path, github, "octo/undelivered-push", SMOKE_SUITE_FILES)
    _, first = project.open_pull(3, good_core(), fork_of="stranger/undelivered", author="stranger")
    service.pull_event("opened", project.full_name, 3)
    service.wait_jobs_settled(project.full_name, 3)
    github.state.set_permission(project.full_name, "maintainer", "write")

    pushed = time.time() - 20
    second = project.new_head(3, good_core("\n\ndef h() -> int:\n    return 3\n"))  # no delivery yet
    written = time.time() - 10
    service.outcome(_comment(service, github, project, 3, f"/rerun-gpu {second[:7]} smoke", "maintainer", written))
    service.wait_jobs_settled(project.full_name, 3)
    assert _authorised(service, project) == []
    refusal = _replies(github, project, 3)[-1]
    assert f"the push of `{second[:12]}` has not reached this service yet" in refusal, refusal
    assert f"`/rerun-gpu {second}`" in refusal

    push = service.deliver(
        "pull_request",
        pull_request_event(
            "synchronize", github.state.pulls[(project.full_name, 3)], github.origin, updated_at=github_time(pushed)
        ),
    )
    assert push.status_code == 202, push.text
    service.outcome(push)
    service.outcome(_comment(service, github, project, 3, f"/rerun-gpu {second[:7]} smoke", "maintainer", written))
    wait_until(lambda: _gpu_final(github, project, second), timeout=120, what="the GPU run of the named head")
    service.wait_jobs_settled(project.full_name, 3)
    assert _authorised(service, project) == [second]
    assert _gpu_final(github, project, first) is None
