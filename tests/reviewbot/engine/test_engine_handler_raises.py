"""`handler-raises` (round 19): a handler whose own code raises on every entry, on a real git repo
reviewed statically (`--suites none`).

llm-compressor's processor fallback read `exception.value` on a `ValueError` (no builtin below
`ValueError` has `value`: every entry raises `AttributeError`, the slow-processor fallback never
runs), and verl's rollout-skip patch converted with `RuntimeError(..., flush=True)` (builtin
constructors take no such keyword: every entry raises `TypeError`). Near misses stay silent: an
attribute the type has (`e.args`, `e.errno`, `e.reason` of `UnicodeDecodeError` under `ValueError`),
the repository's own exception class with a `value` attribute, a read guarded by `hasattr` or under
a branch, a third-party class named like a builtin (`requests.exceptions.ConnectionError`), a
keyword the builtin takes (`ImportError(name=...)`), and `flush=True` where it belongs, on `print`."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

LOADER = """
import logging

import requests

from pkg.errors import ParseError

logger = logging.getLogger(__name__)


def load_processor(load, source):
    try:
        return load(source, fast=True)
    except ValueError as exception:
        if "trust_remote_code=True" in exception.value:
            raise ValueError(f"{source} needs trust_remote_code") from exception
        logger.debug("falling back to the slow processor")
        return load(source, fast=False)


def patch(worker, wrap):
    try:
        worker.generate = wrap(worker.generate)
    except Exception as e:
        raise RuntimeError("failed to patch generate", flush=True) from e


def lookup(table, key):
    try:
        return table[key]
    except KeyError as e:
        raise LookupError(f"missing {e.args[0]}") from e


def read_header(path):
    try:
        with open(path, "rb") as f:
            return f.read(16)
    except OSError as e:
        logger.warning("cannot read %s: errno %s", path, e.errno)
        return b""


def decode(raw):
    try:
        return int(raw.decode("utf-8"))
    except ValueError as e:
        logger.warning("bad input: %s", e.reason)
        return 0


def parse(parser, text):
    try:
        return parser(text)
    except ParseError as e:
        logger.warning("parse failed at %s", e.value)
        return None


def convert(load, source):
    try:
        return load(source)
    except ValueError as e:
        if hasattr(e, "value") and e.value:
            raise RuntimeError(f"cannot convert {e.value}") from e
        raise


def convert_branch(load, source, verbose):
    try:
        return load(source)
    except ValueError as e:
        if verbose:
            logger.warning("value %s", e.value)
        raise


def fetch(url):
    try:
        return requests.get(url, timeout=5)
    except requests.exceptions.ConnectionError as e:
        logger.warning("no connection: %s", e.response)
        return None


def plugin(name, importer):
    try:
        return importer(name)
    except Exception as e:
        raise ImportError(f"plugin {name} failed", name=name) from e


def patch_printed(worker, wrap):
    try:
        worker.generate = wrap(worker.generate)
    except Exception as e:
        print("failed to patch generate", flush=True)
        raise RuntimeError("failed to patch generate") from e
"""

ERRORS = """
class ParseError(ValueError):
    def __init__(self, message, value):
        super().__init__(message)
        self.value = value
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("handler_raises")
    base = {"pkg/__init__.py": "", "pkg/errors.py": ERRORS, "pkg/loader.py": "def unused():\n    return None\n"}
    return review_shapes(path, base, {"pkg/loader.py": LOADER})


def test_an_attribute_the_caught_builtin_lacks_raises_in_the_handler(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/loader.py", "load_processor")["handler-raises"]
    assert finding.severity is Severity.P2
    assert finding.message_id == "handler-raises.missing-attribute"
    assert finding.params["attribute"] == "value"
    assert "raises `AttributeError` itself on every entry" in finding.message


def test_a_builtin_exception_built_with_a_keyword_raises_in_the_handler(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/loader.py", "patch")["handler-raises"]
    assert finding.severity is Severity.P2
    assert finding.message_id == "handler-raises.keyword-argument"
    assert (finding.params["type"], finding.params["keyword"]) == ("RuntimeError", "flush")
    assert "raises `TypeError` itself" in finding.message


@pytest.mark.parametrize(
    "qualname",
    [
        "lookup",
        "read_header",
        "decode",
        "parse",
        "convert",
        "convert_branch",
        "fetch",
        "plugin",
        "patch_printed",
    ],
)
def test_near_misses_stay_silent(review: list[Finding], qualname: str) -> None:
    assert "handler-raises" not in findings_by_rule(review, "pkg/loader.py", qualname)
