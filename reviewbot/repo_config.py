"""`.reviewbot.yml`: the reviewed repository's own configuration, loaded and validated.

Keys (all optional; unknown keys and wrong types raise `ConfigError` naming the key). The file's
schema is the pydantic model `ConfigFile`; `parse_config` is its loader:

- `language`: `en` or `zh`, the language of the review text.
- `cache_key.roots`: dotted names of the functions and config classes whose values make the key
  (`pkg.mod.func`, `pkg.mod.Class`). Their static closure is diffed between base and head.
- `cache_key.probe.command`: command printing `{"cases": {NAME: {"factors": {...}, "key": "..."}}}`,
  run in worktrees of both revisions; a leading `python` means the probe's interpreter (below).
- `cache_key.probe.timeout_s`: time limit for one probe run (default 120).
- `cache_key.probe.python`: the probe's interpreter, an absolute path or a program name looked up
  on `PATH` (default: the reviewing interpreter, with the `reviewbot` package masked).
- `cache_key.probe.setup`: command run once per revision's dependency files in a virtual
  environment of its own (made from `python`), which then is the probe's interpreter
  (`reviewbot.keychange.interpreter`); `cache_key.probe.setup_timeout_s`: its time limit (default 1800).
- `cache_key.vocabulary`: phrase -> factor name, used to read claims about the key in prose.
- `suites`: mapping name -> {`command`, `gpus` (default 0), `timeout_s` (default 600),
  `failure_means` (text shown when the suite fails)}. In `command`, `{junit}` is replaced by the
  JUnit XML path; a pytest command without it gets `--junitxml=PATH` appended; a leading `python`
  or `torchrun` means the reviewing interpreter (`python -m torch.distributed.run` for torchrun).
- `severity_overrides`: rule id -> severity label (`P0-BLOCKER` ... `P4-PROCESS`, or `P0` ... `P4`).
- `release_notes`: how `reviewbot release-notes` groups changes (see `reviewbot/release_notes/settings.py`).
- `config_attribute_names`: names that mark an attribute chain as a configuration flag for the
  silent-gate rule (default: config, cfg, conf, settings, options, opts, flags).
- `experiments.injection`: the exception-injection experiment (`reviewbot/experiments/exception_injection.py`):
  `command` (the tests to run with the injection; default: the review's suites that need no GPU),
  `timeout_s` (limit of one run, default 300), `max_handlers` (handlers tried per review, default 5).

Where it is read from: a pull-request review reads the file committed at the head (the base's
for what runs on the base side, e.g. key roots that moved); `reviewbot review` does the same
unless `--config FILE` names another file (to try a configuration before committing it).
`differing_keys` tells the CLI when the working tree's file differs from the committed one.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import PydanticCustomError

from reviewbot import validation
from reviewbot.gitrepo import GitRepo
from reviewbot.release_notes.settings import ReleaseNotesSettings, parse_release_notes_settings
from reviewbot.severity import Severity

CONFIG_FILE = ".reviewbot.yml"
Language = Literal["en", "zh"]
LANGUAGES: tuple[str, ...] = typing.get_args(Language)

DEFAULT_VOCABULARY: dict[str, str] = {
    "compile config": "compile_config",
    "compile_config": "compile_config",
    "inductor config": "inductor_config",
    "inductor_config": "inductor_config",
    "compiler version": "compiler_version",
    "torch version": "compiler_version",
    "compiler source": "compiler_source",
    "traced sources": "traced_sources",
    "source files": "traced_sources",
    "placements": "input_placements",
    "input placements": "input_placements",
    "graph.code": "graph_code",
    "graph code": "graph_code",
    "graph signature": "graph_signature",
    "dtype": "input_dtypes",
}

DEFAULT_CONFIG_NAMES = ("config", "cfg", "conf", "settings", "options", "opts", "flags")


class ConfigError(ValueError):
    """`.reviewbot.yml` is malformed; the message names the offending key."""


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _program(text: str) -> str:
    if "/" in text and not text.startswith("/"):
        raise ValueError(f"expected an absolute path or a program name on PATH, got {text!r}")
    return text


def _severity(label: Any) -> Severity:
    if isinstance(label, Severity):
        return label
    if not isinstance(label, str):
        raise PydanticCustomError("string_type", "expected str")
    return Severity.parse(label)


Text = Annotated[StrictStr, AfterValidator(_not_blank)]
Seconds = Annotated[StrictFloat, Field(gt=0)]
Count = Annotated[StrictInt, Field(ge=0)]
SeverityLabel = Annotated[Severity, BeforeValidator(_severity)]
Name = Annotated[str, BeforeValidator(str)]  # a suite's or rule's name: a YAML number is its text
_SECTION = ConfigDict(extra="forbid", frozen=True)
_RECORD = ConfigDict(extra="forbid")  # pydantic dataclasses: frozen by the decorator


@dataclasses.dataclass(frozen=True)
class SuiteConfig:
    """A suite to run: an entry of `suites` (`SuiteEntry`, named by its key), or one the engine makes
    (the test-plan check, the injection experiment)."""

    name: str
    command: str
    gpus: int = 0
    timeout_s: float = 600.0
    failure_means: str = ""


@pydantic_dataclass(frozen=True, config=_RECORD)
class ProbeConfig:
    """`cache_key.probe`. `python`: absolute path or program name (None: the reviewing interpreter);
    `setup`: command preparing a cached virtual environment for the probe (None: no environment of
    its own)."""

    command: Text
    timeout_s: Seconds = 120.0
    python: Annotated[Text, AfterValidator(_program)] | None = None
    setup: Text | None = None
    setup_timeout_s: Seconds = 1800.0


@pydantic_dataclass(frozen=True, config=_RECORD)
class InjectionConfig:
    """`experiments.injection`, the exception-injection experiment. `command`: None runs the
    review's suites that need no GPU; `timeout_s`: limit of one run (capped by a suite's own);
    `max_handlers`: handlers tried per review (the rest stay unconfirmed, saying so)."""

    command: StrictStr | None = None
    timeout_s: Seconds = 300.0
    max_handlers: Count = 5


class SuiteEntry(BaseModel):
    """One entry of `suites` (its name is the key)."""

    model_config = _SECTION
    command: StrictStr
    gpus: Count = 0
    timeout_s: Seconds = 600.0
    failure_means: StrictStr = ""


class CacheKeySection(BaseModel):
    model_config = _SECTION
    roots: list[StrictStr] = []
    probe: ProbeConfig | None = None
    vocabulary: dict[StrictStr, StrictStr] | None = None

    @field_validator("probe", "vocabulary", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        """Absent means the default; written but empty (`probe:`) is a mistake."""
        if value is None:
            raise PydanticCustomError("dict_type", "expected a mapping")
        return value


class ExperimentsSection(BaseModel):
    model_config = _SECTION
    injection: InjectionConfig = InjectionConfig()


class ConfigFile(BaseModel):
    """The schema of `.reviewbot.yml` as written (`RepoConfig` is what the review uses).
    `release_notes` has a loader of its own (`parse_release_notes_settings`)."""

    model_config = _SECTION
    language: Language = "en"
    cache_key: CacheKeySection = CacheKeySection()
    suites: dict[Name, SuiteEntry] = {}
    severity_overrides: dict[Name, SeverityLabel] = {}
    config_attribute_names: list[StrictStr] = list(DEFAULT_CONFIG_NAMES)
    release_notes: Any = None
    experiments: ExperimentsSection = ExperimentsSection()


@dataclasses.dataclass(frozen=True)
class RepoConfig:
    language: str = "en"
    key_roots: tuple[str, ...] = ()
    probe: ProbeConfig | None = None
    vocabulary: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_VOCABULARY))
    suites: dict[str, SuiteConfig] = dataclasses.field(default_factory=dict)
    severity_overrides: dict[str, Severity] = dataclasses.field(default_factory=dict)
    config_attribute_names: tuple[str, ...] = DEFAULT_CONFIG_NAMES
    release_notes: ReleaseNotesSettings = dataclasses.field(default_factory=ReleaseNotesSettings)
    injection: InjectionConfig = dataclasses.field(default_factory=InjectionConfig)

    def suite(self, name: str) -> SuiteConfig:
        if name not in self.suites:
            raise ValueError(f"unknown suite {name!r}; configured: {sorted(self.suites)}")
        return self.suites[name]


def _config_error(exc: ValidationError) -> ConfigError:
    """The first problem of `exc` as one line naming the key."""
    error = exc.errors()[0]
    key = validation.key_path(error["loc"]) or "<top level>"
    text = validation.problem(error)
    if error["type"] in validation.UNKNOWN_KEY_ERRORS:
        text += f" (allowed: {', '.join(validation.allowed_keys(ConfigFile, error['loc'][:-1]))})"
    return ConfigError(f"{key}: {text}")


def parse_config(text: str) -> RepoConfig:
    """Validate YAML text; an empty document gives the defaults."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {validation.yaml_problem(exc)}") from None
    if data is None:
        return RepoConfig()
    try:
        file = ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc) from None
    try:
        release_notes = parse_release_notes_settings(file.release_notes)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc
    vocabulary = file.cache_key.vocabulary
    return RepoConfig(
        language=file.language,
        key_roots=tuple(file.cache_key.roots),
        probe=file.cache_key.probe,
        vocabulary=dict(DEFAULT_VOCABULARY)
        if vocabulary is None
        else {phrase.lower(): factor for phrase, factor in vocabulary.items()},
        suites={name: SuiteConfig(name=name, **entry.model_dump()) for name, entry in file.suites.items()},
        severity_overrides=dict(file.severity_overrides),
        config_attribute_names=tuple(file.config_attribute_names),
        release_notes=release_notes,
        injection=file.experiments.injection,
    )


