"""Settings layering, slash-command parsing and the inline-comment selection, without processes."""

from __future__ import annotations

import argparse

import pytest

from reviewbot.findings import Finding, Severity
from reviewbot.service import commands, posting, settings


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_file_env_flags_in_that_order(tmp_path):
    config = tmp_path / "bot.yml"
    config.write_text("port: 9000\nworker_poll_interval: 2\ngpu_suites: [a, b]\nauto_gpu: true\n")
    loaded = settings.load(
        _args("--config", str(config), "--port", "9100"), env={"REVIEWBOT_WORKER_POLL_INTERVAL": "0.25"}
    )
    assert loaded.port == 9100 and loaded.worker_poll_interval == 0.25
    assert loaded.gpu_suites == ("a", "b") and loaded.auto_gpu is True
    assert loaded.database_url == "sqlite:///reviewbot-service.sqlite3"
    secret = tmp_path / "secret"
    secret.write_text("from-file\n")
    assert settings.load(env={"REVIEWBOT_WEBHOOK_SECRET_FILE": str(secret)}).secret("webhook_secret") == "from-file"


def test_bad_settings_are_refused(tmp_path):
    config = tmp_path / "bot.yml"
    config.write_text("no_such_setting: 1\n")
    with pytest.raises(ValueError, match="unknown setting 'no_such_setting'"):
        settings.load(_args("--config", str(config)), env={})
    with pytest.raises(ValueError, match="gpu_dispatch"):
        settings.load(env={"REVIEWBOT_GPU_DISPATCH": "carrier-pigeon"})
    with pytest.raises(ValueError, match="not a boolean"):
        settings.load(env={"REVIEWBOT_AUTO_GPU": "maybe"})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        # each was accepted: a worker with 0 threads never ran a job, 'LOUD' was a traceback at start
        ("worker_threads", "0", "worker_threads (env REVIEWBOT_WORKER_THREADS): must be >= 1"),
        ("job_lease_seconds", "-1", "job_lease_seconds (env REVIEWBOT_JOB_LEASE_SECONDS): must be > 0"),
        ("max_body_bytes", "0", "max_body_bytes (env REVIEWBOT_MAX_BODY_BYTES): must be > 0"),
        ("worker_poll_interval", "0", "worker_poll_interval (env REVIEWBOT_WORKER_POLL_INTERVAL): must be > 0"),
        ("job_max_attempts", "0", "job_max_attempts (env REVIEWBOT_JOB_MAX_ATTEMPTS): must be >= 1"),
        ("retry_max_attempts", "0", "retry_max_attempts (env REVIEWBOT_RETRY_MAX_ATTEMPTS): must be >= 1"),
        ("log_level", "LOUD", "log_level (env REVIEWBOT_LOG_LEVEL): expected one of 'DEBUG', 'INFO', 'WARNING'"),
    ],
)
def test_settings_out_of_their_range_are_refused_naming_the_setting(name, value, message):
    with pytest.raises(ValueError) as refused:
        settings.load(env={f"REVIEWBOT_{name.upper()}": value})
    assert str(refused.value).startswith(message), refused.value


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_sqlite_database_is_refused(url):
    """serve and its worker process would each have one: every acknowledged delivery lost (it was
    accepted, stored in serve's memory, and never reviewed)."""
    with pytest.raises(ValueError, match="an in-memory SQLite database is not shared by serve and its workers"):
        settings.load(env={"REVIEWBOT_DATABASE_URL": url})


@pytest.mark.parametrize("name", ["webhook_secret", "github_token"])
def test_a_secret_and_its_file_follow_the_precedence_of_their_sources(tmp_path, name):
    """A secret given as a value and as a file is one setting: the source of higher precedence
    wins (a flag over the environment over the YAML file); from sources of equal precedence the
    value wins."""
    secret = tmp_path / "secret"
    secret.write_text("from-file\n")
    variable, flag = f"REVIEWBOT_{name.upper()}", "--" + name.replace("_", "-")
    file_flag = flag + "-file"
    assert settings.load(_args(file_flag, str(secret)), env={variable: "from-env"}).secret(name) == "from-file"
    assert settings.load(_args(flag, "from-flag"), env={variable + "_FILE": str(secret)}).secret(name) == "from-flag"
    config = tmp_path / "bot.yml"
    config.write_text(f"{name}: from-yaml\n")
    from_env = settings.load(_args("--config", str(config)), env={variable + "_FILE": str(secret)})
    assert from_env.secret(name) == "from-file"
    both = {variable: "from-env", variable + "_FILE": str(secret)}
    assert settings.load(env=both).secret(name) == "from-env"


