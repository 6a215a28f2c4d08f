"""The three configuration loaders (`.reviewbot.yml`, its `release_notes` section, the service
settings) report a bad value as one line naming the key, never pydantic's multi-line text."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from reviewbot.release_notes.settings import parse_release_notes_settings
from reviewbot.repo_config import ConfigError, parse_config
from reviewbot.service import settings

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("cache_key:\n  roots: [a.b, 3]\n", "cache_key.roots[1]: expected str, got int"),
        ("cache_key:\n  vocabulary: {1: x}\n", "cache_key.vocabulary key 1: expected str, got int"),
        ("suites:\n  unit: {gpus: 1}\n", "suites.unit.command: required"),
        ("suites:\n  unit: {command: x, timeout_s: true}\n", "suites.unit.timeout_s: expected a number, got a boolean"),
        ("suites:\n  unit: {command: x, timeout_s: 0}\n", "suites.unit.timeout_s: must be > 0"),
        ("suites:\n  unit: {command: x, gpus: -1}\n", "suites.unit.gpus: must be >= 0"),
        (
            "suites:\n  unit: {command: x, name: y}\n",
            "suites.unit.name: unknown key (allowed: command, failure_means, ",
        ),
        ("suites: [unit]\n", "suites: expected a mapping, got list"),
        ("- a\n", "<top level>: expected a mapping, got list"),
        ("cache_key:\n  probe: {command: '  '}\n", "cache_key.probe.command: must not be empty"),
        ("cache_key:\n  probe:\n", "cache_key.probe: expected a mapping, got NoneType"),
        ("severity_overrides: {wide-try: 2}\n", "severity_overrides.wide-try: expected str, got int"),
        ("config_attribute_names: [cfg, [x]]\n", "config_attribute_names[1]: expected str, got list"),
        (
            "release_notes:\n  prefix_patterns: [x]\n",
            "release_notes.prefix_patterns[0]: pattern 'x' lacks the named group",
        ),
        ("release_notes:\n  categories: [A, '']\n", "release_notes.categories[1]: must not be empty"),
    ],
)
def test_reviewbot_yml_errors_are_one_line_naming_the_key(text: str, line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    message = str(caught.value)
    assert message.startswith(line), message
    assert "\n" not in message and "pydantic" not in message


def test_names_written_as_yaml_numbers_are_their_text() -> None:
    config = parse_config("suites:\n  1: {command: x}\nseverity_overrides: {2: P3}\n")
    assert config.suite("1").command == "x" and config.severity_overrides["2"].name == "P3"


def test_a_wrong_type_in_release_notes_is_a_type_error_and_unknown_keys_are_named_together() -> None:
    with pytest.raises(TypeError, match=r"^release_notes\.labels\.bug: expected str, got int$"):
        parse_release_notes_settings({"labels": {"bug": 1}})
    with pytest.raises(ValueError, match=r"^release_notes: unknown key\(s\) colour, font$"):
        parse_release_notes_settings({"font": 1, "colour": 2, "labels": []})


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_bad_service_setting_names_the_setting_and_where_its_value_came_from(tmp_path: Path) -> None:
    config = tmp_path / "bot.yml"
    config.write_text("port: [8080]\nworker_threads: 2\n")
    with pytest.raises(ValueError, match=rf"^port \({config}\): expected int, got list$"):
        settings.load(_args("--config", str(config)), env={})
    with pytest.raises(ValueError, match=r"^port \(env REVIEWBOT_PORT\): expected int, got 'eighty'$"):
        settings.load(env={"REVIEWBOT_PORT": "eighty"})
    with pytest.raises(ValueError, match=r"^job_lease_seconds \(--job-lease-seconds\): expected int or float"):
        settings.load(_args("--job-lease-seconds", "soon"), env={})
    # the file's value is overridden by a good one from a higher layer: no error
    loaded = settings.load(_args("--config", str(config)), env={"REVIEWBOT_PORT": "9001"})
    assert loaded.port == 9001 and loaded.worker_threads == 2


def test_service_settings_from_yaml_types_and_through_json(tmp_path: Path) -> None:
    config = tmp_path / "bot.yml"
    config.write_text("app_id: 123456\nembedded_worker: off\ngpu_suites: [placement, 7]\nport: '9002'\n")
    loaded = settings.load(env={"REVIEWBOT_CONFIG": str(config)})
    assert (loaded.app_id, loaded.embedded_worker, loaded.gpu_suites, loaded.port) == (
        "123456",
        False,
        ("placement", "7"),
        9002,
    )
    assert settings.Settings.from_json(loaded.to_json()) == loaded
    # REVIEWBOT_GPUS is a setting: it reaches serve's own worker through the JSON on its stdin
    # (that worker's environment has no REVIEWBOT_* variable)
    assert loaded.gpus is None
    with_gpus = settings.load(env={"REVIEWBOT_GPUS": "2"})
    assert settings.Settings.from_json(with_gpus.to_json()).gpus == 2
    with pytest.raises(ValueError, match=r"^gpus \(env REVIEWBOT_GPUS\): must be >= 0$"):
        settings.load(env={"REVIEWBOT_GPUS": "-1"})
    with pytest.raises(ValueError, match="must name exactly the known settings"):
        settings.Settings.from_json('{"port": 1}')


def test_serve_with_a_bad_setting_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "reviewbot", "serve", "--worker-threads", "many"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "reviewbot serve: worker_threads (--worker-threads): expected int, got 'many'\n"
