"""Service settings: defaults < YAML file < environment (`REVIEWBOT_<NAME>`) < command-line flags.

Every setting is declared once in `SETTINGS` with its help text; `add_arguments` turns the table
into `--flags` (so `reviewbot serve --help` documents each) and `load` resolves the layers.
Secrets (webhook secret, token, private key) may come from `*_FILE` paths rather than values.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

ENV_PREFIX = "REVIEWBOT_"
GPU_DISPATCH_MODES = ("local", "actions")


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _list(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.replace(",", " ").split() if part)


SETTINGS: tuple[Setting, ...] = (
    Setting("host", "127.0.0.1", str, "address to listen on"),
    Setting("port", 8080, int, "port to listen on"),
    Setting(
        "webhook_secret",
        "",
        str,
        "GitHub App webhook secret (required; deliveries are verified with "
        "X-Hub-Signature-256). Or webhook_secret_file",
    ),
    Setting("webhook_secret_file", "", str, "file holding the webhook secret"),
    Setting(
        "github_api_url",
        "https://api.github.com",
        str,
        "GitHub REST API base URL (GitHub Enterprise: https://HOST/api/v3)",
    ),
    Setting(
        "github_token",
        "",
        str,
        "plain token (PAT or installation token) when not running as an App; "
        "statuses are commit statuses. Or github_token_file",
    ),
    Setting("github_token_file", "", str, "file holding the token"),
    Setting(
        "app_id",
        "",
        str,
        "GitHub App id; with app_private_key_file the bot authenticates as the App "
        "(installation tokens refreshed automatically) and reports check runs",
    ),
    Setting("app_private_key_file", "", str, "PEM private key of the GitHub App"),
    Setting(
        "bot_login",
        "",
        str,
        "the bot's own login (comments by it are ignored); default: asked from GitHub "
        "(GET /user, or GET /app -> '<slug>[bot]')",
    ),
    Setting(
        "database_url",
        "sqlite:///reviewbot-service.sqlite3",
        str,
        "SQLAlchemy URL of the state database "
        "(deliveries, jobs, reviews, suite runs); PostgreSQL: postgresql+psycopg://USER@HOST/DB",
    ),
    Setting("work_dir", "reviewbot-work", str, "directory for repository checkouts and suite logs"),
    Setting(
        "embedded_worker",
        True,
        _bool,
        "`serve` starts one `reviewbot worker` process beside it (its child: restarted when it exits, stopped "
        "with serve; reviews never hold up webhook answers); false when separately run "
        "`reviewbot worker` processes share the database",
    ),
    Setting(
        "worker_threads",
        1,
        int,
        "jobs one worker runs at once; 2 or more keep a long GPU run from holding up reviews (jobs that write "
        "one PR's summary still run one at a time; local GPU runs take turns on the machine)",
    ),
    Setting("worker_poll_interval", 0.5, float, "seconds between queue polls when idle"),
    Setting(
        "job_lease_seconds",
        60.0,
        float,
        "a running job's lease; the worker renews it every third of it. "
        "A job whose lease expired (worker killed) is claimed again",
    ),
    Setting(
        "job_max_attempts",
        5,
        int,
        "runs of one job (an error, or its worker killed) before it is marked failed and its PR told why",
    ),
    Setting(
        "job_retry_backoff_seconds",
        10.0,
        float,
        "wait before a job that hit an unexpected error runs again (doubles per attempt)",
    ),
    Setting(
        "unsandboxed",
        False,
        _bool,
        "run the code of same-repository PRs even where no sandbox can be built (never a fork's); by default "
        "the review then says why the suites, the key probe and the test plan did not run",
    ),
    Setting(
        "worker_heartbeat_seconds",
        5.0,
        float,
        "a worker records a heartbeat this often (table `workers`, shown by /healthz); serve's own worker "
        "is unhealthy after three missed beats",
    ),
    Setting(
        "delivery_retention_days",
        14.0,
        float,
        "processed deliveries (their bodies) and finished jobs are deleted this long after they ended",
    ),
    Setting(
        "database_max_mb",
        0,
        int,
        "SQLite only: cap on the database's size in MiB (0: none); writes past it fail and deliveries "
        "are answered 503 until pruning or the operator frees room",
    ),
    Setting(
        "max_body_bytes",
        25 * 1024 * 1024,
        int,
        "largest accepted delivery body (413 above, refused while it streams in)",
    ),
    Setting(
        "gpu_dispatch",
        "local",
        str,
        "how GPU suites run: 'local' (this worker runs them through the suite "
        "runner) or 'actions' (dispatch the gpu-regression workflow)",
    ),
    Setting(
        "gpu_suites",
        (),
        _list,
        "suites `/rerun-gpu` runs when none are named (default: every suite in .reviewbot.yml that needs a GPU)",
    ),
    Setting(
        "auto_gpu",
        False,
        _bool,
        "also queue the GPU suites on every push of a same-repository PR "
        "(never on forks: those need a maintainer's /rerun-gpu for that exact head SHA)",
    ),
    Setting("gpu_timeout_seconds", 3600.0, float, "time limit of one GPU suite run"),
    Setting("max_inline_comments", 30, int, "inline review comments per review at most"),
    Setting("retry_backoff_seconds", 2.0, float, "first backoff after a GitHub 5xx (doubles per attempt)"),
    Setting("retry_max_attempts", 6, int, "attempts of one GitHub API operation"),
    Setting("retry_max_wait_seconds", 900.0, float, "longest wait for a rate-limit reset before retrying"),
    Setting("github_timeout_seconds", 30.0, float, "timeout of one GitHub API request"),
    Setting("log_level", "INFO", str, "level of the 'reviewbot' logger"),
)
_BY_NAME = {s.name: s for s in SETTINGS}


@dataclasses.dataclass(frozen=True)
class Settings:
    values: Mapping[str, Any]

    def __getattr__(self, name: str) -> Any:
        if name in _BY_NAME:
            return self.values[name]
        raise AttributeError(name)

    def replace(self, **changes: Any) -> Settings:
        unknown = set(changes) - set(_BY_NAME)
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        return Settings({**self.values, **changes})

    def secret(self, name: str) -> str:
        """`name`'s value, or the stripped content of `<name>_file` when the value is empty."""
        value = self.values[name]
        path = self.values.get(f"{name}_file")
        if not value and path:
            if not Path(path).is_file():
                raise ValueError(f"{name}_file {path}: no such file")
            return Path(path).read_text().strip()
        return value

    @property
    def app_auth(self) -> bool:
        return bool(self.app_id and self.app_private_key_file)

    def github_auth_problem(self) -> str:
        """Why a worker could not authenticate to GitHub with these settings ('' when it can):
        a token (`github_token` or its file), or a GitHub App's id and private key file."""
        if self.app_id or self.app_private_key_file:
            if not self.app_auth:
                return "a GitHub App needs both app_id and app_private_key_file"
            if not Path(self.app_private_key_file).is_file():
                return f"app_private_key_file {self.app_private_key_file}: no such file"
            return ""
        try:
            token = self.secret("github_token")
        except ValueError as exc:  # the token file is missing
            return str(exc)
        if not token:
            return (
                "no GitHub credentials: set REVIEWBOT_GITHUB_TOKEN or --github-token-file FILE, or app_id and "
                "app_private_key_file (a worker cannot read PRs or post reviews without them)"
            )
        return ""

    def to_json(self) -> str:
        """The resolved settings (secrets included) for `from_json` in a child process: `serve` hands
        them to its worker through a pipe, so no secret has to travel in an environment."""
        return json.dumps({name: list(v) if isinstance(v, tuple) else v for name, v in self.values.items()})

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """Settings written by `to_json`; ValueError when the text is not that."""
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != set(_BY_NAME):
            raise ValueError("settings JSON must name exactly the known settings")
        return cls({name: tuple(v) if isinstance(v, list) else v for name, v in data.items()})


