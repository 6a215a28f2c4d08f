"""The review of one base/head pair: `run_review(...) -> Review`.

Public API (used by `reviewbot review`, the service and the release notes):

    run_review(repo, base, head, *, pr_body=None, pr_title=None, suites="static", config=None,
               config_file=None, base_config=None, progress=None, log_dir=None) -> Review

- Reviews exactly what the branch proposes to merge: the diff `merge-base(base, head)..head`.
- `suites`: `none` runs no code of the revision (static rules and the static cache-key closure diff
  only, and the files the key hashes by their bytes when a listing for the merge base is cached;
  safe for untrusted forks); `static` (default) adds the cache-key probe (when the static diff
  found a change; at the merge base alone for its listing of hashed files when the change modifies
  files existing there and no listing is cached), test-plan verification (when `pr_body` has a
  test plan) and the configured suites that need no GPU; `all` adds every configured suite (GPU suites report `not-run` where
  the machine lacks GPUs). Any other value is a comma-separated list of configured suite names.
  Every mode but `none` also runs the exception-injection experiment on the catch-all and
  `RuntimeError` fallback findings (`reviewbot.experiments.exception_injection`).
- `config`: defaults to `.reviewbot.yml` at `head` (defaults when absent); `config_file` names the
  file a given `config` was read from instead of the committed one (`--config FILE`), for the
  review's notes.
  `base_config`: the configuration of the merge-base side (its key roots and probe); default: the
  merge base's committed `.reviewbot.yml` when it names key roots (the key may have moved), else
  `config` (`reviewbot review --config` passes its file for both sides). A key root that names
  nothing at the merge base or at head raises `ConfigError`; one that exists at one revision only
  is a note of the review. Without key roots the review opens with a note that the cache-key
  checks are off, and why.
- `progress`: called with one line per stage (the CLI prints them on stderr).

`Review` carries the verdict, the findings (each with severity, rule, path, line range,
message/why/fix and fingerprint), the change summary, the `KeyChange` (`review.invalidates_cache`
is True when the probe confirmed a key change or the change edits files the key hashes by their
bytes, as the probe at base lists them: label the PR `cache: invalidates`), suite results,
the failing tests that fail at the merge base too (`review.failing_at_base`: no findings, they do
not block), the test-plan table and the generated-code signals. `review.to_json()` is the data;
`reviewbot.render.render_markdown(review, language)` the text.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from reviewbot import pysource
from reviewbot.base_failures import outcomes_at_base
from reviewbot.diff import FileChange, diff_files
from reviewbot.exception_index import ExceptionIndex, index_revision
from reviewbot.experiments.exception_injection import candidates as injection_candidates
from reviewbot.experiments.exception_injection import run_injection
from reviewbot.experiments.key_stability import check_reproducibility
from reviewbot.failure_coverage import Executed, FailureCoverage, Measured
from reviewbot.findings import Finding, apply_evidence_policy
from reviewbot.gitrepo import GitRepo
from reviewbot.index_cache import FactsCache
from reviewbot.keychange import KeyChange, detect_key_change
from reviewbot.repo_config import CONFIG_FILE, ConfigError, RepoConfig, load_config
from reviewbot.results.schema import SuiteResult
from reviewbot.review import ChangeSummary, FileStat, Note, Review, Signal
from reviewbot.ruff import SELECT as RUFF_CODES
from reviewbot.ruff import ruff_started
from reviewbot.rules import FILE_RULES, FileContext, encoding, guarded_code, key_docs, silent_gate, suite_results
from reviewbot.rules import cache_key as cache_key_rule
from reviewbot.rules.common import QualnameIndex
from reviewbot.severity import Severity
from reviewbot.suites import run_suites
from reviewbot.testplan import FAILS_AT_HEAD, TestPlanRow, verify_test_plan

logger = logging.getLogger(__name__)

SUITE_MODES = ("none", "static", "all")
ProgressFn = Callable[[str], None]


def _no_progress(_: str) -> None:
    """Progress sink that drops messages."""


class StageClock:
    """Wall time of each stage of one review (`Review.timings`: seconds, in the order the stages
    end, then `total` since the clock was made). A stage timed inside another is left out of the
    outer one's time (`key_reproducibility` runs inside `cache_key`). Each name is timed once."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._started = time.monotonic()
        self._inner: list[float] = []  # per open stage: seconds spent in stages nested in it

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        assert name not in self.timings and name != "total", f"stage {name!r} timed twice"
        start = time.monotonic()
        self._inner.append(0.0)
        try:
            yield
        finally:
            elapsed = time.monotonic() - start
            inner = self._inner.pop()
            if self._inner:
                self._inner[-1] += elapsed
        self.timings[name] = elapsed - inner

    def finish(self) -> dict[str, float]:
        """The timings with `total` added."""
        self.timings["total"] = time.monotonic() - self._started
        return self.timings


