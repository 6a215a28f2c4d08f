"""The exception-injection experiment: does a broad or `RuntimeError` fallback swallow an error it
should let through?

For each `broad-except` or `runtime-error-fallback` finding that claims `P0-BLOCKER` on a pattern
alone, then each `caught-own-subclass` finding (`P2`), at most `InjectionConfig.max_handlers` per
review in that order, the head revision
is checked out into one throw-away worktree and the handler's file is rewritten there: one line is
inserted before the first statement of the try body that appends the current test
(`PYTEST_CURRENT_TEST`, `?` outside pytest) to a hits file in the box's scratch directory and then
raises an exception the handler must not swallow:

- `AssertionError` (a programmer error) for a catch-all (`broad-except`);
- `torch.OutOfMemoryError` for `except RuntimeError` (`runtime-error-fallback`), only when torch is
  importable by the reviewing interpreter and some file of the revision imports torch (in a project
  that never does, no out-of-memory error comes from its code: the experiment says it did not run);
- the first repository class a `caught-own-subclass` finding names (a cache-miss error, say), found
  in the test process's loaded modules and made without calling its `__init__`; where it is not
  loaded the line records that and the experiment says it could not run.

Its message carries `MARKER`. The tests then run in that worktree through `reviewbot.sandbox` (fresh
interpreter, `PYTHONHASHSEED=0`, no network, the allow-listed environment, a time limit): the
configured `experiments.injection.command`, else the review's suites that need no GPU. The
comparison run without the injection is the review's own run of those suites (or, for a configured
command, one extra run of it at the start). Per test that reached the injected line and passed
without it:

- passed with it: the handler *swallowed* the error;
- failed, and its JUnit failure text shows the injected error raised (a line `Type: <MARKER> ...`,
  the exception's own line in the traceback, of the injected error or one chained from it): the
  error *propagated* to the test;
- failed otherwise: swallowed, but the fallback's result made the test fail (also when that result
  quotes the error's text: `f"{type(e).__name__}: {e}"` inside an assertion's values).

A handler that only reports what it caught and substitutes nothing (`only_reports`: every statement
`pass` or a report at warning level or above, a print, a warning or `traceback.print_exc()`, one of
them carrying the traceback or naming the caught exception; cachetools' logged `on_evict` callback)
is swallowed *with a log record*: the error is shown where it happens and no fallback value stands
in for the try's work, so the swallow is `evidence.injection-reported`, a confirmed `P2` (the tests
that failed then fail because the try's work was skipped, which an injection before it always
does). A log record does not make a substitute safe: a handler that logs the traceback and then
returns or binds another value stays a confirmed `P0`.

A catch-all whose `# noqa` gives a reason (`broad-except.noqa-reason`, `P3`) is respected and keeps
its note with the experiment's evidence, unless the injected `AssertionError` was swallowed and the
handler logs nothing: then it is `P0` `broad-except.noqa-silent`.

Verdicts: swallowed in at least one test: the finding is confirmed (experiment evidence, the
rule's `P0`, `P2` for a handler that only reports, or `P2` for the repository's own subclass), when the injected type can plausibly arise
in the try body: the body calls code of the repository or of a library (a function the file
imports from outside the standard library, a local function, a method of a variable or of `self`,
a call's result). A body whose calls all go to builtins (`broad_except.BUILTINS_AT_HAND`) and to the
standard library on values at hand (`eval(repr(const)) == const`; the check is
`broad_except.stdlib_call_count`, the one `runtime-error-fallback` uses) runs no code that could
raise the injected error: the swallow is then `evidence.injection-cannot-arise`, an experiment that
did not show the harm (unconfirmed, capped at `P2` by the evidence policy; a `# noqa` note stays
`P3`). Dunder methods such a body runs on its values (`__repr__`, `__eq__`) are not counted as the
repository's code. Since round 8 the static rule reads a catch-all's body the same way and reports no
swallow there (`broad_except`'s confined try), so this verdict meets `# noqa` notes and
`runtime-error-fallback` findings, whose static test counts fewer builtins. Propagated in every reaching test: refuted, the finding becomes a `P3-STYLE` note
`<rule>.refuted` ("catches everything, but an injected X still propagated to the tests") backed by
the experiment (the catch-all is still there to read, but it does not hide the error); no
test reached the line: `evidence.no-test-reaches` (stays unconfirmed, `P2`); a run that timed out
or produced no report, or reaching tests that already failed without the injection:
`evidence.experiment-not-run` with the reason. Findings past the cap get `evidence.injection-cap`.

A test that itself expects any exception (`pytest.raises(Exception)`) around the handler would
count a propagated error as swallowed; the experiment cannot tell that apart.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import logging
import re
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from reviewbot.exception_index import ExceptionClass, ExceptionIndex, index_revision
from reviewbot.findings import Evidence, EvidenceKind, Finding
from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import InjectionConfig, SuiteConfig
from reviewbot.results.junit import COLLECTION_FAILURE, case_id
from reviewbot.results.schema import SuiteResult
from reviewbot.rules.broad_except import BUILTINS_AT_HAND, import_map, stdlib_call_count
from reviewbot.rules.common import LOUD_LEVELS, contains_logging, shown_level, shows_caught
from reviewbot.sandbox import Box, SandboxError, box, build_argv, child_env
from reviewbot.severity import Severity

logger = logging.getLogger(__name__)

MARKER = "reviewbot injected"
# the line an exception reaching pytest or the interpreter prints for itself (`E   AssertionError:
# reviewbot injected ...`, `torch.OutOfMemoryError: reviewbot injected ...`), not its text quoted
# inside another message (`assert '... (str failed: AssertionError: reviewbot injected ...)' == ...`)
_SURFACED = re.compile(r"^(?:E\s+)?[\w.]+: " + re.escape(MARKER), re.MULTILINE)


def injected_error_surfaced(text: str) -> bool:
    """`text` (a JUnit failure's message and text, or a run's output) shows the injected error, or
    one chained from it, raised to the test: a line that is the exception's own (`Type: message`,
    after pytest's `E` prefix or none), not the message quoted in a value a fallback produced."""
    return _SURFACED.search(text) is not None


