"""Benchmark: precision and recall of the static review on a labelled corpus of real commits.

    python -m reviewbot.bench_precision [--corpus DIR] [--case NAME ...] [--set tuning|held-out|all]
                                        [--experiments]

Each case is a directory of the corpus (default: `reviewbot/bench_precision_corpus/`) holding

- `case.bundle`: a git bundle with branches `base` (the upstream parent, touched files only) and
  `head` (the upstream commit, same files);
- `LICENSE`: the upstream licence; `README.md`: the source URL and commit SHA;
- `labels.yml`: `source`, `commit`, optional `set` (`tuning`, the default: cases the rules were
  refined on; or `held-out`: cases labelled without looking at the rules, their `problems` written
  from the diff before the bot ran), optional `experiments` (true: the case's bundle carries the
  project's tests and a `.reviewbot.yml` for them, so `--experiments` reviews it with the
  experiments; default false), and two lists. `findings`: every finding the bot gives, as
  `{rule, path, line, severity, label: true|false, reason}`; `problems`: real problems in the change
  the bot should find, as `{rule, path, line, reason}` (they count for recall whether found or not).

A finding matches a label when rule and path are equal and the label's line lies in the finding's
line range; a finding may also match a `problems` entry, which then counts as found. A real
`wide-try` label (a true finding or a problem, its line the `try`'s) is found by the annotation
of the width inside the `broad-except` or `runtime-error-fallback` finding on a handler of that try
(`wide_try_line` in the finding's `extra`; the width is no finding of its own since round 3): it
counts for recall, not a second time for precision. Findings
that match no label are printed as "unlabelled" for a human to label; they
count neither for nor against precision. The review runs with `suites="none"` (static rules and the
static key check, no probe, no experiments); its wall time per case is printed. With
`--experiments`, a case whose labels say `experiments: true` is reviewed with `suites="static"`
instead (its `.reviewbot.yml` at `head`: the suites that need no GPU, the key probe and the
experiments run on the revision's code, in the sandbox); its line then gives the review's time,
the time of its experiment stages (`EXPERIMENT_STAGES`), and each finding's evidence line, and
only such a finding can carry `P0`/`P1` (severity follows evidence). Cases without the field are
reviewed statically as without the flag. With cases of more than one set, the table is printed
per set and then for all of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from reviewbot.engine import run_review
from reviewbot.findings import Finding
from reviewbot.severity import Severity

DEFAULT_CORPUS = Path(__file__).parent / "bench_precision_corpus"
SETS = ("tuning", "held-out")
EXPERIMENT_STAGES = ("suites", "key_reproducibility", "exception_injection")


@dataclasses.dataclass(frozen=True)
class Label:
    """One labelled finding (`real` is None for a problem entry, which is always real)."""

    rule: str
    path: str
    line: int
    severity: Severity | None
    real: bool
    reason: str
    expected_problem: bool


@dataclasses.dataclass
class CaseResult:
    name: str
    case_set: str
    seconds: float
    matched: list[tuple[Finding, Label]]
    unlabelled: list[Finding]
    missed: list[Label]
    annotated: list[tuple[Finding, Label]] = dataclasses.field(default_factory=list)
    suites_mode: str = "none"
    experiment_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    evidence: list[str] = dataclasses.field(default_factory=list)


def _require(entry: dict[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise ValueError(f"{where}: label lacks {key!r}")
    return entry[key]


def _load_mapping(case_dir: Path) -> dict[str, Any]:
    data = yaml.safe_load((case_dir / "labels.yml").read_text())
    if not isinstance(data, dict):
        raise TypeError(f"{case_dir / 'labels.yml'}: not a mapping")
    return data


def load_case_set(case_dir: Path) -> str:
    """The case's `set` from `labels.yml` (`tuning` when absent); ValueError when not one of `SETS`."""
    case_set = _load_mapping(case_dir).get("set", "tuning")
    if case_set not in SETS:
        raise ValueError(f"{case_dir.name}/labels.yml: set must be one of {', '.join(SETS)}, not {case_set!r}")
    return case_set


def load_experiments(case_dir: Path) -> bool:
    """The case's `experiments` flag from `labels.yml` (False when absent); TypeError when not a bool."""
    flag = _load_mapping(case_dir).get("experiments", False)
    if not isinstance(flag, bool):
        raise TypeError(f"{case_dir.name}/labels.yml: experiments must be true or false, not {flag!r}")
    return flag