def _areas(changes: list[FileChange]) -> list[str]:
    areas: list[str] = []
    for change in changes:
        parts = change.path.split("/")
        area = "/".join(parts[:2]) if len(parts) > 2 else (parts[0] if len(parts) > 1 else "(root)")
        if area not in areas:
            areas.append(area)
    return areas


def _parse(trees: pysource.Trees, source: str | None, path: str) -> ast.Module | None:
    return None if source is None else trees.parse(source, filename=path)


class BasePrints:
    """The fingerprints of the file rules' findings on one file's base version, computed on the
    first lookup: only a head finding that touches a changed line without starting on an added one
    (or a `stale-key-doc` one, or since round 22 a handler finding off the changed lines whose try
    the change touches: `_on_changed_try`) is compared with the base, so a file whose head findings need no
    comparison never has the rules run on its base (the rules have no effects, so the findings
    are the same). `context`: makes the base's `FileContext` (None from it, or no `context`, when
    there is no base version or it does not parse).
    `qualnames`: the enclosing names of the head findings that will be looked up. A fingerprint
    hashes its finding's enclosing name, so only base findings under those names can match: the
    base context's `focus` is the lines of the definitions so named (the whole file for a
    module-level name), and a rule may skip the rest of the base."""

    def __init__(
        self, context: Callable[[], FileContext | None] | None, qualnames: frozenset[str] = frozenset({""})
    ) -> None:
        self._context = context
        self._qualnames = qualnames
        self._prints: dict[str, Finding] | None = None
        self._tree: ast.Module | None = None

    def _found(self) -> dict[str, Finding]:
        if self._prints is None:
            ctx = self._context() if self._context is not None else None
            if ctx is not None:
                ctx = dataclasses.replace(ctx, focus=_within(ctx.qualnames, self._qualnames))
                self._tree = ctx.tree
            self._prints = {} if ctx is None else {f.fingerprint: f for rule in FILE_RULES for f in rule(ctx)}
        return self._prints

    def __contains__(self, fingerprint: object) -> bool:
        return fingerprint in self._found()

    def guards_new_code(self, finding: Finding, head_tree: ast.Module) -> bool:
        """The base has `finding`'s fingerprint on a handler whose try guarded less: the head's try
        holds a calling statement the base's did not (`guarded_code.guards_new_code`)."""
        before = self._found().get(finding.fingerprint)
        if before is None or self._tree is None:
            return False
        return guarded_code.guards_new_code(head_tree, finding.line_start, self._tree, before.line_start)

    def drops_exception_test(self, finding: Finding, head_tree: ast.Module) -> bool:
        """The base has `finding`'s fingerprint on a handler that tested the caught exception, and the
        head's handler tests it no more (`guarded_code.drops_exception_test`)."""
        before = self._found().get(finding.fingerprint)
        if before is None or self._tree is None:
            return False
        return guarded_code.drops_exception_test(head_tree, finding.line_start, self._tree, before.line_start)

    def new_name_fed(self, finding: Finding, head_tree: ast.Module) -> str | None:
        """The base has `finding`'s fingerprint on a handler whose try bound less: a name the head's
        try binds and the code after it reads (`guarded_code.new_name_fed`), or None."""
        before = self._found().get(finding.fingerprint)
        if before is None or self._tree is None:
            return None
        return guarded_code.new_name_fed(head_tree, finding.line_start, self._tree, before.line_start)