RULES = frozenset({"broad-except", "runtime-error-fallback"})
OWN_SUBCLASS_RULE = "caught-own-subclass"
NOQA_ID = "broad-except.noqa-reason"
UNRESOLVED = "?unresolved "
REFUTED_SEVERITY = Severity.P3
REPORTED_SEVERITY = Severity.P2
SHOWN_TESTS = 4
_HITS = "reviewbot-injection-hits.txt"
_PYTEST_PHASES = (" (setup)", " (call)", " (teardown)")

ProgressFn = Callable[[str], None]


def _no_progress(_: str) -> None:
    """Progress sink that drops messages."""


@dataclasses.dataclass(frozen=True)
class Injection:
    """Where and what: `line` is the head line of the try body's first statement (the raise goes
    before it), `exception` the injected type as shown, `raise_expr` the expression raised, `setup`
    code run first (one line, `;`-separated) and `resolved` an expression saying it found the class;
    `logs`: the handler's body holds a logging call (or `print`/`warn`); `reports`: it only reports
    what it caught and substitutes nothing (`only_reports`). `confined`: None when the
    try body calls code of the repository or of a library, else the builtin and standard-library
    calls it is made of (`` `eval`, `repr` ``; empty without calls): the injected type cannot
    plausibly arise there."""

    finding: Finding
    line: int
    indent: str
    exception: str
    raise_expr: str
    setup: str = ""
    resolved: str = "True"
    logs: bool = False
    reports: bool = False
    confined: str | None = None

    @property
    def location(self) -> str:
        return f"{self.finding.path}:{self.line}"


@dataclasses.dataclass
class Outcome:
    """What one injection did, over every suite run. Test ids are pytest node ids; `noticed`: failed
    without the injected error reaching them (the fallback's result was wrong)."""

    swallowed: list[str] = dataclasses.field(default_factory=list)
    noticed: list[str] = dataclasses.field(default_factory=list)
    propagated: list[str] = dataclasses.field(default_factory=list)
    failing_before: list[str] = dataclasses.field(default_factory=list)
    reached: bool = False
    tests_run: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def reaching(self) -> list[str]:
        return [*self.swallowed, *self.noticed, *self.propagated]


