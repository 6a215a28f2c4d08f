"""`.reviewbot.yml`: the reviewed repository's own configuration, loaded and validated.

Keys (all optional; unknown keys and wrong types raise `ConfigError` naming the key):

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
from pathlib import Path
from typing import Any

import yaml

from reviewbot.gitrepo import GitRepo
from reviewbot.release_notes.settings import ReleaseNotesSettings, parse_release_notes_settings
from reviewbot.severity import Severity

CONFIG_FILE = ".reviewbot.yml"
LANGUAGES = ("en", "zh")

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


@dataclasses.dataclass(frozen=True)
class SuiteConfig:
    name: str
    command: str
    gpus: int = 0
    timeout_s: float = 600.0
    failure_means: str = ""


@dataclasses.dataclass(frozen=True)
class ProbeConfig:
    """`python`: absolute path or program name (None: the reviewing interpreter); `setup`: command
    preparing a cached virtual environment for the probe (None: no environment of its own)."""

    command: str
    timeout_s: float = 120.0
    python: str | None = None
    setup: str | None = None
    setup_timeout_s: float = 1800.0


@dataclasses.dataclass(frozen=True)
class InjectionConfig:
    """The exception-injection experiment. `command`: None runs the review's suites that need no
    GPU; `timeout_s`: limit of one run (capped by a suite's own); `max_handlers`: handlers tried per
    review (the rest stay unconfirmed, saying so)."""

    command: str | None = None
    timeout_s: float = 300.0
    max_handlers: int = 5


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


def _expect(value: Any, kind: type | tuple[type, ...], key: str) -> Any:
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ConfigError(f"{key}: expected a number, got a boolean")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(f"{key}: expected {names}, got {type(value).__name__}")
    return value


def _check_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            prefix = f"{where}." if where else ""
            raise ConfigError(f"{prefix}{key}: unknown key (allowed: {', '.join(sorted(allowed))})")


def _text(value: Any, key: str) -> str:
    text = _expect(value, str, key)
    if not text.strip():
        raise ConfigError(f"{key}: must not be empty")
    return text


def _seconds(value: Any, key: str) -> float:
    seconds = float(_expect(value, (int, float), key))
    if seconds <= 0:
        raise ConfigError(f"{key}: must be > 0")
    return seconds


def _parse_probe(pr: dict[str, Any]) -> ProbeConfig:
    _check_keys(pr, {"command", "timeout_s", "python", "setup", "setup_timeout_s"}, "cache_key.probe")
    if "command" not in pr:
        raise ConfigError("cache_key.probe.command: required")
    python = None
    if "python" in pr:
        python = _text(pr["python"], "cache_key.probe.python")
        if "/" in python and not python.startswith("/"):
            raise ConfigError(
                f"cache_key.probe.python: expected an absolute path or a program name on PATH, got {python!r}"
            )
    return ProbeConfig(
        command=_text(pr["command"], "cache_key.probe.command"),
        timeout_s=_seconds(pr.get("timeout_s", 120), "cache_key.probe.timeout_s"),
        python=python,
        setup=_text(pr["setup"], "cache_key.probe.setup") if "setup" in pr else None,
        setup_timeout_s=_seconds(pr.get("setup_timeout_s", 1800), "cache_key.probe.setup_timeout_s"),
    )


def parse_config(text: str) -> RepoConfig:
    """Validate YAML text; an empty document gives the defaults."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{CONFIG_FILE}: not valid YAML: {exc}") from exc
    if data is None:
        return RepoConfig()
    _expect(data, dict, "<top level>")
    _check_keys(
        data,
        {
            "language",
            "cache_key",
            "suites",
            "severity_overrides",
            "config_attribute_names",
            "release_notes",
            "experiments",
        },
        "",
    )
    language = _expect(data.get("language", "en"), str, "language")
    if language not in LANGUAGES:
        raise ConfigError(f"language: expected one of {LANGUAGES}, got {language!r}")

    roots: tuple[str, ...] = ()
    probe = None
    vocabulary = dict(DEFAULT_VOCABULARY)
    if "cache_key" in data:
        ck = _expect(data["cache_key"], dict, "cache_key")
        _check_keys(ck, {"roots", "probe", "vocabulary"}, "cache_key")
        roots = tuple(
            _expect(r, str, "cache_key.roots[]") for r in _expect(ck.get("roots", []), list, "cache_key.roots")
        )
        if "probe" in ck:
            pr = _expect(ck["probe"], dict, "cache_key.probe")
            probe = _parse_probe(pr)
        if "vocabulary" in ck:
            voc = _expect(ck["vocabulary"], dict, "cache_key.vocabulary")
            vocabulary = {}
            for phrase, factor in voc.items():
                _expect(phrase, str, "cache_key.vocabulary key")
                vocabulary[phrase.lower()] = _expect(factor, str, f"cache_key.vocabulary.{phrase}")

    suites: dict[str, SuiteConfig] = {}
    for name, spec in _expect(data.get("suites", {}), dict, "suites").items():
        where = f"suites.{name}"
        _expect(spec, dict, where)
        _check_keys(spec, {"command", "gpus", "timeout_s", "failure_means"}, where)
        if "command" not in spec:
            raise ConfigError(f"{where}.command: required")
        gpus = _expect(spec.get("gpus", 0), int, f"{where}.gpus")
        if gpus < 0:
            raise ConfigError(f"{where}.gpus: must be >= 0")
        timeout = float(_expect(spec.get("timeout_s", 600), (int, float), f"{where}.timeout_s"))
        if timeout <= 0:
            raise ConfigError(f"{where}.timeout_s: must be > 0")
        suites[str(name)] = SuiteConfig(
            name=str(name),
            command=_expect(spec["command"], str, f"{where}.command"),
            gpus=gpus,
            timeout_s=timeout,
            failure_means=_expect(spec.get("failure_means", ""), str, f"{where}.failure_means"),
        )

    overrides: dict[str, Severity] = {}
    for rule, label in _expect(data.get("severity_overrides", {}), dict, "severity_overrides").items():
        try:
            overrides[str(rule)] = Severity.parse(_expect(label, str, f"severity_overrides.{rule}"))
        except ValueError as exc:
            raise ConfigError(f"severity_overrides.{rule}: {exc}") from exc

    names = DEFAULT_CONFIG_NAMES
    if "config_attribute_names" in data:
        raw = _expect(data["config_attribute_names"], list, "config_attribute_names")
        names = tuple(_expect(n, str, "config_attribute_names[]") for n in raw)

    try:
        release_notes = parse_release_notes_settings(data.get("release_notes"))
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc

    return RepoConfig(
        language=language,
        injection=_injection(data.get("experiments", {})),
        key_roots=roots,
        probe=probe,
        vocabulary=vocabulary,
        suites=suites,
        severity_overrides=overrides,
        config_attribute_names=names,
        release_notes=release_notes,
    )