def _within(qualnames: QualnameIndex, names: frozenset[str]) -> Callable[[int, int], bool]:
    """Whether lines `start`..`end` overlap a definition named in `names` (any line for `""`)."""
    if "" in names:
        return lambda start, end: True
    spans = qualnames.spans(names)
    return lambda start, end: any(first <= end and start <= last for first, last in spans)


def _whole_file_doc(finding: Finding, change: FileChange) -> bool:
    """A `stale-key-doc` finding outside tests and helpers, or a finding the change caused away from
    its lines (`_away_from_change`): reported wherever it stands, when new."""
    return (finding.rule == "stale-key-doc" and not key_docs.is_test_or_helper(change.path)) or _away_from_change(
        finding
    )


def _away_from_change(finding: Finding) -> bool:
    """A handler that reads a module-level name the change removed (round 22,
    `handler-raises.removed-name`): its own lines need not have changed."""
    return finding.message_id == "handler-raises.removed-name"


def _compared(finding: Finding, change: FileChange) -> bool:
    """A head finding kept only when the base has no finding of its fingerprint: it touches a
    changed line without starting on an added one, or is a whole-file doc finding."""
    if _whole_file_doc(finding, change):
        return True
    return change.touches(finding.line_start, finding.line_end) and finding.line_start not in change.added_lines


def _on_changed_try(finding: Finding, change: FileChange, head_tree: ast.Module) -> bool:
    """A handler finding whose own lines the change does not touch, on a try whose lines it does
    and that binds a name the code after it reads (round 22, `guarded_code.names_fed`): whether that
    name is new needs the base."""
    if finding.rule not in guarded_code.HANDLER_RULES or change.touches(finding.line_start, finding.line_end):
        return False
    node = guarded_code.try_of_handler(head_tree, finding.line_start)
    return (
        node is not None
        and change.touches(node.lineno, node.end_lineno or node.lineno)
        and bool(guarded_code.names_fed(head_tree, finding.line_start))
    )


def _kept(finding: Finding, change: FileChange, base_prints: BasePrints, head_tree: ast.Module) -> Finding | None:
    """The head finding as reported, or None: it touches a changed line (a whole-file doc finding
    anywhere, marked whether it does) and starts on one or is new compared with the base; a finding
    whose fallback value flows on as data is new when its handler's try now guards code it did not
    guard at the base (round 20, `guarded_code`), a handler's finding is new when the base's
    handler tested the caught exception and the head's does not (round 22), and a handler finding off
    the changed lines, the same at the base, is reported as `guarded_code.new_binding_finding` when
    its changed try now binds a name the code after it reads (round 22); a handler finding whose harm
    is read outside the handler (`guarded_code.harm_outside`) is reported anywhere in the file when the
    base does not have it (round 27)."""
    if (
        _compared(finding, change)
        and finding.fingerprint in base_prints
        and not (finding.message_id in guarded_code.DATA_FALLBACKS and base_prints.guards_new_code(finding, head_tree))
        and not (finding.rule in guarded_code.HANDLER_RULES and base_prints.drops_exception_test(finding, head_tree))
    ):
        return None
    if guarded_code.harm_outside(finding) and finding.fingerprint not in base_prints:
        return finding  # the harm is read outside the handler, and the base does not have it (round 27)
    if _on_changed_try(finding, change, head_tree):
        name = base_prints.new_name_fed(finding, head_tree)
        return None if name is None else guarded_code.new_binding_finding(finding, name)
    in_diff = change.touches(finding.line_start, finding.line_end)
    if _whole_file_doc(finding, change):
        return dataclasses.replace(finding, in_diff=in_diff)
    return finding if in_diff else None


def _boilerplate_guards(tree: ast.Module, change: FileChange) -> list[int]:
    """The added lines holding a `hasattr` or `getattr(..., None)` call, in line order, each once
    (two guards on one line are one location)."""
    lines: set[int] = set()
    for node in pysource.nodes(tree):
        if not isinstance(node, ast.Call) or node.lineno not in change.added_lines:
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "hasattr":
            lines.add(node.lineno)
        elif isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) == 3:
            default = node.args[2]
            if isinstance(default, ast.Constant) and default.value is None:
                lines.add(node.lineno)
    return sorted(lines)


