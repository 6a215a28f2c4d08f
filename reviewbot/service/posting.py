"""What the bot writes on a PR: the summary comment, inline review comments, statuses/check runs.

Every write is an upsert keyed by a hidden marker, so a retried or restarted job finds what an
earlier attempt already wrote instead of writing it twice:
- the summary comment carries `SUMMARY_MARKER` and is edited in place; identical content is not sent;
- each inline comment carries its finding's fingerprint; fingerprints already on the PR are skipped;
- a status (or check run, as an App) is only created when the latest one of its context differs.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from unidiff import PatchSet

from reviewbot.service.github_api import GitHub

logger = logging.getLogger(__name__)

SUMMARY_MARKER = "<!-- reviewbot:summary -->"
_FP_MARKER = "<!-- reviewbot:fp:{} -->"
_FP_RE = re.compile(r"<!-- reviewbot:fp:([0-9a-f]+) -->")
STATIC_CONTEXT = "reviewbot/static"
GPU_CONTEXT = "reviewbot/gpu-regression"
CACHE_LABEL = "cache: invalidates"
BODY_LIMIT = 65536  # characters GitHub takes in one comment (a 422 past it)
_CUT_NOTE = "\n\n_(cut here: the rest is longer than GitHub takes in one comment, {limit:,} characters)_\n"


def fit(body: str, limit: int = BODY_LIMIT) -> str:
    """`body`, or its start with a note saying it was cut, `limit` characters at most (an open code
    fence is closed before the note). Texts quote the PR's own output (a failure message, a test
    id), which can be any length."""
    if len(body) <= limit:
        return body
    note = _CUT_NOTE.format(limit=limit)
    kept = body[: limit - len(note) - len("\n```")]
    if kept.count("```") % 2:
        kept += "\n```"
    return kept + note


class FindingLike(Protocol):
    rule: str
    path: str
    line_start: int
    line_end: int
    message: str
    why: str
    fix: str
    in_diff: bool

    @property
    def fingerprint(self) -> str: ...

    @property
    def severity(self) -> Any: ...


def diff_lines(repo: Path, base: str, head: str) -> dict[str, set[int]]:
    """Right-side line numbers GitHub accepts review comments on: added and context lines of the
    PR's diff (merge base to head, three lines of context, as GitHub shows it)."""
    out = subprocess.run(
        ["git", "-C", str(repo), "diff", "--no-color", "--no-ext-diff", "-U3", f"{base}...{head}"],
        capture_output=True,
        text=True,
        errors="replace",
        check=True,
    ).stdout
    lines: dict[str, set[int]] = {}
    for patched in PatchSet(out):
        if patched.is_removed_file:
            continue
        target = lines.setdefault(patched.path, set())
        for hunk in patched:
            target.update(line.target_line_no for line in hunk if line.target_line_no is not None)
    return lines


def _severity_label(finding: FindingLike) -> str:
    return getattr(finding.severity, "value", str(finding.severity))


def _anchor(finding: FindingLike, lines: dict[str, set[int]]) -> int | None:
    available = lines.get(finding.path, set())
    for line in range(max(finding.line_end, finding.line_start), finding.line_start - 1, -1):
        if line in available:
            return line
    return None


def split_findings(
    findings: Iterable[FindingLike], lines: dict[str, set[int]], posted: set[str], limit: int
) -> tuple[list[tuple[FindingLike, int]], int, list[FindingLike]]:
    """(new inline comments with their line, count already commented inline, findings for the summary only).

    A finding goes inline when it is anchored to a line of the diff; those whose fingerprint is
    already on the PR are not posted again; beyond `limit` new ones, the rest stay in the summary.
    """
    new: list[tuple[FindingLike, int]] = []
    old = 0
    rest: list[FindingLike] = []
    seen = set(posted)
    for finding in sorted(findings, key=lambda f: (_severity_label(f), f.path, f.line_start)):
        line = _anchor(finding, lines) if finding.in_diff and finding.line_start > 0 else None
        if line is None:
            rest.append(finding)
        elif finding.fingerprint in seen:
            old += 1
        elif len(new) < limit:
            seen.add(finding.fingerprint)
            new.append((finding, line))
        else:
            rest.append(finding)
    return new, old, rest


def inline_body(finding: FindingLike) -> str:
    parts = [f"**{_severity_label(finding)}** `{finding.rule}`: {finding.message}"]
    if finding.why:
        parts.append(f"*Why:* {finding.why}")
    if finding.fix:
        parts.append(f"*Fix:* {finding.fix}")
    marker = _FP_MARKER.format(finding.fingerprint)
    return fit("\n\n".join(parts), BODY_LIMIT - len(marker) - 2) + "\n\n" + marker


def _last_line(body: str | None) -> str:
    return (body or "").rstrip().rsplit("\n", 1)[-1]


