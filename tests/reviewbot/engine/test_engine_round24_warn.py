"""The precision benchmark's round-24 classes for warned fallbacks and failures that surface later,
next to their near misses, on real git repos reviewed statically (`--suites none`).

- A report through a one-process or one-time helper (`common.shown_level`, read by
  `broad_except._reported_fallback`): a handler that only reports the caught exception through
  `logger.warning_rank0(...)` or `print_rank_0(...)` and goes on gives nothing, as a plain warning
  does (llama-factory's SDPA redirect, ModelOpt's `config.json` rewrite). Near misses: the same
  helper before `return False` (megatron's ModelOpt-state probe, a true `P2`), an info-level helper:
  `broad-except.swallows` as before.
- A result nothing reads (`unread_result.unread_result`): a try that only binds names which are `_`
  or bound again before every later read, with a handler that passes or binds a value at hand, is
  `P3` `broad-except.unread-result` (ktransformers' router logits, gpt-neox's `_ = get_state(...)`).
  Near misses: a read with no binding before it on its way, a try in a loop whose body reads the
  name, a handler computing its substitute: `broad-except.swallows` as before.
- An element its filter drops (`filtered_out.filtered_out`): the predicate function of a `filter`
  whose handler prints the traceback and returns a value past the bound is `P3`
  `broad-except.filtered-out` (verl's over-long-prompt filter). Near misses: no traceback, a value on
  the keeping side, the function also called elsewhere: `broad-except.swallows` as before.
- A guessed default checked right after the try (`checked_default.checked_default`): a handler
  that binds a constant default, checks it and leaves `None` when the check fails, followed by
  `assert name is not None`, is `P3` `broad-except.checked-default` (DeepGEMM's CUDA home). Near
  misses: a default computed by a call, a check that only warns, a check that is not the next
  statement: `broad-except.swallows` as before.
- A creation whose failure the next use shows (`created_then_used.used_after_create`): a creation
  call whose handler only reports, a later unguarded call handed the same name, is `P3`
  `broad-except.used-after-create` (gpt-neox's upload script). Near misses: no later use, a use
  inside another try, a use only in a report: `broad-except.swallows` as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

REPORTS = """
import logging

logger = logging.getLogger(__name__)


def print_rank_0(message):
    print(message)


def enable(flag):
    return flag


def patch(model, flag):
    try:
        enable(flag)
        logger.info_rank0("enabled")
    except Exception as e:
        logger.warning_rank0(f"could not enable the redirect, keeping the native one: {e}")
    return model


def rewrite(path, value):
    try:
        enable(path)
        enable(value)
    except Exception as e:
        print_rank_0(f"[warn] could not rewrite {path}: {e}")


def has_state(path):
    try:
        return enable(path)
    except Exception as e:
        print_rank_0(f"could not inspect {path}: {e}")
        return False


def patch_quiet(model, flag):
    try:
        enable(flag)
    except Exception as e:
        logger.info_rank0(f"could not enable the redirect: {e}")
    return model
"""

UNREAD = """
def gate(x):
    return x


def lookup(table, key):
    return table[key]


def forward(x, rows, wanted):
    logits = gate(x)
    try:
        shaped = logits.view(rows, -1)
    except Exception:
        shaped = logits
    out = logits.sum()
    if wanted:
        shaped = logits.view(rows, -1)
        return out, shaped
    return out


def convert(table, keys):
    for key in keys:
        try:
            _ = lookup(table, key)
        except Exception:
            pass
    return table


def forward_read(x, rows, wanted):
    logits = gate(x)
    try:
        shaped = logits.view(rows, -1)
    except Exception:
        shaped = logits
    if wanted:
        return shaped
    return logits


def convert_in_loop(table, keys):
    found = []
    for key in keys:
        try:
            value = lookup(table, key)
        except Exception:
            value = None
        found.append(value)
    return found


def forward_computed(x, rows, wanted):
    logits = gate(x)
    try:
        shaped = logits.view(rows, -1)
    except Exception:
        shaped = logits.flatten()
    if wanted:
        shaped = logits.view(rows, -1)
        return shaped
    return logits
"""

FILTERS = """
import traceback


def measure(doc):
    return len(doc)


class Data:
    def __init__(self, rows, limit):
        self.rows = rows
        self.limit = limit

    def keep_short(self, rows):
        def doc_len(doc):
            try:
                return measure(doc)
            except Exception:
                print("could not measure one sample, skipping it")
                traceback.print_exc()
                return self.limit + 1

        return rows.filter(lambda doc: doc_len(doc) <= self.limit)

    def keep_short_quiet(self, rows):
        def quiet_len(doc):
            try:
                return measure(doc)
            except Exception:
                print("could not measure one sample, skipping it")
                return self.limit + 1

        return rows.filter(lambda doc: quiet_len(doc) <= self.limit)

    def keep_short_kept(self, rows):
        def kept_len(doc):
            try:
                return measure(doc)
            except Exception:
                traceback.print_exc()
                return 0

        return rows.filter(lambda doc: kept_len(doc) <= self.limit)

    def keep_short_counted(self, rows):
        def counted_len(doc):
            try:
                return measure(doc)
            except Exception:
                traceback.print_exc()
                return self.limit + 1

        total = sum(counted_len(doc) for doc in rows)
        return rows.filter(lambda doc: counted_len(doc) <= self.limit), total