def candidates(findings: Sequence[Finding]) -> list[Finding]:
    """The findings the experiment can confirm, with nothing but the pattern behind them: catch-alls
    and `RuntimeError` fallbacks claiming `P0-BLOCKER` first, then `caught-own-subclass` (`P2`),
    then catch-alls whose `# noqa` gives a reason (`P3`)."""
    pattern = [f for f in findings if f.evidence.kind is EvidenceKind.PATTERN]
    return [
        *(f for f in pattern if f.rule in RULES and f.severity is Severity.P0),
        *(f for f in pattern if f.rule == OWN_SUBCLASS_RULE),
        *(f for f in pattern if f.message_id == NOQA_ID),
    ]


def _own_class(finding: Finding, classes: Callable[[str], ExceptionClass | None]) -> tuple[str, str, str] | str:
    """(shown name, setup code binding `_rb_c` to the class or None, check that it did) for the
    first class a `caught-own-subclass` finding names, or why it cannot be injected. The class is
    looked up in the test process's `sys.modules` (the try body calls into its module, so it is
    loaded), under its module path and the shorter ones a `src/`-style layout imports it as."""
    full_name = finding.params["classes"][0]
    cls = classes(full_name)
    if cls is None or "." in cls.qualname:
        return f"`{full_name}` is not a top-level class of a module of the repository"
    parts = cls.module.split(".")
    lookups = " or ".join(f"_rb_sys.modules.get({'.'.join(parts[i:])!r})" for i in range(len(parts)))
    setup = f"_rb_sys = __import__('sys'); _rb_m = {lookups}; _rb_c = getattr(_rb_m, {cls.name!r}, None); "
    return cls.full_name, setup, "isinstance(_rb_c, type) and issubclass(_rb_c, BaseException)"


def only_reports(handler: ast.ExceptHandler) -> bool:
    """The handler substitutes nothing and shows what it caught: every statement is `pass` or a call
    statement that reports at warning level or above, prints or warns (`shown_level`), or prints the
    traceback (`traceback.print_exc()`), and one of them carries the traceback or names the caught
    exception. A report at info or debug level does not count (read as silent)."""
    shown = False
    for stmt in handler.body:
        if isinstance(stmt, ast.Pass):
            continue
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        call = stmt.value
        if shows_caught(call, handler.name):
            shown = True
            continue
        level = shown_level(call)
        if level is None or not (level in LOUD_LEVELS or level == "print"):
            return False
    return shown


def confined_calls(body: list[ast.stmt], imports: Mapping[str, str]) -> str | None:
    """None when `body` calls code of the repository or of a library; else its calls, all to builtins
    on values at hand or to the standard library, as shown (`` `eval`, `repr` ``; empty without
    calls). `imports`: the file's `import_map`."""
    if stdlib_call_count(body, imports, BUILTINS_AT_HAND) is None:
        return None
    names: list[str] = []
    for stmt in body:
        for call in ast.walk(stmt):
            if isinstance(call, ast.Call):
                name = ast.unparse(call.func)
                if name not in names:
                    names.append(name)
    return ", ".join(f"`{n}`" for n in names)