def load_labels(case_dir: Path) -> list[Label]:
    """Read `labels.yml` of one case; ValueError on a missing key, TypeError on a wrongly typed value."""
    data = _load_mapping(case_dir)
    labels: list[Label] = []
    for i, entry in enumerate(data.get("findings") or []):
        where = f"{case_dir.name}/labels.yml findings[{i}]"
        real = _require(entry, "label", where)
        if not isinstance(real, bool):
            raise TypeError(f"{where}: label must be true or false")
        labels.append(
            Label(
                rule=_require(entry, "rule", where),
                path=_require(entry, "path", where),
                line=int(_require(entry, "line", where)),
                severity=Severity.parse(str(_require(entry, "severity", where))),
                real=real,
                reason=_require(entry, "reason", where),
                expected_problem=False,
            )
        )
    for i, entry in enumerate(data.get("problems") or []):
        where = f"{case_dir.name}/labels.yml problems[{i}]"
        labels.append(
            Label(
                rule=_require(entry, "rule", where),
                path=_require(entry, "path", where),
                line=int(_require(entry, "line", where)),
                severity=None,
                real=True,
                reason=_require(entry, "reason", where),
                expected_problem=True,
            )
        )
    return labels


def _matches(finding: Finding, label: Label) -> bool:
    end = max(finding.line_end, finding.line_start)
    return finding.rule == label.rule and finding.path == label.path and finding.line_start <= label.line <= end


def _label_for(finding: Finding, labels: list[Label], used: set[int]) -> int | None:
    """The index of the unused label at the finding's place: one judged at the finding's own severity
    first, then a problem (found at any severity), then any other (a finding label judges the
    finding at the severity it names: a `P2` labelled false does not make a `P3` at a listed problem
    false); each of the first two on the finding's first line before one further in its range (a
    handler whose range holds a nested handler's label takes its own line's problem, round 22)."""
    here = [i for i, label in enumerate(labels) if i not in used and _matches(finding, label)]
    own = [i for i in here if labels[i].line == finding.line_start]
    for preferred in (
        [i for i in own if labels[i].severity is finding.severity],
        [i for i in own if labels[i].expected_problem],
        [i for i in here if labels[i].severity is finding.severity],
        [i for i in here if labels[i].expected_problem],
        here,
    ):
        if preferred:
            return preferred[0]
    return None


def _annotates(finding: Finding, label: Label) -> bool:
    """A real `wide-try` label found by the width annotation of the finding on a handler of its try."""
    return (
        label.rule == "wide-try"
        and label.real
        and finding.path == label.path
        and finding.extra.get("wide_try_line") == label.line
    )


def run_case(case_dir: Path, work: Path, experiments: bool = False) -> CaseResult:
    """Clone the case's bundle into `work`, review `base..head` and match the labels: statically,
    or with `suites="static"` (the experiments) when `experiments` and the case opts in."""
    bundle = case_dir / "case.bundle"
    if not bundle.is_file():
        raise ValueError(f"{case_dir}: no case.bundle")
    labels = load_labels(case_dir)
    case_set = load_case_set(case_dir)
    suites_mode = "static" if experiments and load_experiments(case_dir) else "none"
    repo = work / case_dir.name
    subprocess.run(["git", "clone", "-q", str(bundle), str(repo)], check=True, capture_output=True)
    subprocess.run(["git", "branch", "-q", "base", "origin/base"], cwd=repo, check=True, capture_output=True)
    start = time.perf_counter()
    review = run_review(repo, "base", "origin/head", suites=suites_mode)
    seconds = time.perf_counter() - start
    staged = {name: review.timings[name] for name in EXPERIMENT_STAGES if name in review.timings}
    shown = (
        [
            f"{f.rule} {f.severity.name} {f.path}:{f.line_start}: {f.evidence.kind.value}: {f.evidence.text('en')}"
            for f in review.findings
        ]
        if suites_mode != "none"
        else []
    )
    matched: list[tuple[Finding, Label]] = []
    unlabelled: list[Finding] = []
    used: set[int] = set()
    for finding in review.findings:
        hit = _label_for(finding, labels, used)
        if hit is None:
            unlabelled.append(finding)
        else:
            used.add(hit)
            matched.append((finding, labels[hit]))
    annotated: list[tuple[Finding, Label]] = []
    for finding in review.findings:
        hit = next((i for i, label in enumerate(labels) if i not in used and _annotates(finding, label)), None)
        if hit is not None:
            used.add(hit)
            annotated.append((finding, labels[hit]))
    missed = [label for i, label in enumerate(labels) if i not in used and label.real]
    return CaseResult(
        case_dir.name, case_set, seconds, matched, unlabelled, missed, annotated, suites_mode, staged, shown
    )


def _ratio(num: int, den: int) -> str:
    return f"{100.0 * num / den:5.1f}%" if den else "   n/a"