def load_config_file(path: Path) -> RepoConfig:
    """Read and validate a configuration file outside git (`reviewbot review --config FILE`)."""
    if not path.is_file():
        raise ConfigError("no such file")
    return parse_config(path.read_text())


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


def _injection(raw: Any) -> InjectionConfig:
    experiments = _expect(raw, dict, "experiments")
    _check_keys(experiments, {"injection"}, "experiments")
    spec = _expect(experiments.get("injection", {}), dict, "experiments.injection")
    _check_keys(spec, {"command", "timeout_s", "max_handlers"}, "experiments.injection")
    command = _expect(spec["command"], str, "experiments.injection.command") if "command" in spec else None
    timeout = float(_expect(spec.get("timeout_s", 300), (int, float), "experiments.injection.timeout_s"))
    if timeout <= 0:
        raise ConfigError("experiments.injection.timeout_s: must be > 0")
    cap = _expect(spec.get("max_handlers", 5), int, "experiments.injection.max_handlers")
    if cap < 0:
        raise ConfigError("experiments.injection.max_handlers: must be >= 0")
    return InjectionConfig(command, timeout, cap)


def load_config(repo: Path | str, revision: str | None = None) -> RepoConfig:
    """Read `.reviewbot.yml` from the working tree (revision None) or from a git revision.

    A missing file gives the defaults.
    """
    if revision is None:
        path = Path(repo) / CONFIG_FILE
        return parse_config(path.read_text()) if path.is_file() else RepoConfig()
    with GitRepo(repo) as git:
        text = git.read(revision, CONFIG_FILE)
    return parse_config(text) if text is not None else RepoConfig()