def plan(
    finding: Finding,
    source: str,
    torch_importable: bool,
    classes: Callable[[str], ExceptionClass | None] = lambda _: None,
) -> Injection | str:
    """The injection for `finding` in its head `source`, or why there is none (English, one line).
    `classes` finds a repository exception class by name (`ExceptionIndex.get`). A
    `runtime-error-fallback` finding exists only in a revision some file of which imports torch
    (`ExceptionIndex.torch_imported`), so an out-of-memory error can arise where one is injected."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Try, ast.TryStar)):
            continue
        handler = next((h for h in node.handlers if h.lineno == finding.line_start), None)
        if handler is None:
            continue
        first = node.body[0]
        line_text = source.splitlines()[first.lineno - 1]
        indent = line_text[: first.col_offset]
        if first.lineno == node.lineno or indent.strip():
            return "the try body starts on the `try:` line, so no line can be inserted before it"
        setup, resolved, logs, reports = "", "True", contains_logging(handler.body), only_reports(handler)
        confined = confined_calls(node.body, import_map(finding.path, tree))
        if finding.rule == OWN_SUBCLASS_RULE:
            own = _own_class(finding, classes)
            if isinstance(own, str):
                return own
            exception, setup, resolved = own
            message = repr(f"{MARKER} {exception} at {finding.path}:{first.lineno}")
            raise_expr = f"(_rb_c.__new__(_rb_c, {message}) if {resolved} else AssertionError({message}))"
            return Injection(
                finding, first.lineno, indent, exception, raise_expr, setup, resolved, logs, reports, confined
            )
        if finding.rule == "runtime-error-fallback":
            if not torch_importable:
                return "torch is not importable here, so torch.OutOfMemoryError cannot be injected"
            exception, expr = "torch.OutOfMemoryError", '__import__("torch").OutOfMemoryError'
        else:
            exception, expr = "AssertionError", "AssertionError"
        message = f"{MARKER} {exception} at {finding.path}:{first.lineno}"
        raise_expr = f"{expr}({message!r})"
        return Injection(
            finding, first.lineno, indent, exception, raise_expr, logs=logs, reports=reports, confined=confined
        )
    return f"no try statement with a handler at line {finding.line_start}"


def injected_source(source: str, injection: Injection, hits: Path) -> str:
    """`source` with one line before the try body's first statement: record the test (prefixed
    with `UNRESOLVED` when the class to raise was not found), then raise."""
    record = (
        f"{injection.setup}_rb_os = __import__('os'); _rb_f = open({str(hits)!r}, 'a'); "
        f"_rb_f.write(('' if {injection.resolved} else {UNRESOLVED!r}) + "
        "_rb_os.environ.get('PYTEST_CURRENT_TEST', '?') + '\\n'); _rb_f.close(); "
        f"raise {injection.raise_expr}"
    )
    lines = source.splitlines(keepends=True)
    lines.insert(injection.line - 1, f"{injection.indent}{record}\n")
    return "".join(lines)


def _test_id(hit: str) -> str:
    for phase in _PYTEST_PHASES:
        hit = hit.removesuffix(phase)
    return hit


def _junit_cases(path: Path) -> dict[str, tuple[str, str]]:
    """node id -> (outcome, full failure text) of a JUnit report (empty when unreadable)."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        logger.warning("injection run's JUnit report unreadable: %s", exc)
        return {}
    out: dict[str, tuple[str, str]] = {}
    for case in root.iter("testcase"):
        tid = case_id(case)
        outcome, text = "passed", ""
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                outcome, text = (
                    ("failed" if tag == "failure" else "error"),
                    f"{node.get('message', '')}\n{node.text or ''}",
                )
        if case.find("skipped") is not None and outcome == "passed":
            outcome = "skipped"
        out[tid] = (outcome, text)
    return out


@dataclasses.dataclass(frozen=True)
class _Run:
    returncode: int | None
    cases: dict[str, tuple[str, str]]
    log: str


def _run(runs: Box, spec: SuiteConfig, timeout_s: float, logs: Path, name: str) -> _Run:
    junit, log = logs / f"{name}.xml", logs / f"{name}.log"
    argv = build_argv(spec.command, runs.scratch / junit.name)
    rc, _ = runs.run_logged(argv, child_env(runs.tree, runs.scratch), min(spec.timeout_s, timeout_s), log)
    cases = _junit_cases(junit) if runs.take(junit.name, junit) else {}
    (runs.scratch / junit.name).unlink(missing_ok=True)
    return _Run(rc, cases, log.read_text(errors="replace"))


def _write(tree: Path, rel: str, text: str) -> None:
    """Write `text` to `tree/rel`, replacing what the tests may have left there; never through a
    link out of the tree (the revision's code ran in that tree)."""
    target = tree / rel
    real_tree = tree.resolve()
    if not target.parent.resolve().is_relative_to(real_tree):
        raise SandboxError(f"{rel}'s directory now leads out of the worktree")
    target.unlink(missing_ok=True)
    target.write_text(text)
    target.chmod(0o644)  # readable by the sandbox's uid whatever the umask (the service's is 077)


def _same_test(test: str, ids: Mapping[str, object]) -> str:
    """`test` as `ids` names it: itself, else the one id that ends with it or that it ends with
    (pytest's node ids are relative to its rootdir, JUnit's are rebuilt from dotted class names)."""
    if test in ids:
        return test
    matches = [i for i in ids if i.endswith("/" + test) or test.endswith("/" + i)]
    return matches[0] if len(matches) == 1 else test


