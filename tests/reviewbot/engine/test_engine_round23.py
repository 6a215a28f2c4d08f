"""The precision benchmark's round-23 classes, next to their near misses, on real git repos reviewed
statically (`--suites none`).

- An unset attribute every caller checks (`error_reach.checked_attribute`): a method whose body is a
  try binding `self.<attribute>` to a call, whose handler only logs, and every call of which is
  followed by a check of the attribute (an `assert`, or an `if` ending in one or in a `raise`), gives
  nothing (NeMo's TensorRT plan load, rebuilt when missing). Near misses: a call with no check after
  it, a check whose branch returns, a handler that binds a substitute, a try that calls other code
  after the binding: `broad-except.swallows` as before.
- The function again without the optional step (`own_route.retried_without_step`): a handler that
  warns, turns off the flag whose `if` holds the try and returns the function called again with its
  own parameters gives nothing (NeMo's Liger kernels). Near misses: an info-level message, a flag
  the function sets again, a retry with other arguments, a try outside the flag's `if`:
  `broad-except.swallows` as before.
- A torch binding meets `runtime-error-fallback`'s torch gate (`exception_index._TORCH_IMPORT`): a
  silent `except RuntimeError` in a revision that imports `lightning.pytorch`, `pytorch_lightning` or
  `safetensors.torch`, but not torch, is `runtime-error-fallback.no-oom-reraise` (NeMo's ModelOpt
  export route). Near miss: a module whose name only starts with `torch` (`mypkg.torch_compat`):
  nothing, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

PLAN = """
import logging

LOG = logging.getLogger(__name__)


class Engine:
    def __init__(self, path):
        self.path = path
        self.names = []

    def warm(self):
        return self.path


def build(path):
    return Engine(path)


class Compiler:
    def __init__(self, path):
        self.path = path
        self.engine = None
        self.table = None

    def _load_engine(self):
        \"\"\"Load the cached plan.\"\"\"
        try:
            self.engine = Engine(self.path)
            table = {}
            for name in self.engine.names:
                table[name] = name.strip("_")
            self.table = table
        except Exception as e:
            LOG.info(f"could not load the plan: {e}")

    def forward(self, x):
        if self.engine is None:
            self._load_engine()
            if self.engine is None:
                build(self.path)
                self._load_engine()
                assert self.engine is not None
        return x


class Unchecked:
    def __init__(self, path):
        self.path = path
        self.engine = None

    def _load_unchecked(self):
        try:
            self.engine = Engine(self.path)
        except Exception as e:
            LOG.info(f"could not load the plan: {e}")

    def forward(self, x):
        self._load_unchecked()
        return self.engine


class ReturnsOnMiss:
    def __init__(self, path):
        self.path = path
        self.engine = None

    def _load_or_skip(self):
        try:
            self.engine = Engine(self.path)
        except Exception as e:
            LOG.info(f"could not load the plan: {e}")

    def forward(self, x):
        self._load_or_skip()
        if self.engine is None:
            return x
        return self.engine


class Substitute:
    def __init__(self, path):
        self.path = path
        self.engine = None

    def _load_or_default(self):
        try:
            self.engine = Engine(self.path)
        except Exception as e:
            LOG.info(f"could not load the plan: {e}")
            self.engine = Engine("default")

    def forward(self, x):
        self._load_or_default()
        assert self.engine is not None
        return x


class Warmed:
    def __init__(self, path):
        self.path = path
        self.engine = None

    def _load_and_warm(self):
        try:
            self.engine = Engine(self.path)
            self.engine.warm()
        except Exception as e:
            LOG.info(f"could not load the plan: {e}")

    def forward(self, x):
        self._load_and_warm()
        assert self.engine is not None
        return x
"""

STEP = """
import logging

LOG = logging.getLogger(__name__)


def patch(model):
    model["patched"] = True


def make(cfg):
    return dict(cfg)