def _signals(findings: list[Finding], guards: list[str]) -> list[Signal]:
    groups = {
        "over-broad-handlers": {"broad-except", "runtime-error-fallback", "caught-own-subclass"},
        "unused-parameters": {"unused-key-param"},
        "docs-contradict-code": {"stale-key-doc"},
        "silent-gates": {"silent-gate"},
    }
    out: list[Signal] = []
    for kind, rules in groups.items():
        locs = tuple(f.location for f in findings if f.rule in rules)
        if locs:
            out.append(Signal(kind, len(locs), locs[:8]))
    if guards:
        out.append(Signal("boilerplate-guards", len(guards), tuple(guards[:8])))
    return out


def _suites_to_run(mode: str, config: RepoConfig) -> list[str]:
    if mode == "none":
        return []
    if mode == "static":
        return [name for name, s in config.suites.items() if s.gpus == 0]
    if mode == "all":
        return list(config.suites)
    names = [n.strip() for n in mode.split(",") if n.strip()]
    for name in names:
        config.suite(name)
    return names


def _base_overrides(git: GitRepo, merge_base: str) -> dict[str, Severity]:
    """The merge base's `severity_overrides`: what is merged decides how severe a rule's findings
    are, so a change cannot lower the severity of its own findings by editing `.reviewbot.yml`
    (none when the merge base's file is invalid)."""
    try:
        return dict(load_config(git.path, merge_base).severity_overrides)
    except ConfigError as exc:
        logger.warning("base revision's .reviewbot.yml is invalid (%s); no severity overrides apply", exc)
        return {}


def _base_config(git: GitRepo, merge_base: str, config: RepoConfig) -> RepoConfig:
    """The merge base's `.reviewbot.yml` when it names key roots (they may have moved since), else `config`."""
    try:
        base = load_config(git.path, merge_base)
    except ConfigError as exc:
        logger.warning("base revision's .reviewbot.yml is invalid (%s); using the head's key roots there", exc)
        return config
    return base if base.key_roots else config