# pytest's `E   ModuleNotFoundError: No module named 'x'` lines of a failure text
_ERROR_LINE = re.compile(r"^E\s+(.+)$", re.MULTILINE)


def _judge(
    outcome: Outcome, spec: SuiteConfig, run: _Run, before: Mapping[str, str], hits: list[str], tree: Path
) -> None:
    """Add what one suite run with the injection showed to `outcome`. A test module that could not
    be collected (an import error: a dependency the runner lacks) ran none of its tests, so a try
    no test reached is then untried, not unreached; its error is quoted with paths relative to the
    worktree `tree` (a review's text must not change with the temporary directory)."""
    uncollected = [
        text for state, text in run.cases.values() if state == "error" and text.startswith(COLLECTION_FAILURE)
    ]
    outcome.tests_run += len(run.cases) - len(uncollected)
    if not hits:
        if run.returncode is None:
            outcome.problems.append(f"suite {spec.name} timed out before reaching it")
        elif not run.cases:
            last = (run.log.strip().splitlines() or ["no output"])[-1].strip()
            outcome.problems.append(f"suite {spec.name} exited with code {run.returncode} and ran no test ({last})")
        elif uncollected:
            outcome.problems.append(_uncollected_clause(spec.name, uncollected, tree))
        return
    unresolved = [h for h in hits if h.startswith(UNRESOLVED)]
    if unresolved:
        outcome.problems.append(
            f"the class to raise was not loaded where {_test_id(unresolved[0].removeprefix(UNRESOLVED))} reached the try body"
        )
        return
    outcome.reached = True
    if run.returncode is None:
        outcome.problems.append(f"suite {spec.name} timed out with the injection")
        return
    reached = sorted({_test_id(h) for h in hits if h != "?"})
    if not reached:  # reached outside pytest's bookkeeping: judge the suite as a whole
        name = f"suite {spec.name}"
        if run.returncode == 0 and all(state == "passed" for state in before.values()):
            outcome.swallowed.append(name)
        elif injected_error_surfaced(run.log):
            outcome.propagated.append(name)
        else:
            outcome.problems.append(f"suite {spec.name} reached it outside pytest and exited with {run.returncode}")
        return
    for test in reached:
        if before.get(_same_test(test, before), "") != "passed":
            outcome.failing_before.append(test)
            continue
        state, text = run.cases.get(_same_test(test, run.cases), ("missing", ""))
        if state == "passed":
            outcome.swallowed.append(test)
        elif injected_error_surfaced(text) or (state == "missing" and injected_error_surfaced(run.log)):
            outcome.propagated.append(test)
        elif state in ("failed", "error"):
            outcome.noticed.append(test)
        else:
            outcome.problems.append(f"{test} {state} with the injection")


def _shown(tests: Sequence[str]) -> str:
    more = len(tests) - SHOWN_TESTS
    return ", ".join(f"`{t}`" for t in tests[:SHOWN_TESTS]) + (f" (+{more})" if more > 0 else "")


def evidence(injection: Injection, outcome: Outcome) -> tuple[Evidence, Severity]:
    """The finding's evidence and severity from what the injection did (see the module docstring)."""
    finding = injection.finding
    base = {"exception": injection.exception, "location": injection.location}
    if outcome.swallowed or outcome.noticed:
        params = {
            **base,
            "reached": len(outcome.reaching),
            "tests": _shown(outcome.reaching),
            "passed": len(outcome.swallowed),
            "noticed": len(outcome.noticed),
            "propagated": len(outcome.propagated),
            "logs": injection.logs,
        }
        if injection.confined is not None:
            params["calls"] = injection.confined
            cannot = Evidence(EvidenceKind.EXPERIMENT, "evidence.injection-cannot-arise", params, shows_harm=False)
            return cannot, finding.severity
        if injection.reports:
            severity = max(finding.severity, REPORTED_SEVERITY, key=lambda s: s.rank)
            return Evidence(EvidenceKind.EXPERIMENT, "evidence.injection-reported", params), severity
        return Evidence(EvidenceKind.EXPERIMENT, "evidence.injection-swallowed", params), finding.severity
    if outcome.propagated and not outcome.problems:
        params = {**base, "reached": len(outcome.propagated), "tests": _shown(outcome.propagated)}
        return Evidence(EvidenceKind.EXPERIMENT, "evidence.injection-surfaced", params), REFUTED_SEVERITY
    if not outcome.reached and not outcome.problems:
        return Evidence(
            EvidenceKind.PATTERN, "evidence.no-test-reaches", {"candidates": outcome.tests_run}
        ), finding.severity
    reasons = list(outcome.problems)
    if outcome.failing_before:
        reasons.append(f"the tests reaching it already fail without the injection ({_shown(outcome.failing_before)})")
    return not_run("; ".join(reasons)), finding.severity


