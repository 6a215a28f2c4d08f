"""Service settings: defaults < YAML file < environment (`REVIEWBOT_<NAME>`) < command-line flags.

Every setting is a field of the pydantic model `Settings` with its help text; `add_arguments`
turns the fields into `--flags` (so `reviewbot serve --help` documents each) and `load`, the
loader, resolves the layers and validates them at once: a bad value is one `ValueError` line naming
the setting and where its value came from. Secrets (webhook secret, token, private key) may come
from `*_FILE` paths rather than values.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from reviewbot import validation

ENV_PREFIX = "REVIEWBOT_"
GpuDispatchMode = Literal["local", "actions"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
GPU_DISPATCH_MODES: tuple[str, ...] = typing.get_args(GpuDispatchMode)
CONFIG_VARIABLE = f"{ENV_PREFIX}CONFIG"


def _bool(value: Any) -> Any:
    """Text (environment, flags, a quoted YAML value) -> bool; anything else is left to pydantic."""
    if not isinstance(value, str):
        return value
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _names(value: Any) -> Any:
    """Text `a,b c` -> ("a", "b", "c"); a YAML list is left to pydantic."""
    if not isinstance(value, str):
        return value
    return tuple(part for part in value.replace(",", " ").split() if part)


def _private_key_problem(path: Path) -> str:
    """Why the file is not a usable GitHub App key ('' when it is): a PEM private key without a
    passphrase, as GitHub hands it out. Checked at start: every job would fail on a bad one."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key  # PyGithub's own dependency

    try:
        load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:  # not PEM / not a key; TypeError: it needs a passphrase
        return f"app_private_key_file {path}: not a PEM private key without a passphrase ({exc})"
    return ""


def _database_url(value: Any) -> Any:
    """A SQLAlchemy URL of SQLite (a file) or PostgreSQL, the databases the service runs on: checked
    here so a typo is one line at start, not a traceback from the engine. The URL is never echoed (it may
    hold a password)."""
    if not isinstance(value, str):
        return value
    from sqlalchemy.engine import make_url  # here: the CLI's parser imports this module, not SQLAlchemy
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(value)
    except ArgumentError:
        raise ValueError(f"not a database URL (expected {DATABASE_URL_FORMS})") from None
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ValueError(f"{backend!r} is not a supported database (expected {DATABASE_URL_FORMS})")
    if backend == "sqlite" and url.database in (None, "", ":memory:"):
        # serve and its worker are two processes: each would have a database of its own, and
        # every acknowledged delivery would be lost at exit
        raise ValueError(
            f"an in-memory SQLite database is not shared by serve and its workers (expected {DATABASE_URL_FORMS})"
        )
    return value


DATABASE_URL_FORMS = "sqlite:///FILE or postgresql+psycopg://USER@HOST/DB"
Flag = Annotated[bool, BeforeValidator(_bool)]
Names = Annotated[tuple[str, ...], BeforeValidator(_names)]