def run_review(
    repo: Path | str,
    base: str,
    head: str,
    *,
    pr_body: str | None = None,
    pr_title: str | None = None,
    suites: str = "static",
    config: RepoConfig | None = None,
    config_file: str | None = None,
    base_config: RepoConfig | None = None,
    progress: ProgressFn | None = None,
    log_dir: Path | None = None,
) -> Review:
    """Review `merge-base(base, head)..head` of the git repository at `repo` (see module docstring)."""
    say = progress or _no_progress
    clock = StageClock()
    with GitRepo(repo) as git:
        with clock.stage("diff"):
            head_sha = git.rev_parse(head)
            merge_base = git.merge_base(base, head_sha)
            overrides = None if config is None else dict(config.severity_overrides)  # a given config's own
            if config is None:
                config = load_config(git.path, head_sha)
            head_has_file = git.read(head_sha, CONFIG_FILE) is not None
            if overrides is None:
                overrides = _base_overrides(git, merge_base)
            suite_names = _suites_to_run(suites, config)
            changes = diff_files(git, merge_base, head_sha)
            commits = [
                tuple(line.split("\x1f", 1))
                for line in git.git("log", "--format=%h\x1f%s", f"{merge_base}..{head_sha}").splitlines()
                if line
            ]
            branch = git.git("name-rev", "--name-only", "--refs=refs/heads/*", head_sha, check=False).strip() or head
            summary = ChangeSummary(
                title=pr_title or (commits[0][1] if len(commits) == 1 else branch.split("~")[0]),
                body=pr_body or "",
                branch=branch,
                base=base,
                head=head_sha,
                merge_base=merge_base,
                commits=[(c[0], c[1] if len(c) > 1 else "") for c in commits],
                areas=_areas(changes),
                files=[FileStat(c.path, c.old_path, c.status, c.lines_added, c.lines_removed) for c in changes],
            )
            say(
                f"diff {merge_base[:12]}..{head_sha[:12]}: {len(changes)} file(s), +{summary.lines_added} -{summary.lines_removed}"
            )

        key_change: KeyChange | None = None
        # the parsed sources of the static stages, shared read-only; the cyclic GC waits meanwhile
        with pysource.Trees() as trees:
            with clock.stage("cache_key"):
                if config.key_roots:
                    base_config = base_config or _base_config(git, merge_base, config)
                    key_change = detect_key_change(
                        git,
                        merge_base,
                        head_sha,
                        config,
                        probe=False if suites == "none" else None,
                        base_config=base_config,
                        progress=say,
                        require_roots=True,
                        hashed_sources=True,
                        trees=trees,
                    )
                    if key_change.probe_status == "ok":  # the experiment runs the probe again at both revisions
                        with clock.stage("key_reproducibility"):
                            key_change = check_reproducibility(git, key_change, config, base_config, progress=say)
                    say(f"cache key: {key_change.status}")

            with clock.stage("static_rules"):
                findings, guards, unparsed = _file_findings(
                    git, merge_base, head_sha, changes, config, key_change, say, trees
                )
                if key_change is not None:
                    findings += cache_key_rule.check(key_change, {c.path: c for c in changes}, pr_body)
                    if pr_body:
                        findings += key_docs.check_pr_body(
                            pr_body,
                            config.vocabulary,
                            key_change.factors_head,
                            key_change.factors_added,
                            key_change.factors_base,
                        )

        # Failing tests are re-run under coverage in the full modes only, not in `static`.
        executed = FailureCoverage(changes) if suites not in ("none", "static") else None
        test_plan: list[TestPlanRow] = []
        if pr_body and suites != "none":
            with clock.stage("test_plan"):
                test_plan = verify_test_plan(
                    git, merge_base, head_sha, pr_body, changes, log_dir=log_dir, progress=say, after_head=executed
                )
        elif pr_body:
            logger.info("test plan not verified: --suites none runs no code of the revision")

        results: list[SuiteResult] = []
        if suite_names:
            with clock.stage("suites"):
                results = run_suites(
                    git.path, head_sha, suite_names, config=config, log_dir=log_dir, progress=say, after_suite=executed
                )
        anchor = suite_results.TestAnchor(git, head_sha, changes)
        planned = {row.test_id for row in test_plan if row.status == FAILS_AT_HEAD}
        if executed is not None:
            ran = Measured(executed.by_test)
        else:
            ran = Measured(
                unmeasured=Executed(not_measured=f"suites mode `{suites}` does not re-run failing tests under coverage")
            )
        at_base: dict[str, str] = {}
        if any(result.failures for result in results) or planned:
            with clock.stage("failing_at_base"):
                at_base = outcomes_at_base(
                    git,
                    merge_base,
                    results,
                    config,
                    planned=sorted(planned),
                    log_dir=log_dir / "base" if log_dir is not None else None,
                    progress=say,
                )
        test_plan = [
            dataclasses.replace(row, base_outcome=at_base[row.test_id])
            if row.status == FAILS_AT_HEAD and row.test_id in at_base
            else row
            for row in test_plan
        ]
        failing_at_base = suite_results.failing_at_base(results, at_base)
        failing = suite_results.from_suites(results, config, anchor, planned, ran, at_base)
        findings += suite_results.from_test_plan(test_plan, anchor, {f.qualname for f in failing}, ran) + failing
        if suites != "none" and injection_candidates(findings):  # the experiment runs the revision's code
            with clock.stage("exception_injection"):
                findings = run_injection(
                    git,
                    head_sha,
                    findings,
                    config.injection,
                    [config.suite(name) for name in suite_names if config.suite(name).gpus == 0],
                    results,
                    log_dir=log_dir / "injection" if log_dir is not None else None,
                    progress=say,
                )

    findings = [
        apply_evidence_policy(f.with_severity(overrides[f.rule]) if f.rule in overrides else f) for f in findings
    ]
    findings.sort(key=lambda f: (f.severity.rank, f.path, f.line_start, f.rule))
    timings = clock.finish()
    say(f"review done in {timings['total']:.2f}s: {len(findings)} finding(s)")
    return Review(
        summary=summary,
        findings=findings,
        key_change=key_change,
        suite_results=results,
        test_plan=test_plan,
        signals=_signals(findings, guards),
        language=config.language,
        suites_mode=suites,
        timings=timings,
        notes=_checks_off(config, config_file, head_has_file) + _root_notes(key_change) + unparsed,
        suites_configured=list(config.suites),
        failing_at_base=failing_at_base,
    )


