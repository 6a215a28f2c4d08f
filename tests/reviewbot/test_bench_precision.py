"""The precision benchmark: its corpus is consistent, and its table agrees with the labels."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from reviewbot import bench_precision
from reviewbot.findings import Finding
from reviewbot.severity import Severity
from tests.reviewbot.engine.engine_gitrepos import Repo
from tests.reviewbot.toy_pytest import NO_PLUGINS


@pytest.fixture(autouse=True)
def _tmp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("MAGI_COMPILE_CACHE_ROOT_DIR", str(tmp_path / "magi"))


def _table(output: str) -> dict[str, list[str]]:
    lines = output.split("\n\n", 1)[1].splitlines()
    assert lines[0].split()[0] == "group"
    rows: dict[str, list[str]] = {}
    for line in lines[1:]:
        parts = line.split()
        name = " ".join(parts[:2]) if parts[0] in ("rule", "severity") else parts[0]
        rows[name] = parts[len(name.split()) :]
    return rows


def test_every_label_references_an_existing_case_and_file(tmp_path: Path) -> None:
    cases = bench_precision.case_dirs(bench_precision.DEFAULT_CORPUS, None)
    assert len(cases) >= 3
    for case in cases:
        data = yaml.safe_load((case / "labels.yml").read_text())
        assert data["source"].startswith("https://github.com/")
        assert len(data["commit"]) == 40
        assert data["commit"] in (case / "README.md").read_text()
        assert (case / "LICENSE").stat().st_size > 0
        heads = subprocess.run(
            ["git", "bundle", "list-heads", str(case / "case.bundle")], capture_output=True, text=True, check=True
        ).stdout
        assert "refs/heads/base" in heads and "refs/heads/head" in heads
        clone = tmp_path / case.name
        subprocess.run(["git", "clone", "-q", "--bare", str(case / "case.bundle"), str(clone)], check=True)
        for label in bench_precision.load_labels(case):
            shown = subprocess.run(
                ["git", "cat-file", "-e", f"head:{label.path}"], cwd=clone, capture_output=True, check=False
            )
            assert shown.returncode == 0, f"{case.name}: {label.path} not in the case's head"


def test_table_of_one_real_case_matches_its_labels(capsys: pytest.CaptureFixture[str]) -> None:
    case = bench_precision.DEFAULT_CORPUS / "titan-deepseek-group-gemm"
    labels = bench_precision.load_labels(case)
    assert bench_precision.main(["--case", "titan-deepseek-group-gemm"]) == 0
    out = capsys.readouterr().out
    assert "case titan-deepseek-group-gemm: static review" in out
    assert f"{len(labels)} labelled, 0 unlabelled, 0 missed" in out
    rows = _table(out)
    by_rule = Counter((label.rule, label.real) for label in labels)
    for rule in {label.rule for label in labels}:
        true, false = by_rule[(rule, True)], by_rule[(rule, False)]
        assert rows[f"rule {rule}"][:2] == [str(true), str(false)]
    assert rows["all"][:2] == [str(sum(l.real for l in labels)), str(sum(not l.real for l in labels))]


def _crafted_case(tmp_path: Path) -> Path:
    repo = Repo(tmp_path / "src")
    repo.commit({"pkg/load.py": "def load(path):\n    return open(path).read()\n"}, "base")
    repo.branch("head")
    repo.commit(
        {
            "pkg/load.py": (
                "def load(path):\n    try:\n        return open(path).read()\n    except Exception:\n        return ''\n"
            ),
            "pkg/other.py": "def other(x, parse):\n    try:\n        return parse(x)\n    except Exception:\n        return 0\n",
        },
        "swallow",
    )
    repo.git("branch", "-m", "main", "base")
    case = tmp_path / "corpus" / "crafted"
    case.mkdir(parents=True)
    repo.git("bundle", "create", "-q", str(case / "case.bundle"), "base", "head")
    case.joinpath("labels.yml").write_text(
        yaml.safe_dump(
            {
                "source": "https://github.com/example/crafted",
                "commit": "0" * 40,
                "findings": [
                    {
                        "rule": "broad-except",
                        "path": "pkg/load.py",
                        "line": 4,
                        "severity": "P0",
                        "label": True,
                        "reason": "a read error becomes an empty file",
                    }
                ],
                "problems": [{"rule": "silent-gate", "path": "pkg/load.py", "line": 2, "reason": "crafted miss"}],
            }
        )
    )
    return case.parent


def test_unlabelled_findings_are_listed_and_misses_lower_recall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _crafted_case(tmp_path)
    assert bench_precision.main(["--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "1 labelled, 1 unlabelled, 1 missed" in out
    assert "unlabelled: broad-except P3 pkg/other.py:" in out  # round 26: a try around one operation
    assert "missed: silent-gate pkg/load.py:2 (crafted miss)" in out
    rows = _table(out)
    assert rows["rule broad-except"] == ["1", "0", "100.0%", "1", "1", "100.0%"]
    assert rows["rule silent-gate"] == ["0", "0", "n/a", "1", "0", "0.0%"]
    assert rows["all"] == ["1", "0", "100.0%", "2", "1", "50.0%"]


@pytest.mark.parametrize(("judged", "true_false"), [("P0", ["1", "0"]), ("P3", ["0", "1"])])
def test_a_finding_label_judges_its_own_severity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], judged: str, true_false: list[str]
) -> None:
    corpus = _crafted_case(tmp_path)
    labels = corpus / "crafted" / "labels.yml"
    data = yaml.safe_load(labels.read_text())
    data["findings"][0].update({"severity": judged, "label": False, "reason": f"a {judged} is too strong here"})
    data["problems"] = [
        {"rule": "broad-except", "path": "pkg/load.py", "line": 4, "reason": "a weaker finding is right"}
    ]
    labels.write_text(yaml.safe_dump(data))
    assert bench_precision.main(["--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    # the static review's P3 at the problem's line (round 26: its try guards one operation): the problem
    # found, unless a label judged that P3 false
    assert _table(out)["rule broad-except"][:2] == true_false


def test_bad_corpus_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_precision.main(["--corpus", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a directory" in err
    assert bench_precision.main(["--case", "no-such-case"]) == 2
    assert "unknown case(s): no-such-case" in capsys.readouterr().err


def _set_case(corpus: Path, name: str, case_set: str | None, tmp_path: Path) -> None:
    """A case whose head adds one swallowing handler (the bot gives one broad-except finding, labelled true)."""
    repo = Repo(tmp_path / f"src-{name}")
    repo.commit({"pkg/load.py": "def load(path):\n    return open(path).read()\n"}, "base")
    repo.branch("head")
    repo.commit(
        {
            "pkg/load.py": "def load(path):\n    try:\n        return open(path).read()\n    except Exception:\n        return ''\n"
        },
        "swallow",
    )
    repo.git("branch", "-m", "main", "base")
    case = corpus / name
    case.mkdir(parents=True)
    repo.git("bundle", "create", "-q", str(case / "case.bundle"), "base", "head")
    labels: dict[str, object] = {
        "source": "https://github.com/example/crafted",
        "commit": "0" * 40,
        "findings": [],
        "problems": [{"rule": "broad-except", "path": "pkg/load.py", "line": 4, "reason": "read error becomes ''"}],
    }
    if case_set is not None:
        labels["set"] = case_set
    case.joinpath("labels.yml").write_text(yaml.safe_dump(labels))


def test_sets_give_one_table_each_and_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    _set_case(corpus, "a-default", None, tmp_path)
    _set_case(corpus, "b-held", "held-out", tmp_path)
    _set_case(corpus, "c-held", "held-out", tmp_path)
    assert bench_precision.main(["--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    sections = out.split("\n\n")[1:]
    assert [s.splitlines()[0] for s in sections] == [
        "set tuning (1 cases):",
        "set held-out (2 cases):",
        "all sets (3 cases):",
    ]
    alls = [s.strip().splitlines()[-1].split() for s in sections]
    # a problem the bot finds counts as a true finding and as found
    assert [row[1:7] for row in alls] == [
        ["1", "0", "100.0%", "1", "1", "100.0%"],
        ["2", "0", "100.0%", "2", "2", "100.0%"],
        ["3", "0", "100.0%", "3", "3", "100.0%"],
    ]
    assert bench_precision.main(["--corpus", str(corpus), "--set", "held-out"]) == 0
    out = capsys.readouterr().out
    assert "case a-default" not in out and "case b-held" in out and "case c-held" in out
    assert "set held-out" not in out  # one set: one table, as before
    assert _table(out)["all"] == ["2", "0", "100.0%", "2", "2", "100.0%"]


def test_bad_or_empty_set_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    _set_case(corpus, "odd", "validation", tmp_path)
    assert bench_precision.main(["--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "set must be one of tuning, held-out, not 'validation'" in err
    (corpus / "odd" / "labels.yml").write_text(
        (corpus / "odd" / "labels.yml").read_text().replace("validation", "tuning")
    )
    assert bench_precision.main(["--corpus", str(corpus), "--set", "held-out"]) == 2
    assert "no case of set held-out" in capsys.readouterr().err
    with pytest.raises(ValueError, match="set must be one of tuning, held-out, all"):
        bench_precision.checked_cases(corpus, None, "dev")


def test_shipped_corpus_has_a_held_out_set_from_other_projects() -> None:
    cases = bench_precision.case_dirs(bench_precision.DEFAULT_CORPUS, None)
    held = [c for c in cases if bench_precision.load_case_set(c) == "held-out"]
    assert len(held) >= 6
    tuning_sources = {yaml.safe_load((c / "labels.yml").read_text())["source"] for c in cases if c not in held}
    for case in held:
        assert yaml.safe_load((case / "labels.yml").read_text())["source"] not in tuning_sources
        assert "before the bot was run" in (case / "README.md").read_text()
    assert sum((c / "case.bundle").stat().st_size for c in held) < 2_000_000


def test_a_width_problem_is_found_by_the_annotation_on_its_try(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = Repo(tmp_path / "src")
    repo.commit({"pkg/specs.py": "def specs():\n    return None\n"}, "base")
    repo.branch("head")
    source = (
        "def specs(dev):\n"
        "    try:\n"
        "        cap = dev.capability()\n"
        "        ver = dev.version()\n"
        "        return cap, ver\n"
        "    except Exception:\n"
        "        return None\n"
        "\n\n"
        "def narrow(dev):\n"
        "    try:\n"
        "        cap = dev.capability()\n"
        "        ver = dev.version()\n"
        "        return cap, ver\n"
        "    except AttributeError:\n"
        "        return None\n"
    )
    repo.commit({"pkg/specs.py": source}, "wide")
    repo.git("branch", "-m", "main", "base")
    case = tmp_path / "corpus" / "wide"
    case.mkdir(parents=True)
    repo.git("bundle", "create", "-q", str(case / "case.bundle"), "base", "head")
    problems = [
        {"rule": "broad-except", "path": "pkg/specs.py", "line": 6, "reason": "a driver error means no specs"},
        {"rule": "wide-try", "path": "pkg/specs.py", "line": 2, "reason": "either call takes the fallback"},
        {"rule": "wide-try", "path": "pkg/specs.py", "line": 11, "reason": "crafted: no finding on this try"},
    ]
    case.joinpath("labels.yml").write_text(
        yaml.safe_dump({"source": "https://github.com/example/wide", "commit": "0" * 40, "problems": problems})
    )
    assert bench_precision.main(["--corpus", str(case.parent)]) == 0
    out = capsys.readouterr().out
    assert "1 labelled, 0 unlabelled, 1 missed" in out
    assert "found as an annotation: wide-try pkg/specs.py:2 in broad-except pkg/specs.py:6" in out
    assert "missed: wide-try pkg/specs.py:11" in out
    rows = _table(out)
    # the annotation counts for recall only: one finding (true), two width problems of which one is found
    assert rows["rule broad-except"] == ["1", "0", "100.0%", "1", "1", "100.0%"]
    assert rows["rule wide-try"] == ["0", "0", "n/a", "2", "1", "50.0%"]
    assert rows["all"] == ["1", "0", "100.0%", "3", "2", "66.7%"]


def _experiments_case(corpus: Path, tmp_path: Path, flag: object) -> None:
    """A case whose head adds a swallowing catch-all around a call of its own code that its own test
    (in `tests/test.py`, a module named on the command line) reaches, with a `.reviewbot.yml` naming
    that suite."""
    repo = Repo(tmp_path / "src-exp")
    config = f"suites:\n  unit:\n    command: python -m pytest -q -p no:cacheprovider {NO_PLUGINS} tests/test.py\n"
    test = "from pkg.compute import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
    repo.commit(
        {
            "pkg/__init__.py": "",
            "pkg/compute.py": "def fast(x):\n    return x * 2\n\n\ndef double(x):\n    return fast(x)\n",
            "tests/test.py": test,
            ".reviewbot.yml": config,
        },
        "base",
    )
    repo.branch("head")
    swallow = "def fast(x):\n    return x * 2\n\n\n"
    swallow += "def double(x):\n    try:\n        return fast(x)\n    except Exception:\n        return x + x\n"
    repo.commit({"pkg/compute.py": swallow}, "swallow")
    repo.git("branch", "-m", "main", "base")
    case = corpus / "exp"
    case.mkdir(parents=True)
    repo.git("bundle", "create", "-q", str(case / "case.bundle"), "base", "head")
    labels = {
        "source": "https://github.com/example/crafted",
        "commit": "0" * 40,
        "experiments": flag,
        "findings": [
            {
                "rule": "broad-except",
                "path": "pkg/compute.py",
                "line": 8,
                "severity": "P0",
                "label": True,
                "reason": "an AssertionError in the try body becomes the fallback's result",
            }
        ],
    }
    case.joinpath("labels.yml").write_text(yaml.safe_dump(labels))


def test_experiments_run_only_with_the_flag_and_for_cases_that_opt_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus"
    _experiments_case(corpus, tmp_path, True)
    _set_case(corpus, "static-only", None, tmp_path)
    # default: every case static, the finding capped at P3 (pattern evidence only; round 26: its try
    # guards one operation)
    assert bench_precision.main(["--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "case exp: static review" in out and "case static-only: static review" in out
    assert "evidence:" not in out
    assert _table(out)["severity P3"][:2] == ["2", "0"] and "severity P0" not in _table(out)
    # --experiments: the opted-in case runs its suite and the injection; the other stays static
    assert bench_precision.main(["--corpus", str(corpus), "--experiments"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("case exp:"))
    assert "review with experiments" in line and "suites " in line and "exception_injection " in line
    assert line.endswith("1 labelled, 0 unlabelled, 0 missed")
    assert "case static-only: static review" in out
    evidence = [l for l in out.splitlines() if l.startswith("  evidence:")]
    assert len(evidence) == 1
    assert evidence[0].startswith("  evidence: broad-except P0 pkg/compute.py:8: experiment: ")
    assert "raised `AssertionError` at pkg/compute.py:7" in evidence[0]
    assert "1 test(s) reached it (`tests/test.py::test_double`); 1 still passed" in evidence[0]
    rows = _table(out)
    assert rows["severity P0"][:3] == ["1", "0", "100.0%"]
    assert rows["severity P3"][:2] == ["1", "0"]


def test_experiments_flag_must_be_a_bool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    _experiments_case(corpus, tmp_path, "yes")
    assert bench_precision.main(["--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "bench_precision: exp/labels.yml: experiments must be true or false, not 'yes'"


def test_a_finding_takes_the_problem_on_its_own_first_line_before_a_nested_label() -> None:
    # round 22: an outer handler's range (926-958) holds a nested handler's label (937, P2 true); the
    # outer finding is matched to the problem on its own line, the nested finding to its label
    def label(line: int, problem: bool) -> bench_precision.Label:
        severity = None if problem else Severity.P2
        return bench_precision.Label("runtime-error-fallback", "a.py", line, severity, True, "r", problem)

    def finding(start: int) -> Finding:
        return Finding(
            "runtime-error-fallback", Severity.P2, "a.py", start, 958, "runtime-error-fallback.no-oom-reraise"
        )

    labels = [label(937, problem=False), label(926, problem=True)]
    used: set[int] = set()
    outer = bench_precision._label_for(finding(926), labels, used)
    assert outer == 1
    used.add(outer)
    assert bench_precision._label_for(finding(937), labels, used) == 0