def fingerprint_of(body: str | None) -> str | None:
    """The fingerprint an inline comment's body carries on its last line, where `inline_body`
    puts it (a marker quoted inside a finding's text, such as a test's output, does not count)."""
    match = _FP_RE.fullmatch(_last_line(body))
    return match.group(1) if match else None


def is_summary(body: str | None) -> bool:
    """Whether a comment's body is a summary (it starts with `SUMMARY_MARKER`; one quoted inside
    another comment's text does not count)."""
    return (body or "").startswith(SUMMARY_MARKER)


def posted_fingerprints(gh: GitHub, pull: Any) -> set[str]:
    comments = gh.call("list_review_comments", lambda: list(pull.get_review_comments()))
    return {fp for c in comments if c.user.login == gh.login and (fp := fingerprint_of(c.body)) is not None}


def post_inline(gh: GitHub, pull: Any, head_sha: str, batch: Sequence[tuple[FindingLike, int]]) -> None:
    """One review with the batch's comments; after an uncertain POST, re-read the fingerprints."""
    if not batch:
        return
    wanted = {finding.fingerprint for finding, _ in batch}
    comments = [{"path": f.path, "line": line, "side": "RIGHT", "body": inline_body(f)} for f, line in batch]

    def find() -> bool | None:
        return True if wanted <= posted_fingerprints(gh, pull) else None

    commit = gh.call("get_commit", lambda: pull.base.repo.get_commit(head_sha))
    gh.upsert(
        "create_review", find, lambda: pull.create_review(commit=commit, body="", event="COMMENT", comments=comments)
    )


def upsert_summary(gh: GitHub, issue: Any, body: str) -> tuple[int, bool]:
    """Edit the PR's summary comment in place (create it the first time) on `issue` (the PR's
    conversation). Returns (id, sent)."""
    assert is_summary(body)
    sent = False

    def find() -> Any:
        for comment in issue.get_comments():
            if is_summary(comment.body) and comment.user.login == gh.login:
                return comment
        return None

    def update(comment: Any) -> Any:
        nonlocal sent
        if (comment.body or "").strip() != body.strip():
            comment.edit(body)
            sent = True
        else:
            logger.info("summary comment %s unchanged: not re-sent", comment.id)
        return comment

    def create() -> Any:
        nonlocal sent
        sent = True
        return issue.create_comment(body)

    comment = gh.upsert("summary_comment", find, create, update)
    return comment.id, sent


def reply_once(gh: GitHub, issue: Any, key: str, text: str) -> None:
    """Post `text` on the PR unless a reply with this `key` already exists."""
    marker = f"<!-- reviewbot:reply:{key} -->"

    def find() -> Any:
        for comment in issue.get_comments():
            if _last_line(comment.body) == marker and comment.user.login == gh.login:
                return comment
        return None

    body = fit(text, BODY_LIMIT - len(marker) - 2) + "\n\n" + marker
    gh.upsert("reply_comment", find, lambda: issue.create_comment(body))


def set_label(gh: GitHub, issue: Any, name: str, wanted: bool) -> bool:
    """Add or remove the label `name` on the PR's `issue`; returns whether a write was needed."""
    present = name in gh.call("list_labels", lambda: [label.name for label in issue.get_labels()])
    if wanted and not present:
        gh.call("add_label", lambda: issue.add_to_labels(name))  # adding a present label changes nothing
    elif present and not wanted:
        gh.call("remove_label", lambda: issue.remove_from_labels(name))
    return wanted != present


def set_status(gh: GitHub, repo: Any, sha: str, context: str, state: str, description: str, summary: str = "") -> None:
    """state: pending | success | failure | error. A check run when authenticated as an App."""
    description = description[:140]
    if gh.uses_app:
        _set_check_run(gh, repo, sha, context, state, description, summary)
        return

    def find() -> Any:
        for status in repo.get_commit(sha).get_statuses():
            if status.context == context:
                return status if (status.state, status.description) == (state, description) else None
        return None

    gh.upsert(
        "commit_status",
        find,
        lambda: repo.get_commit(sha).create_status(state, context=context, description=description),
    )


def _set_check_run(gh: GitHub, repo: Any, sha: str, name: str, state: str, title: str, summary: str) -> None:
    fields: dict[str, Any] = {"output": {"title": title, "summary": summary or title}}
    if state == "pending":
        fields["status"] = "in_progress"
    else:
        fields["status"] = "completed"
        # `error` (could not run) concludes `failure` too: GitHub counts `neutral` as passing for a
        # required check, so a PR whose review cannot run would pass it
        fields["conclusion"] = "success" if state == "success" else "failure"

    def find() -> Any:
        runs = list(repo.get_commit(sha).get_check_runs(check_name=name))
        return runs[0] if runs else None

    def update(run: Any) -> Any:
        unchanged = (run.status, run.conclusion, run.output.title) == (
            fields["status"],
            fields.get("conclusion"),
            title,
        )
        if not unchanged:
            run.edit(**fields)
        return run

    gh.upsert("check_run", find, lambda: repo.create_check_run(name, sha, **fields), update)