class Settings(BaseModel):
    """The resolved settings of `serve` and `worker` (immutable)."""

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8080, ge=0, le=65535, description="port to listen on")
    webhook_secret: str = Field(
        "",
        description=(
            "GitHub App webhook secret (required; deliveries are verified with X-Hub-Signature-256). Or "
            "webhook_secret_file"
        ),
    )
    webhook_secret_file: str = Field("", description="file holding the webhook secret")
    github_api_url: str = Field(
        "https://api.github.com", description="GitHub REST API base URL (GitHub Enterprise: https://HOST/api/v3)"
    )
    github_token: str = Field(
        "",
        description=(
            "plain token (PAT or installation token) when not running as an App; statuses are commit "
            "statuses. Or github_token_file"
        ),
    )
    github_token_file: str = Field("", description="file holding the token")
    app_id: str = Field(
        "",
        description=(
            "GitHub App id; with app_private_key_file the bot authenticates as the App (installation tokens "
            "refreshed automatically) and reports check runs"
        ),
    )
    app_private_key_file: str = Field("", description="PEM private key of the GitHub App")
    bot_login: str = Field(
        "",
        description=(
            "the bot's own login (comments by it are ignored); default: asked from GitHub (GET /user, or GET "
            "/app -> '<slug>[bot]')"
        ),
    )
    database_url: Annotated[str, BeforeValidator(_database_url)] = Field(
        "sqlite:///reviewbot-service.sqlite3",
        description=(
            "SQLAlchemy URL of the state database (deliveries, jobs, reviews, suite runs); PostgreSQL: "
            "postgresql+psycopg://USER@HOST/DB"
        ),
    )
    work_dir: str = Field(
        "reviewbot-work",
        description="directory for repository checkouts and suite logs (made at start; a worker refuses "
        "to start when it cannot write in it)",
    )
    embedded_worker: Flag = Field(
        True,
        description=(
            "`serve` starts one `reviewbot worker` process beside it (its child: restarted when it exits, "
            "stopped with serve; reviews never hold up webhook answers); false when separately run "
            "`reviewbot worker` processes share the database"
        ),
    )
    worker_threads: int = Field(
        1,
        ge=1,
        description=(
            "jobs one worker runs at once; 2 or more keep a long GPU run from holding up reviews (jobs that "
            "write one PR's summary still run one at a time; local GPU runs take turns on the machine)"
        ),
    )
    worker_poll_interval: float = Field(0.5, gt=0, description="seconds between queue polls when idle")
    job_lease_seconds: float = Field(
        60.0,
        gt=0,
        description=(
            "a running job's lease; the worker renews it every third of it. A job whose lease expired "
            "(worker killed) is claimed again"
        ),
    )
    job_max_attempts: int = Field(
        5,
        ge=1,
        description="runs of one job (an error, or its worker killed) before it is marked failed and its PR told why",
    )
    job_retry_backoff_seconds: float = Field(
        10.0, ge=0, description="wait before a job that hit an unexpected error runs again (doubles per attempt)"
    )
    review_timeout_seconds: float = Field(
        3600.0,
        gt=0,
        description=(
            "time all runs of PR code in one review (suites, key probe, test plan, experiments) may take "
            "together; each run's own limit (the PR's .reviewbot.yml) is cut to what is left"
        ),
    )
    unsandboxed: Flag = Field(
        False,
        description=(
            "run the code of same-repository PRs even where no sandbox can be built (never a fork's); by "
            "default the review then says why the suites, the key probe and the test plan did not run"
        ),
    )
    worker_heartbeat_seconds: float = Field(
        5.0,
        gt=0,
        description=(
            "a worker records a heartbeat this often (table `workers`, shown by /healthz); serve's own "
            "worker is unhealthy after three missed beats"
        ),
    )
    delivery_retention_days: float = Field(
        14.0,
        gt=0,
        description="processed deliveries (their bodies) and finished jobs are deleted this long after they ended",
    )
    database_max_mb: int = Field(
        0,
        ge=0,
        description=(
            "SQLite only: cap on the database's size in MiB (0: none); writes past it fail and deliveries "
            "are answered 503 until pruning or the operator frees room"
        ),
    )
    max_body_bytes: int = Field(
        25 * 1024 * 1024, gt=0, description="largest accepted delivery body (413 above, refused while it streams in)"
    )
    header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description=(
            "time a connection may take to send a request's headers, from its opening or the previous answer; "
            "one that has not is closed without an answer (a connection sending nothing holds a socket)"
        ),
    )
    body_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description=(
            "time a delivery's body may take to arrive after its headers; a slower or stalled sender gets 408 and "
            "its connection is closed (GitHub itself gives up on a delivery after 10 s); also the time the rest of "
            "a body answered before its end (401, 413) may take before the connection is closed"
        ),
    )
    gpu_dispatch: GpuDispatchMode = Field(
        "local",
        description=(
            "how GPU suites run: 'local' (this worker runs them through the suite runner) or 'actions' "
            "(dispatch the gpu-regression workflow)"
        ),
    )
    gpu_suites: Names = Field(
        (),
        description=(
            "suites `/rerun-gpu` runs when none are named (default: every suite in .reviewbot.yml that needs a GPU)"
        ),
    )
    auto_gpu: Flag = Field(
        False,
        description=(
            "also queue the GPU suites on every push of a same-repository PR (never on forks: those need a "
            "maintainer's /rerun-gpu for that exact head SHA)"
        ),
    )
    gpu_timeout_seconds: float = Field(3600.0, gt=0, description="time limit of one GPU suite run")
    gpus: Annotated[int, Field(ge=0)] | None = Field(
        None, description="GPUs the local GPU dispatch mode gives the suites (unset: as many as `nvidia-smi -L` lists)"
    )
    max_inline_comments: int = Field(30, ge=0, description="inline review comments per review at most")
    retry_backoff_seconds: float = Field(
        2.0, ge=0, description="first backoff after a GitHub 5xx (doubles per attempt)"
    )
    retry_max_attempts: int = Field(6, ge=1, description="attempts of one GitHub API operation")
    retry_max_wait_seconds: float = Field(
        900.0, ge=0, description="longest wait for a rate-limit reset before retrying"
    )
    github_timeout_seconds: float = Field(30.0, gt=0, description="timeout of one GitHub API request")
    github_seconds_between_requests: float = Field(
        0.25,
        ge=0,
        description=(
            "least time between two GitHub API requests of one client (PyGithub's pacing, GitHub's advice "
            "against secondary rate limits); 0: no pacing"
        ),
    )
    github_seconds_between_writes: float = Field(
        1.0,
        ge=0,
        description=(
            "least time between two writing GitHub API requests (POST, PATCH, PUT, DELETE) of one client; 0: no pacing"
        ),
    )
    log_level: LogLevel = Field("INFO", description="level of the 'reviewbot' logger (DEBUG, INFO, WARNING, ERROR)")
    config_file: str = Field(
        "",
        description=(
            "(set by the loader, not a setting) the YAML file the settings came from, `--config` or "
            "REVIEWBOT_CONFIG: it may hold secrets, so PR code never sees it, like the secret files"
        ),
    )

    @property
    def values(self) -> dict[str, Any]:
        """Every setting by name."""
        return self.model_dump()

    def secret(self, name: str) -> str:
        """`name`'s value, or the stripped content of `<name>_file` when the value is empty."""
        value = getattr(self, name)
        path = getattr(self, f"{name}_file")
        if not value and path:
            if not Path(path).is_file():
                raise ValueError(f"{name}_file {path}: no such file")
            try:
                return Path(path).read_text(encoding="utf-8").strip()
            except UnicodeDecodeError as exc:
                raise ValueError(f"{name}_file {path}: not UTF-8 text (byte {exc.start})") from None
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
            return _private_key_problem(Path(self.app_private_key_file))
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

    def work_dir_problem(self) -> str:
        """Why a worker could not keep its clones and logs in `work_dir` ('' when it can): the
        directory is made (with its parents) and a file is written in it and removed. Every job
        would fail on an unusable one, so a worker (and serve with its embedded one) checks at start."""
        path = Path(self.work_dir)
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as exc:
            return f"work_dir {path.absolute()}: cannot write in it: {exc.strerror or exc}"
        return ""

    def to_json(self) -> str:
        """The resolved settings (secrets included) for `from_json` in a child process: `serve` hands
        them to its worker through a pipe, so no secret has to travel in an environment."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """Settings written by `to_json`; ValueError when the text is not that."""
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != set(cls.model_fields):
            raise ValueError("settings JSON must name exactly the known settings")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise ValueError(
                f"settings JSON: {validation.key_path(error['loc'])}: {validation.problem(error)}"
            ) from None


class Setting(NamedTuple):
    """One field of `Settings`, as `--help` shows it."""

    name: str
    default: Any
    help: str
    is_bool: bool


LOADER_FIELDS = ("config_file",)  # fields of `Settings` the loader fills in: no flag, variable or YAML key

SETTINGS: tuple[Setting, ...] = tuple(
    Setting(name, field.default, field.description or "", field.annotation is bool)
    for name, field in Settings.model_fields.items()
    if name not in LOADER_FIELDS
)


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


def _metavar(setting: Setting) -> str:
    """BOOL, SECONDS for every duration (`github_seconds_between_writes` too), else the name's last word."""
    if setting.is_bool:
        return "BOOL"
    words = setting.name.split("_")
    return "SECONDS" if "seconds" in words else words[-1].upper()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"YAML file of settings (keys as below, e.g. `port: 8080`); env {CONFIG_VARIABLE}",
    )
    for s in SETTINGS:
        flag = "--" + s.name.replace("_", "-")
        shown = ",".join(s.default) if isinstance(s.default, tuple) else "unset" if s.default is None else s.default
        parser.add_argument(
            flag,
            dest=s.name,
            default=None,
            metavar=_metavar(s),
            help=f"{s.help} [env {ENV_PREFIX}{s.name.upper()}; default: {shown!s}]",
        )