def _checks_off(config: RepoConfig, config_file: str | None, head_has_file: bool) -> list[Note]:
    """What this review does not check for want of configuration, and why (`config_file`: the file
    given instead of the committed one)."""
    if config.key_roots:
        return []
    if config_file is not None:
        return [Note("review-note.checks-off-config", {"path": config_file})]
    return [Note("review-note.checks-off-no-roots" if head_has_file else "review-note.checks-off-no-file")]


def _root_notes(key_change: KeyChange | None) -> list[Note]:
    """Configured key roots that exist at one revision only: the change adds or removes them."""
    if key_change is None:
        return []
    notes = [Note("review-note.root-added", {"root": root}) for root in key_change.roots_added]
    notes += [Note("review-note.root-removed", {"root": root}) for root in key_change.roots_removed]
    return notes


def _file_findings(
    git: GitRepo,
    merge_base: str,
    head: str,
    changes: list[FileChange],
    config: RepoConfig,
    key_change: KeyChange | None,
    say: ProgressFn,
    trees: pysource.Trees,
) -> tuple[list[Finding], list[str], list[Note]]:
    """Per-file rules on head and base versions of the changed Python files, filtered to the change
    (the base version's rules run only when a head finding needs the comparison, `BasePrints`); and
    a `review-note.not-parsed` note for each changed file the reviewing interpreter cannot parse at
    head (newer syntax, `class Union[T]:` on Python 3.11), whose rules did not run.
    `trees`: the review's parsed sources, shared read-only with the rules and the exception index."""
    versions: dict[str, tuple[FileChange, str | None, str | None]] = {}
    for change in changes:
        if not change.is_python or change.status == "removed":
            continue
        head_src = git.read(head, change.path)
        base_src = git.read(merge_base, change.old_path) if change.old_path else None
        versions[change.path] = (change, head_src, base_src)
    ruff_input: dict[str, str] = {}
    for path, (_, head_src, base_src) in versions.items():
        if head_src is not None:
            ruff_input[f"head/{path}"] = head_src
        if base_src is not None:
            ruff_input[f"base/{path}"] = base_src
    say(f"static rules: {len(versions)} Python file(s); ruff {','.join(RUFF_CODES)}")

    kc = key_change

    @functools.cache
    def exceptions() -> ExceptionIndex:
        # the head's classes serve the base pass too: a finding is new when the handler is
        start = time.perf_counter()
        with FactsCache.at(git.git_dir()) as cache:
            index = index_revision(git, head, trees, cache)
        say(
            f"exception index: {len(index)} exception class(es) in {index.files} Python file(s) "
            f"of the repository ({time.perf_counter() - start:.1f}s)"
        )
        return index

    @functools.cache
    def changed_trees(revision: str) -> tuple[tuple[str, ast.Module], ...]:
        # every changed Python file that parses at "base" (removed files included) or "head"
        out: list[tuple[str, ast.Module]] = []
        for change in changes:
            if revision == "head":
                path, rev = (change.path if change.status != "removed" else None), head
            else:
                path, rev = change.old_path or (change.path if change.status == "removed" else None), merge_base
            source = git.read(rev, path) if path and path.endswith(".py") else None
            tree = trees.parse(source, filename=path) if path and source is not None else None
            if path and tree is not None:
                out.append((path, tree))
        return tuple(out)

    @functools.cache
    def moved_conditions() -> frozenset[str]:
        return silent_gate.moved_conditions(changed_trees("base"), changed_trees("head"))

    with ruff_started(ruff_input) as ruff_wait:
        # the head versions are the files reviewed below: parsed while ruff runs in its own process
        changed_trees("head")
        ruff_hits = ruff_wait()

    findings: list[Finding] = []
    guards: list[str] = []
    unparsed: list[Note] = []
    for path, (change, head_src, base_src) in versions.items():
        bad = git.not_utf8.get((head, path))
        if head_src is not None and bad is not None and (merge_base, change.old_path) not in git.not_utf8:
            findings.append(encoding.check(path, head_src, *bad, in_diff=change.touches(bad[0], bad[0])))
        head_tree = _parse(trees, head_src, path)
        if head_tree is None or head_src is None:
            if head_src is not None:
                python = ".".join(map(str, sys.version_info[:2]))
                reason = pysource.parse_error(head_src, path)
                unparsed.append(Note("review-note.not-parsed", {"path": path, "python": python, "reason": reason}))
            logger.warning("%s does not parse at head; static rules skipped for it", path)
            continue
        head_ctx = _context(
            path,
            "head",
            head_src,
            head_tree,
            config,
            ruff_hits.get(f"head/{path}", []),
            kc,
            exceptions,
            changed_trees,
            moved_conditions,
            focus=change.touches,
        )
        head_findings = [finding for rule in FILE_RULES for finding in rule(head_ctx)]
        base_prints = BasePrints(
            None
            if base_src is None
            else functools.partial(
                _base_context,
                trees,
                path,
                base_src,
                config,
                ruff_hits.get(f"base/{path}", []),
                kc,
                exceptions,
                changed_trees,
                moved_conditions,
            ),
            frozenset(
                f.qualname
                for f in head_findings
                if _compared(f, change) or _on_changed_try(f, change, head_tree) or guarded_code.harm_outside(f)
            ),
        )
        findings += [kept for f in head_findings if (kept := _kept(f, change, base_prints, head_tree)) is not None]
        guards += [f"{path}:{line}" for line in _boilerplate_guards(head_tree, change)]
    return findings, guards, unparsed