def read_config_text(path: Path) -> str:
    """The text of a configuration file on disk; ConfigError when it is missing, a directory or
    not UTF-8."""
    if path.is_dir():
        raise ConfigError("is a directory (name the .reviewbot.yml file)")
    if not path.is_file():
        raise ConfigError("no such file")
    try:
        return validation.decode_utf8(path.read_bytes())
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def load_config_file(path: Path) -> RepoConfig:
    """Read and validate a configuration file outside git (`reviewbot review --config FILE`)."""
    return parse_config(read_config_text(path))


def differing_keys(committed: str | None, working: str | None) -> list[str] | None:
    """Top-level keys whose values differ between two `.reviewbot.yml` texts (None: file absent),
    sorted; [] when they agree (formatting and comments never count). None when either text is
    not a YAML mapping (the caller then says the texts differ without naming keys)."""
    if committed == working:
        return []
    try:
        old = yaml.safe_load(committed) if committed is not None else {}
        new = yaml.safe_load(working) if working is not None else {}
    except yaml.YAMLError:
        return None
    old, new = old or {}, new or {}
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    return sorted(str(k) for k in {*old, *new} if old.get(k) != new.get(k))


def load_config(repo: Path | str, revision: str | None = None) -> RepoConfig:
    """Read `.reviewbot.yml` from the working tree (revision None) or from a git revision.

    A missing file gives the defaults.
    """
    if revision is None:
        path = Path(repo) / CONFIG_FILE
        return parse_config(read_config_text(path)) if path.is_file() else RepoConfig()
    with GitRepo(repo) as git:
        text = git.read(revision, CONFIG_FILE)
    return parse_config(text) if text is not None else RepoConfig()