def refuted(finding: Finding, injection: Injection, surfaced: Evidence) -> Finding:
    """The finding as the refuting experiment leaves it: a `REFUTED_SEVERITY` note saying that the
    injected error propagated (`<rule>.refuted`), backed by that experiment."""
    params = {"label": finding.params["label"], "exception": injection.exception}
    note = dataclasses.replace(finding, message_id=f"{finding.rule}.refuted", params=params, extra={})
    return note.with_evidence(surfaced, REFUTED_SEVERITY)


def noqa_verdict(finding: Finding, injection: Injection, seen: Evidence) -> Finding:
    """A catch-all whose `# noqa` gives a reason stays a respected `P3` note, backed by what the
    experiment saw, unless it swallowed the injected `AssertionError` and its handler logs nothing:
    then it is `P0` `broad-except.noqa-silent` (no reason makes a programmer error vanish safely)."""
    if seen.message_id == "evidence.injection-swallowed" and not injection.logs:
        silent = dataclasses.replace(finding, message_id="broad-except.noqa-silent")
        return silent.with_evidence(seen, Severity.P0)
    return finding.with_evidence(seen, finding.severity)


def _collected_nothing(results: Iterable[SuiteResult]) -> str | None:
    """Why the injection would see no test, when every suite of `results` ran only test modules that
    could not be collected (an import error: a dependency the runner lacks), one clause per suite
    as `_judge` words it; None when a suite collected a test. Running the suites once per handler
    would only show the same import errors again."""
    clauses = []
    for result in results:
        texts = [t.message or "" for t in result.tests if t.status == "error" and t.summary == COLLECTION_FAILURE]
        if not texts or len(texts) < len(result.tests):
            return None
        clauses.append(_uncollected_clause(result.name, texts))
    return "; ".join(clauses) or None


def _uncollected_clause(suite: str, texts: Sequence[str], tree: Path | None = None) -> str:
    """One clause of why a suite's uncollected test modules (their error `texts`, never empty) ran
    no test: the last `E` line of the first error, paths in the worktree `tree` made relative."""
    errors = _ERROR_LINE.findall(texts[0])
    cause = errors[-1].strip() if errors else COLLECTION_FAILURE
    if tree is not None:
        cause = cause.replace(f"{tree}/", "")
    return f"suite {suite}: {len(texts)} test module(s) could not be imported ({cause})"


def not_run(reason: str) -> Evidence:
    return Evidence(
        EvidenceKind.PATTERN, "evidence.experiment-not-run", {"experiment": "exception injection", "reason": reason}
    )