def shown_database(url: str) -> str:
    """`url` (a valid SQLAlchemy URL) for a log line: its password masked; a SQLite file given
    relative also as an absolute path."""
    from sqlalchemy.engine import make_url  # here: the CLI's parser imports this module, not SQLAlchemy

    parsed = make_url(url)
    shown = parsed.render_as_string(hide_password=True)
    database = parsed.database
    if (
        parsed.get_backend_name() == "sqlite"
        and database
        and database != ":memory:"
        and not Path(database).is_absolute()
    ):
        shown += f" (file {Path(database).resolve()})"
    return shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get(f"{ENV_PREFIX}CONFIG"),
        help=f"YAML file of settings (keys as below, e.g. `port: 8080`); env {ENV_PREFIX}CONFIG",
    )
    for s in SETTINGS:
        flag = "--" + s.name.replace("_", "-")
        shown = ",".join(s.default) if isinstance(s.default, tuple) else s.default
        parser.add_argument(
            flag,
            dest=s.name,
            default=None,
            metavar="BOOL" if s.parse is _bool else s.name.split("_")[-1].upper(),
            help=f"{s.help} [env {ENV_PREFIX}{s.name.upper()}; default: {shown!s}]",
        )


def load(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """The settings from flags, environment and ``--config`` file; ``ValueError`` names a bad one."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {s.name: s.default for s in SETTINGS}
    config_path = getattr(args, "config", None) if args is not None else env.get(f"{ENV_PREFIX}CONFIG")
    if config_path:
        if not Path(config_path).is_file():
            raise ValueError(f"--config {config_path}: no such file")
        data = yaml.safe_load(Path(config_path).read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{config_path}: expected a mapping of settings")
        for key, value in data.items():
            if key not in _BY_NAME:
                raise ValueError(f"{config_path}: unknown setting {key!r}")
            values[key] = _BY_NAME[key].parse(str(value)) if not isinstance(value, (list, tuple)) else tuple(value)
    for s in SETTINGS:
        raw = env.get(f"{ENV_PREFIX}{s.name.upper()}")
        if raw is not None:
            values[s.name] = s.parse(raw)
        cli = getattr(args, s.name, None) if args is not None else None
        if cli is not None:
            values[s.name] = s.parse(cli)
    if values["gpu_dispatch"] not in GPU_DISPATCH_MODES:
        raise ValueError(f"gpu_dispatch must be one of {GPU_DISPATCH_MODES}, got {values['gpu_dispatch']!r}")
    return Settings(values)
