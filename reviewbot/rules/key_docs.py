"""`stale-key-doc` (P4-PROCESS) and `unused-key-param` (P3-STYLE).

Claims about the cache key are read from prose through the configured vocabulary (phrase ->
factor name). A sentence counts as a claim when it mentions the key ("key", "键"); a phrase in it
claims its factor is in the key, unless the sentence negates ("not", "never", "left out",
"excluded", "ignored", "without", "不", "排除"), which claims the factor is left out. A claim is stale
when it contradicts the actual factors (factor names themselves always count as phrases) (the probe's factor names when the probe ran, else the
string keys the first function root builds). A positive sentence that lists two or more factors
and omits one the change added is stale too.

Sources: docstrings and comments of the key closure, docstrings of test and helper files
(`tests/`, `test_*.py`, `conftest.py`), and the PR body (`check_pr_body`). Closure claims are
reported when new compared with the base even off the diff (the change may make an untouched
docstring wrong); they then go to the summary.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from reviewbot.findings import Finding, Severity
from reviewbot.rules.common import FileContext

KEY_WORDS = re.compile(r"\bkey\b|键", re.IGNORECASE)
NEGATIONS = re.compile(
    r"\bnot\b|n't\b|\bnever\b|\bleft out\b|\bexclude[sd]?\b|\bignore[sd]?\b|\bwithout\b|\bno longer\b|不|排除|忽略",
    re.IGNORECASE,
)
SENTENCE_SPLIT = re.compile(r"(?<=[.!?。；;])\s+|\n\s*\n|\n\s*[-*]\s+")


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(phrase) + r"s?(?![\w])", re.IGNORECASE)


def find_stale_claims(
    text: str, vocabulary: dict[str, str], factors: list[str], gained: list[str], known: list[str] | None = None
) -> list[tuple[str, dict[str, str]]]:
    """(claim sentence, problem) for each stale claim in `text`; the problem is the message
    parameters `problem` (absent | included | omits), `phrase`, `factor` and `missing`. `known`:
    factor names of either revision (a claim naming a factor the change removed is stale too)."""
    if not factors:
        return []
    out: list[tuple[str, str]] = []
    phrases = {**{f: f for f in [*factors, *(known or [])]}, **vocabulary}
    patterns = [(p, _phrase_pattern(p), f) for p, f in sorted(phrases.items(), key=lambda kv: -len(kv[0]))]
    for raw in SENTENCE_SPLIT.split(text):
        sentence = " ".join(raw.split())
        if not sentence or not KEY_WORDS.search(sentence):
            continue
        mentioned: dict[str, str] = {}
        remaining = sentence
        for phrase, pattern, factor in patterns:
            if pattern.search(remaining):
                mentioned.setdefault(factor, phrase)
                remaining = pattern.sub(" ", remaining)
        if not mentioned:
            continue
        negated = bool(NEGATIONS.search(sentence))
        for factor, phrase in mentioned.items():
            if not negated and factor not in factors:
                out.append((sentence, {"problem": "absent", "phrase": phrase, "factor": factor, "missing": ""}))
            elif negated and factor in factors:
                out.append((sentence, {"problem": "included", "phrase": phrase, "factor": factor, "missing": ""}))
        if not negated and len(mentioned) >= 2:
            missing = [g for g in gained if g not in mentioned]
            if missing:
                out.append((sentence, {"problem": "omits", "phrase": "", "factor": "", "missing": ", ".join(missing)}))
    return out


def _stale_finding(
    path: str, start: int, end: int, qualname: str, claim: str, problem: dict[str, str], factors: list[str], where: str
) -> Finding:
    """`where`: pr | test | closure (which kind of text holds the claim)."""
    quoted = claim if len(claim) <= 200 else claim[:197] + "..."
    return Finding(
        rule="stale-key-doc",
        severity=Severity.P4,
        path=path,
        line_start=start,
        line_end=end,
        message_id="stale-key-doc.claim",
        params={"where": where, **problem},
        extra={"quoted": quoted, "actual": ", ".join(factors)},
        qualname=qualname,
        details=quoted,
    )


def _docstrings(tree: ast.Module) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.append((first.lineno, first.end_lineno or first.lineno, first.value.value))
    return out


def _comments(source: str) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.start[0], tok.string.lstrip("#").strip()))
    except (tokenize.TokenError, SyntaxError):
        return out
    # join consecutive comment lines into one text block
    merged: list[tuple[int, int, str]] = []
    for start, end, text in out:
        if merged and merged[-1][1] == start - 1:
            s, _, t = merged[-1]
            merged[-1] = (s, end, f"{t} {text}")
        else:
            merged.append((start, end, text))
    return merged


def is_test_or_helper(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or "/tests/" in path or name.startswith("test_") or name == "conftest.py"


def check_file(ctx: FileContext) -> list[Finding]:
    findings: list[Finding] = []
    spans = [(item.line, item.end_line, name) for name, item in ctx.closure.items() if item.path == ctx.path]
    test_file = is_test_or_helper(ctx.path)
    if spans or test_file:
        texts = _docstrings(ctx.tree) + (_comments(ctx.source) if spans else [])
        for start, end, text in texts:
            in_closure = any(s <= start <= e for s, e, _ in spans)
            module_doc = start == 1 or (ctx.tree.body and ctx.tree.body[0].lineno == start)
            if not (in_closure or test_file or (spans and module_doc)):
                continue
            where = "test" if test_file else "closure"
            for claim, problem in find_stale_claims(
                text, ctx.config.vocabulary, ctx.factors, ctx.factors_gained, ctx.factors_known
            ):
                findings.append(
                    _stale_finding(ctx.path, start, end, ctx.qualname(start), claim, problem, ctx.factors, where)
                )
    findings.extend(_unused_params(ctx))
    return findings


def _unused_params(ctx: FileContext) -> list[Finding]:
    wanted = {
        item.line: name for name, item in ctx.closure.items() if item.path == ctx.path and item.kind == "function"
    }
    findings: list[Finding] = []
    for node in ctx.tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        qual = wanted.get(start)
        if qual is None:
            continue
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        params += [a for a in (args.vararg, args.kwarg) if a is not None]
        used = {n.id for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        for param in params:
            name = param.arg
            if name in ("self", "cls") or name.startswith("_") or name in used:
                continue
            findings.append(
                Finding(
                    rule="unused-key-param",
                    severity=Severity.P3,
                    path=ctx.path,
                    line_start=node.lineno,
                    line_end=node.end_lineno or node.lineno,
                    message_id="unused-key-param.unused",
                    params={"name": name, "function": qual},
                    qualname=qual,
                )
            )
    return findings


def check_pr_body(
    body: str, vocabulary: dict[str, str], factors: list[str], gained: list[str], known: list[str] | None = None
) -> list[Finding]:
    return [
        _stale_finding("PR description", 0, 0, "", claim, problem, factors, "pr")
        for claim, problem in find_stale_claims(body, vocabulary, factors, gained, known)
    ]
