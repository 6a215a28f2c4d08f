"""The fake GitHub server itself: PyGithub against it, fault injection, URL rewriting of the shared examples."""

from __future__ import annotations

import github
import pytest

from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.fake_github.webhooks import load_payload, pull_request_event


@pytest.fixture
def gh():
    with FakeGitHub() as fake:
        fake.state.add_repo("octo/proj")
        fake.state.add_pull("octo/proj", 7, "b" * 40, "a" * 40)
        yield fake


def _client(fake: FakeGitHub) -> github.Github:
    return github.Github(auth=github.Auth.Token("t"), base_url=fake.base_url, retry=None)


def test_pygithub_round_trip_comments_reviews_statuses(gh):
    repo = _client(gh).get_repo("octo/proj")
    pull = repo.get_pull(7)
    comment = pull.as_issue().create_comment("first")
    comment.edit("second")
    pull.create_review(body="", event="COMMENT", comments=[{"path": "x.py", "line": 2, "side": "RIGHT", "body": "b"}])
    repo.get_commit("b" * 40).create_status("failure", context="reviewbot/static")
    assert [c["body"] for c in gh.state.comments_on("octo/proj", 7)] == ["second"]
    assert [(c["path"], c["line"]) for c in gh.state.review_comments_on("octo/proj", 7)] == [("x.py", 2)]
    assert gh.state.statuses_for("octo/proj", "b" * 40)[0]["state"] == "failure"


def test_route_table_lists_the_registered_endpoints():
    routes = FakeGitHub.routes()
    assert ("POST", "/repos/{owner}/{repo}/pulls/{number}/reviews") in routes
    assert ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}") in routes
    assert ("POST", "/app/installations/{installation_id}/access_tokens") in routes


def test_fault_injection_and_diff_line_validation(gh):
    gh.state.add_fault("GET", r"/pulls/7$", status=502, times=1)
    repo = _client(gh).get_repo("octo/proj")
    with pytest.raises(github.GithubException) as info:
        repo.get_pull(7)
    assert info.value.status == 502
    pull = repo.get_pull(7)
    gh.state.pulls[("octo/proj", 7)]["_diff_lines"] = {"x.py": {1}}
    with pytest.raises(github.GithubException) as info:
        pull.create_review(
            body="", event="COMMENT", comments=[{"path": "x.py", "line": 9, "side": "RIGHT", "body": "b"}]
        )
    assert info.value.status == 422


def test_shared_examples_are_rewritten_to_the_fake_origin(gh):
    """Reads the shared webhook examples (shared/fixtures/github-webhooks/pull_request)."""
    raw = load_payload("pull_request", "opened.payload")
    assert raw["pull_request"]["url"].startswith("https://api.github.com/")
    event = pull_request_event("opened", gh.state.pulls[("octo/proj", 7)], gh.origin)
    assert event["pull_request"]["url"] == f"{gh.origin}/repos/octo/proj/pulls/7"
    assert "api.github.com" not in str(event)


def test_enterprise_style_base_url_prefix():
    """PyGithub with a GitHub Enterprise base URL (`/api/v3`): the prefix is stripped before routing
    and the URLs in answers carry it."""
    with FakeGitHub(path_prefix="/api/v3") as fake:
        fake.state.add_repo("octo/ghe")
        fake.state.add_pull("octo/ghe", 1, "c" * 40, "d" * 40)
        pull = _client(fake).get_repo("octo/ghe").get_pull(1)
        assert pull.url == f"{fake.origin}/api/v3/repos/octo/ghe/pulls/1"
        pull.as_issue().create_comment("via the prefix")
        assert [c["body"] for c in fake.state.comments_on("octo/ghe", 1)] == ["via the prefix"]


def test_vendored_payloads_match_the_shared_examples():
    """The copy in fake_github/payloads/ must stay identical to shared/fixtures/github-webhooks/."""
    from pathlib import Path

    from tests.reviewbot.fake_github.webhooks import FIXTURES_DIR

    shared = next(
        (
            p / "shared" / "fixtures" / "github-webhooks"
            for p in Path(__file__).resolve().parents
            if (p / "shared" / "fixtures" / "github-webhooks").is_dir()
        ),
        None,
    )
    if shared is None:
        pytest.skip("shared/fixtures/github-webhooks is not checked out here: nothing to compare the copy with")
    shared_files = {p.relative_to(shared): p.read_bytes() for p in shared.rglob("*") if p.is_file()}
    copied = {p.relative_to(FIXTURES_DIR): p.read_bytes() for p in FIXTURES_DIR.rglob("*") if p.is_file()}
    assert copied == shared_files