def run_injection(
    git: GitRepo,
    head: str,
    findings: list[Finding],
    settings: InjectionConfig,
    suites: Sequence[SuiteConfig],
    baseline: Sequence[SuiteResult],
    *,
    log_dir: Path | None = None,
    progress: ProgressFn = _no_progress,
) -> list[Finding]:
    """`findings` with the candidates' evidence (and severity) replaced by what the experiment saw.

    `suites`: the suites to run with each injection (their results without it in `baseline`, by
    name), ignored when `settings.command` is set (that command then also runs once without the
    injection). Must be called only where the review runs the revision's code.
    """
    chosen = candidates(findings)
    if not chosen:
        return findings
    tried, capped = chosen[: settings.max_handlers], chosen[settings.max_handlers :]
    replaced: dict[int, Finding] = {}
    for finding in capped:
        cap = Evidence(EvidenceKind.PATTERN, "evidence.injection-cap", {"cap": settings.max_handlers})
        replaced[id(finding)] = finding.with_evidence(cap)
    if capped:
        progress(f"exception injection: {len(capped)} handler(s) left untried (cap {settings.max_handlers})")
    blind: str | None = None
    if settings.command is not None:
        specs = [SuiteConfig("injection", settings.command, timeout_s=settings.timeout_s)]
        before: dict[str, dict[str, str]] | None = None
    else:
        ran = {r.name: r for r in baseline if r.ran}
        specs = [s for s in suites if s.name in ran]
        before = {name: {t.id: t.status for t in r.tests} for name, r in ran.items()}
        blind = _collected_nothing(ran.values()) if specs else None
    if not specs or blind is not None:
        reason = (
            blind or "no suite without GPUs ran in this review and no `experiments.injection.command` is configured"
        )
        for finding in tried:
            replaced[id(finding)] = finding.with_evidence(not_run(reason))
        progress(f"exception injection: not run ({reason})")
        return [replaced.get(id(f), f) for f in findings]
    started = time.monotonic()
    torch_importable = importlib.util.find_spec("torch") is not None
    index: ExceptionIndex | None = None
    if any(f.rule == OWN_SUBCLASS_RULE for f in tried):
        index = index_revision(git, head)
    planner = functools.partial(
        plan,
        torch_importable=torch_importable,
        classes=index.get if index is not None else lambda _: None,
    )
    with (
        tempfile.TemporaryDirectory(prefix="reviewbot-injection-") as tmp,
        git.worktree(head) as tree,
        box(tree) as runs,
    ):
        logs = log_dir or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        try:
            if before is None:
                progress("exception injection: running the tests once without an injection")
                first = _run(runs, specs[0], settings.timeout_s, logs, "injection-none")
                before = {specs[0].name: {tid: state for tid, (state, _) in first.cases.items()}}
            for number, finding in enumerate(tried, 1):
                replaced[id(finding)] = _try_one(
                    git, head, runs, finding, specs, before, settings, logs, number, planner, progress
                )
        except (FileNotFoundError, SandboxError) as exc:
            reason = f"the tests could not start: {exc}"
            for finding in tried:
                replaced.setdefault(id(finding), finding.with_evidence(not_run(reason)))
            progress(f"exception injection: not run ({reason})")
    progress(f"exception injection: {len(tried)} handler(s) tried in {time.monotonic() - started:.1f}s")
    return [replaced.get(id(f), f) for f in findings]


def _try_one(
    git: GitRepo,
    head: str,
    runs: Box,
    finding: Finding,
    specs: Sequence[SuiteConfig],
    before: Mapping[str, Mapping[str, str]],
    settings: InjectionConfig,
    logs: Path,
    number: int,
    planner: Callable[[Finding, str], Injection | str],
    progress: ProgressFn,
) -> Finding:
    source = git.read(head, finding.path)
    assert source is not None, f"{finding.path} missing at head"
    injection = planner(finding, source)
    if isinstance(injection, str):
        progress(f"exception injection: {finding.location}: not run ({injection})")
        return finding.with_evidence(not_run(injection))
    hits = runs.scratch / _HITS
    outcome = Outcome()
    _write(runs.tree, finding.path, injected_source(source, injection, hits))
    try:
        for spec in specs:
            hits.unlink(missing_ok=True)
            progress(f"exception injection: {injection.exception} at {injection.location}, suite {spec.name}")
            name = f"injection-{number}-{spec.name}"
            run = _run(runs, spec, settings.timeout_s, logs, name)
            seen = (logs / f"{name}.hits").read_text().splitlines() if runs.take(_HITS, logs / f"{name}.hits") else []
            _judge(outcome, spec, run, before.get(spec.name, {}), seen, runs.tree)
    finally:
        _write(runs.tree, finding.path, source)
    result, severity = evidence(injection, outcome)
    progress(
        f"exception injection: {injection.location}: swallowed in {len(outcome.swallowed) + len(outcome.noticed)}, "
        f"propagated in {len(outcome.propagated)} test(s) of {outcome.tests_run}"
    )
    if finding.message_id == NOQA_ID:
        return noqa_verdict(finding, injection, result)
    if result.message_id == "evidence.injection-surfaced":
        return refuted(finding, injection, result)
    return finding.with_evidence(result, severity)