"""

UPLOAD = """
import os


def create_repo(name, private=False):
    return name


def upload_file(path, repo_id, revision):
    return path, repo_id, revision


def upload(folder, repo_name, branch):
    try:
        create_repo(repo_name, private=False)
    except Exception:
        print("repo already exists")
    for name in os.listdir(folder):
        upload_file(os.path.join(folder, name), repo_id=repo_name, revision=branch)


def upload_nothing(folder, repo_name):
    try:
        create_repo(repo_name, private=False)
    except Exception:
        print("repo already exists")
    return folder


def upload_guarded(folder, repo_name, branch):
    try:
        create_repo(repo_name, private=False)
    except Exception:
        print("repo already exists")
    try:
        upload_file(folder, repo_id=repo_name, revision=branch)
    except Exception:
        print("upload failed")
        raise


def upload_reported(folder, repo_name):
    try:
        create_repo(repo_name, private=False)
    except Exception:
        print("repo already exists")
    print(f"uploading to {repo_name}", repo_name)
"""

HOMES = """
import os
import subprocess


def default_home():
    return "/opt/tool"


def find_home():
    home = os.environ.get("TOOL_HOME")
    if home is None:
        try:
            found = subprocess.check_output(["which", "tool"]).decode().strip()
            home = os.path.dirname(os.path.dirname(found))
        except Exception:
            home = "/usr/local/tool"
            if not os.path.exists(home):
                home = None
    assert home is not None
    return home


def find_home_computed():
    home = os.environ.get("TOOL_HOME")
    if home is None:
        try:
            found = subprocess.check_output(["which", "tool"]).decode().strip()
            home = os.path.dirname(os.path.dirname(found))
        except Exception:
            home = default_home()
    assert home is not None
    return home


def find_home_warned():
    try:
        found = subprocess.check_output(["which", "tool"]).decode().strip()
        home = os.path.dirname(os.path.dirname(found))
    except Exception:
        home = None
    if home is None:
        print("tool not found")
    return home


def find_home_later():
    try:
        found = subprocess.check_output(["which", "tool"]).decode().strip()
        home = os.path.dirname(os.path.dirname(found))
    except Exception:
        home = "/usr/local/tool"
    print("looked for the tool")
    assert home is not None
    return home
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round24warn")
    files = {
        "pkg/reports.py": REPORTS,
        "pkg/unread.py": UNREAD,
        "pkg/filters.py": FILTERS,
        "pkg/upload.py": UPLOAD,
        "pkg/homes.py": HOMES,
    }
    base = {"pkg/__init__.py": "", **dict.fromkeys(files, "")}
    return review_shapes(path, base, files)


def _shown(review: list[Finding], path: str, qualname: str) -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get("broad-except")
    return None if finding is None else (finding.message_id, finding.severity)


@pytest.mark.parametrize("qualname", ["patch", "rewrite"])
def test_a_report_through_a_rank_or_once_helper_gives_nothing(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/reports.py", qualname) == {}


@pytest.mark.parametrize("qualname", ["has_state", "patch_quiet"])
def test_near_misses_of_the_helper_report_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/reports.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


@pytest.mark.parametrize("qualname", ["forward", "convert"])
def test_a_result_nothing_reads_is_a_p3(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/unread.py", qualname) == ("broad-except.unread-result", Severity.P3)


@pytest.mark.parametrize("qualname", ["forward_read", "convert_in_loop", "forward_computed"])
def test_near_misses_of_the_unread_result_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/unread.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


def test_an_element_its_filter_drops_with_the_traceback_is_a_p3(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/filters.py", "Data.keep_short.doc_len")
    assert shown == ("broad-except.filtered-out", Severity.P3)


@pytest.mark.parametrize(
    "qualname",
    ["Data.keep_short_quiet.quiet_len", "Data.keep_short_kept.kept_len", "Data.keep_short_counted.counted_len"],
)
def test_near_misses_of_the_filtered_element_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/filters.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_creation_the_next_use_checks_is_a_p3(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/upload.py", "upload")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.used-after-create", Severity.P3)
    assert "`repo_name`" in finding.text("en").message


@pytest.mark.parametrize("qualname", ["upload_nothing", "upload_guarded", "upload_reported"])
def test_near_misses_of_the_checked_creation_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/upload.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_guessed_default_checked_right_after_is_a_p3(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/homes.py", "find_home")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.checked-default", Severity.P3)
    assert "`home`" in finding.text("en").message


@pytest.mark.parametrize("qualname", ["find_home_computed", "find_home_warned", "find_home_later"])
def test_near_misses_of_the_checked_default_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/homes.py", qualname) == ("broad-except.swallows", Severity.P2)