def _file_values(config_path: str) -> dict[str, Any]:
    if not Path(config_path).is_file():
        raise ValueError(f"--config {config_path}: no such file")
    try:
        text = validation.decode_utf8(Path(config_path).read_bytes())
    except ValueError as exc:
        raise ValueError(f"--config {config_path}: {exc}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"--config {config_path}: not valid YAML: {validation.yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        # ValueError, as for every bad setting: the commands report it as one line
        raise ValueError(f"{config_path}: expected a mapping of settings")  # noqa: TRY004
    for key in data:
        if key not in Settings.model_fields or key in LOADER_FIELDS:
            raise ValueError(f"{config_path}: unknown setting {key!r}")
    return data


# settings given either as a value or as `<name>_file`; one setting for precedence
SECRET_SETTINGS = ("webhook_secret", "github_token")


def _precedence(source: str) -> int:
    """The rank of a value's source as `load` records it: a flag, then the environment, then the
    YAML file."""
    if source.startswith("--"):
        return 3
    return 2 if source.startswith("env ") else 1


def load(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """The loader: settings from flags, environment (default `os.environ`) and ``--config`` file
    (or ``REVIEWBOT_CONFIG``); ``ValueError`` names a bad one and where its value came from."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    config_path = (getattr(args, "config", None) if args is not None else None) or env.get(CONFIG_VARIABLE)
    if config_path:
        for key, value in _file_values(config_path).items():
            values[key], sources[key] = value, config_path
        values["config_file"], sources["config_file"] = str(Path(config_path).resolve()), "--config"
    for name in (setting.name for setting in SETTINGS):
        variable = f"{ENV_PREFIX}{name.upper()}"
        if variable in env:
            values[name], sources[name] = env[variable], f"env {variable}"
        flag = getattr(args, name, None) if args is not None else None
        if flag is not None:
            values[name], sources[name] = flag, "--" + name.replace("_", "-")
    for name in SECRET_SETTINGS:
        file_name = f"{name}_file"
        if name in sources and file_name in sources and _precedence(sources[file_name]) > _precedence(sources[name]):
            del values[name]  # the file, given where it outranks the value, replaces it
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0])
        raise ValueError(f"{name} ({sources[name]}): {validation.problem(error)}") from None