def _base_context(
    trees: pysource.Trees,
    path: str,
    source: str,
    config: RepoConfig,
    ruff: list,
    kc: KeyChange | None,
    exceptions: Callable[[], ExceptionIndex],
    changed_trees: Callable[[str], tuple[tuple[str, ast.Module], ...]],
    moved_conditions: Callable[[], frozenset[str]],
) -> FileContext | None:
    """The base version's `FileContext`, parsed here (only a file whose head findings need the
    comparison is parsed at base); None when it does not parse."""
    tree = _parse(trees, source, path)
    if tree is None:
        return None
    return _context(path, "base", source, tree, config, ruff, kc, exceptions, changed_trees, moved_conditions)


def _context(
    path: str,
    revision: str,
    source: str,
    tree: ast.Module,
    config: RepoConfig,
    ruff: list,
    kc: KeyChange | None,
    exceptions: Callable[[], ExceptionIndex],
    changed_trees: Callable[[str], tuple[tuple[str, ast.Module], ...]],
    moved_conditions: Callable[[], frozenset[str]],
    focus: Callable[[int, int], bool] | None = None,
) -> FileContext:
    """`focus`: the head version's `FileContext.focus` (None: every line can be reported)."""
    if kc is None:
        closure, factors, gained, known = {}, [], [], []
    elif revision == "head":
        closure, factors, gained = kc.head_items, kc.factors_head, kc.factors_added
        known = kc.factors_base
    else:
        closure, factors, gained, known = kc.base_items, kc.factors_base, [], kc.factors_head
    return FileContext(
        path=path,
        revision=revision,
        source=source,
        tree=tree,
        lines=source.splitlines(),
        qualnames=QualnameIndex(tree),
        config=config,
        ruff=ruff,
        key_change=kc,
        closure=closure,
        factors=factors,
        factors_gained=gained,
        factors_known=known,
        exceptions=exceptions,
        changed_trees=changed_trees,
        moved_conditions=moved_conditions,
        **({} if focus is None else {"focus": focus}),
    )