def table(results: list[CaseResult]) -> str:
    """Per rule and per severity: labelled findings, true, false, precision, real problems, found, recall."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tp, fp, found real, missed real
    for result in results:
        for finding, label in result.matched:
            keys = (f"rule {finding.rule}", f"severity {finding.severity.name}", "all")
            for key in keys:
                rows[key][0 if label.real else 1] += 1
                if label.real:
                    rows[key][2] += 1
        for _, label in result.annotated:
            for key in (f"rule {label.rule}", "all"):
                rows[key][2] += 1
        for label in result.missed:
            for key in (f"rule {label.rule}", "all"):
                rows[key][3] += 1
    lines = [f"{'group':<28} {'true':>5} {'false':>5} {'precision':>9} {'real':>5} {'found':>5} {'recall':>7}"]
    for key in sorted(rows, key=lambda k: (k == "all", k)):
        tp, fp, found, missed = rows[key]
        lines.append(
            f"{key:<28} {tp:>5} {fp:>5} {_ratio(tp, tp + fp):>9} {found + missed:>5} {found:>5} "
            f"{_ratio(found, found + missed):>7}"
        )
    return "\n".join(lines)


def report(results: list[CaseResult]) -> str:
    """The full printed report: per-case times and unlabelled/missed lists, then the table (one per
    set, then one for all, when the results hold more than one set)."""
    out: list[str] = []
    for result in results:
        if result.suites_mode == "none":
            how = f"static review {result.seconds:.3f} s"
        else:
            stages = ", ".join(f"{name} {sec:.1f} s" for name, sec in result.experiment_seconds.items())
            how = f"review with experiments {result.seconds:.1f} s ({stages or 'no experiment stage ran'})"
        out.append(
            f"case {result.name}: {how}, {len(result.matched)} labelled, "
            f"{len(result.unlabelled)} unlabelled, {len(result.missed)} missed"
        )
        for line in result.evidence:
            out.append(f"  evidence: {line}")
        for finding in result.unlabelled:
            out.append(
                f"  unlabelled: {finding.rule} {finding.severity.name} {finding.path}:{finding.line_start} "
                f"({finding.message_id})"
            )
        for finding, label in result.annotated:
            out.append(
                f"  found as an annotation: {label.rule} {label.path}:{label.line} in {finding.rule} "
                f"{finding.path}:{finding.line_start}"
            )
        for label in result.missed:
            out.append(f"  missed: {label.rule} {label.path}:{label.line} ({label.reason})")
    present = [s for s in SETS if any(r.case_set == s for r in results)]
    if len(present) <= 1:
        out.extend(["", table(results)])
    else:
        for case_set in present:
            chosen = [r for r in results if r.case_set == case_set]
            out.extend(["", f"set {case_set} ({len(chosen)} cases):", table(chosen)])
        out.extend(["", f"all sets ({len(results)} cases):", table(results)])
    return "\n".join(out)


def checked_cases(corpus: Path, names: list[str] | None, case_set: str = "all") -> list[Path]:
    """`case_dirs` of `case_set` (one of `SETS`, or `all`), each with labels that load (else
    `ValueError`/`TypeError` naming the problem)."""
    if case_set not in (*SETS, "all"):
        raise ValueError(f"set must be one of {', '.join(SETS)}, all; not {case_set!r}")
    cases = case_dirs(corpus, names)
    sets: dict[Path, str] = {}
    for case in cases:
        load_labels(case)
        load_experiments(case)
        sets[case] = load_case_set(case)
    chosen = [case for case in cases if case_set in ("all", sets[case])]
    if cases and not chosen:
        raise ValueError(f"no case of set {case_set} among the chosen cases")
    return chosen


def case_dirs(corpus: Path, names: list[str] | None) -> list[Path]:
    """The case directories of `corpus` (those holding `labels.yml`), or the named ones."""
    if not corpus.is_dir():
        raise ValueError(f"corpus {corpus} is not a directory")
    found = sorted(p for p in corpus.iterdir() if (p / "labels.yml").is_file())
    if names:
        by_name = {p.name: p for p in found}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise ValueError(f"unknown case(s): {', '.join(unknown)}")
        return [by_name[n] for n in names]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="corpus directory")
    parser.add_argument("--case", action="append", help="review only this case (repeatable)")
    parser.add_argument(
        "--set",
        dest="case_set",
        choices=(*SETS, "all"),
        default="all",
        help="review only the cases of this set (tuning: the rules were refined on them; held-out: labelled "
        "without looking at the rules); default all, with a table per set",
    )
    parser.add_argument(
        "--experiments",
        action="store_true",
        help="review the cases whose labels.yml says `experiments: true` with the experiments (suites=static: "
        "their tests, the key probe, exception injection; runs the cases' code in the sandbox); the other cases "
        "stay static",
    )
    args = parser.parse_args(argv)
    try:
        cases = checked_cases(args.corpus, args.case, args.case_set)
    except (ValueError, TypeError) as exc:
        print(f"bench_precision: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="reviewbot-precision-") as tmp:
        results = [run_case(case, Path(tmp), args.experiments) for case in cases]
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