class Module:
    def __init__(self, cfg, use_fast=True):
        self.cfg = cfg
        self.use_fast = use_fast
        self.model = None

    def configure(self):
        self.model = make(self.cfg)
        if self.use_fast:
            try:
                patch(self.model)
            except Exception as e:
                LOG.warning("fast kernels failed: %s; configuring without them", e)
                self.use_fast = False
                del self.model
                return self.configure()
        return self.model

    def configure_quiet(self):
        self.model = make(self.cfg)
        if self.use_fast:
            try:
                patch(self.model)
            except Exception as e:
                LOG.info("fast kernels failed: %s", e)
                self.use_fast = False
                return self.configure_quiet()
        return self.model

    def configure_set_again(self):
        self.use_fast = self.cfg.get("fast", True)
        self.model = make(self.cfg)
        if self.use_fast:
            try:
                patch(self.model)
            except Exception as e:
                LOG.warning("fast kernels failed: %s", e)
                self.use_fast = False
                return self.configure_set_again()
        return self.model

    def configure_other(self, cfg):
        self.model = make(cfg)
        if self.use_fast:
            try:
                patch(self.model)
            except Exception as e:
                LOG.warning("fast kernels failed: %s", e)
                self.use_fast = False
                return self.configure_other({})
        return self.model

    def configure_ungated(self):
        self.model = make(self.cfg)
        try:
            patch(self.model)
        except Exception as e:
            LOG.warning("fast kernels failed: %s", e)
            self.use_fast = False
            return self.configure_ungated()
        return self.model
"""

SPECIAL = """
def export_special(path, **kwargs):
    return None
"""

EXPORT = """
{import_line}

from pkg.special import export_special


def export_standard(path):
    return path


def export(path, **kwargs):
    try:
        output = export_special(path, **kwargs)
    except RuntimeError:
        output = None
    if output is not None:
        return output
    return export_standard(path)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round23")
    base = {"pkg/__init__.py": "", "pkg/plan.py": "", "pkg/step.py": ""}
    return review_shapes(path, base, {"pkg/plan.py": PLAN, "pkg/step.py": STEP})


def _shown(review: list[Finding], path: str, qualname: str, rule: str) -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get(rule)
    return None if finding is None else (finding.message_id, finding.severity)


def test_an_unset_attribute_every_caller_checks_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/plan.py", "Compiler._load_engine") == {}


@pytest.mark.parametrize(
    ("qualname", "expected"),
    [
        # round 26: a try around one operation is a P3 swallow, a wider one the P2
        ("Unchecked._load_unchecked", ("broad-except.swallows-one-operation", Severity.P3)),
        ("ReturnsOnMiss._load_or_skip", ("broad-except.swallows-one-operation", Severity.P3)),
        ("Substitute._load_or_default", ("broad-except.swallows-one-operation", Severity.P3)),
        ("Warmed._load_and_warm", ("broad-except.swallows", Severity.P2)),
    ],
)
def test_near_misses_of_the_checked_attribute_stay_swallows(
    review: list[Finding], qualname: str, expected: tuple[str, Severity]
) -> None:
    assert _shown(review, "pkg/plan.py", qualname, "broad-except") == expected


def test_the_function_again_without_the_optional_step_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/step.py", "Module.configure") == {}


@pytest.mark.parametrize(
    "qualname",
    [
        "Module.configure_quiet",
        "Module.configure_set_again",
        "Module.configure_other",
        "Module.configure_ungated",
    ],
)
def test_near_misses_of_the_retry_without_the_step_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/step.py", qualname, "broad-except") == (
        "broad-except.swallows-one-operation",
        Severity.P3,
    )


def _export_review(path: Path, import_line: str) -> list[Finding]:
    base = {"pkg/__init__.py": "", "pkg/special.py": SPECIAL, "pkg/api.py": ""}
    return review_shapes(path, base, {"pkg/api.py": EXPORT.format(import_line=import_line)})


@pytest.mark.parametrize(
    "import_line",
    ["import lightning.pytorch as pl", "import pytorch_lightning as pl", "from safetensors.torch import load_file"],
)
def test_a_torch_binding_meets_the_torch_gate(tmp_path: Path, import_line: str) -> None:
    findings = _export_review(tmp_path, import_line)
    finding = findings_by_rule(findings, "pkg/api.py", "export")["runtime-error-fallback"]
    assert (finding.message_id, finding.severity) == ("runtime-error-fallback.no-oom-reraise", Severity.P2)
    assert "unconfirmed" in finding.evidence.text("en")


def test_a_module_only_named_like_torch_does_not_meet_the_gate(tmp_path: Path) -> None:
    findings = _export_review(tmp_path, "from mypkg.torch_compat import shim")
    assert findings_by_rule(findings, "pkg/api.py", "export") == {}