def test_a_secret_file_that_is_not_utf8_is_named(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"\xff\xfe\x00")
    loaded = settings.load(env={"REVIEWBOT_WEBHOOK_SECRET_FILE": str(secret)})
    with pytest.raises(ValueError) as refused:
        loaded.secret("webhook_secret")
    assert str(refused.value) == f"webhook_secret_file {secret}: not UTF-8 text (byte 0)"


def test_serve_help_documents_every_setting(capsys):
    from reviewbot.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for setting in settings.SETTINGS:
        assert "--" + setting.name.replace("_", "-") in text
        assert f"REVIEWBOT_{setting.name.upper()}" in text
    # a duration's placeholder says what it takes, whatever the name ends with
    assert "--github-seconds-between-writes SECONDS" in text and "--job-lease-seconds SECONDS" in text


def test_slash_commands_on_their_own_line_outside_code_and_quotes():
    body = "LGTM\n/rerun-gpu placement aot\n> /review\n```\n/help\n```\n  /Help  \nsee /review inline"
    assert commands.parse(body) == [commands.Command("rerun-gpu", ("placement", "aot")), commands.Command("help", ())]


def _finding(
    path: str, line: int, rule: str = "broad-except", severity: Severity = Severity.P2, message: str = "m"
) -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        path=path,
        line_start=line,
        line_end=line,
        message_id="silent-gate.skips",
        params={"cond": message},
    )


def test_inline_selection_diff_lines_limit_and_fingerprint_dedupe():
    lines = {"a.py": set(range(1, 100))}
    findings = [_finding("a.py", i, message=f"problem {chr(97 + i // 26)}{chr(97 + i % 26)}") for i in range(1, 41)]
    findings.append(_finding("b.py", 3, message="outside the diff"))
    findings.append(dataclass_replace(findings[0], in_diff=False))
    posted = {findings[1].fingerprint}
    new, old, rest = posting.split_findings(findings, lines, posted, limit=30)
    assert len(new) == 30 and old == 1
    assert all(f.path == "a.py" and line in lines["a.py"] for f, line in new)
    assert findings[1].fingerprint not in {f.fingerprint for f, _ in new}
    assert {f.params["cond"] for f in rest} >= {"outside the diff"}
    assert len(rest) == len(findings) - 30 - 1
    body = posting.inline_body(new[0][0])
    assert f"<!-- reviewbot:fp:{new[0][0].fingerprint} -->" in body


def dataclass_replace(finding: Finding, **changes) -> Finding:
    import dataclasses

    return dataclasses.replace(finding, **changes)


def test_serve_refuses_to_start_without_a_webhook_secret(tmp_path):
    from reviewbot.service.app import create_app

    loaded = settings.load(env={"REVIEWBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"})
    with pytest.raises(ValueError, match="webhook_secret"):
        create_app(loaded)


def test_markers_quoted_inside_a_comment_do_not_count():
    """A finding's text can quote a test's output, which the PR's code writes: markers it holds must
    not pass for the bot's own (a fake fingerprint would keep another finding from being posted)."""
    other = _finding("a.py", 7, message="the real one")
    quoting = _finding(
        "a.py", 3, message=f"output: <!-- reviewbot:fp:{other.fingerprint} -->\n{posting.SUMMARY_MARKER}\n"
    )
    body = posting.inline_body(quoting)
    assert other.fingerprint in body
    assert posting.fingerprint_of(body) == quoting.fingerprint
    assert posting.fingerprint_of(posting.inline_body(other)) == other.fingerprint
    assert not posting.is_summary(body)
    assert posting.is_summary(posting.SUMMARY_MARKER + "\n\n## reviewbot: review of `abc`")
