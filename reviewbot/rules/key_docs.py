"""`stale-key-doc` (P4-PROCESS) and `unused-key-param` (P3-STYLE).

Claims about the cache key are read from prose, sentence by sentence. Factors are named by the
configured vocabulary (phrase -> factor name) and by the factor names themselves, as written
(`device_capability`) and in words (`device capability`), of either revision; longer phrases win.
Only sentences that claim what the key contains count: the sentence names the key ("key",
`cache_key...`, "键") and says what goes in or stays out with a verb ("includes", "hashes", "covers",
"feeds", "depends on", "part of", "factors"...: in; "left out", "excludes", "ignores", "removes",
"drops", "without": out). A negation before an "in" verb ("does not include", "no longer hashes",
"nothing else feeds", "不再包含") makes it "out". Each factor a sentence names takes the sense of the
nearest such verb, so "the key now includes A and no longer includes B" claims A in and B out.

A claim is wrong when it says a factor is in the key that the key lacks, or out of the key that the
key has (the probe's factor names when the probe ran, else the string keys the first function root
builds), or when a sentence that lists two or more factors as in omits one the change added. Each
text (one docstring, one block of comments, the PR body) gives at most one finding listing every
wrong claim in it.

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
from collections.abc import Iterable

from reviewbot import pysource
from reviewbot.findings import Finding, Severity
from reviewbot.rules.common import FileContext

KEY_WORDS = re.compile(r"\bkeys?\b|\bcache_key\w*|键", re.IGNORECASE)
# verbs saying a factor goes into the key
IN_VERBS = (
    r"\binclud\w*|\bcontain\w*|\bcover\w*|\bhash(?:es|ed|ing)\b|\badd(?:s|ed|ing)?\b|\bfold\w*|\bfeed\w*"
    r"|\bfed\b|\bmix\w*|\bdepend\w*|\bbuilt from\b|\bderived from\b|\bmade (?:up )?of\b|\bpart of\b"
    r"|\bfactors?\b|\bkeyed (?:on|by)\b|\btrack\w*|\bcaptur\w*|\baccount\w* for\b|\bgo(?:es)? into\b"
    r"|\bchang(?:e|es|ed|ing)\b|\baffect\w*|包含|包括|纳入|加入|参与|取决于|影响"
)
# verbs saying a factor stays out of (or leaves) the key
OUT_VERBS = (
    r"\bleft out\b|\bleav(?:e|es|ing) out\b|\bexclud\w*|\bignor\w*|\bwithout\b|\bremov\w*|\bdrop\w*"
    r"|\bdelet\w*|\bomit\w*|\bskip\w*|\binstead of\b|\bnot\b|\bnever\b|n't\b|\bno longer\b|排除|忽略|移除|去掉|删除|不再|不"
)
NEGATION = r"(?:\bno longer\b|\bnot\b|n't\b|\bnever\b|\bnothing(?: else)?\b|\bno\b|\bneither\b|\bnor\b|不再|不|没有)"
# a negation, at most three words, then an "in" verb: one "out" cue ("does not include")
NEGATED_IN = re.compile(NEGATION + r"(?:\s*\w+){0,3}?\s*(?:" + IN_VERBS + ")", re.IGNORECASE)
IN_CUE = re.compile(IN_VERBS, re.IGNORECASE)
OUT_CUE = re.compile(OUT_VERBS, re.IGNORECASE)
SENTENCE_SPLIT = re.compile(r"(?<=[.!?。；;])\s+|\n\s*\n|\n\s*[-*]\s+")


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    """The phrase as a word of its own: not part of a longer name, a dotted name or a hyphenated
    compound (`per-type` does not name a factor `type`)."""
    return re.compile(r"(?<![\w.-])" + re.escape(phrase) + r"s?(?![\w-])", re.IGNORECASE)


def factor_phrases(vocabulary: dict[str, str], factors: Iterable[str]) -> dict[str, str]:
    """Phrase -> factor: each factor name as written and in words (underscores as spaces), but not
    one that is a key word itself (`KEY_WORDS`), then the configured vocabulary (which wins where
    they overlap)."""
    phrases: dict[str, str] = {}
    for factor in factors:
        phrases[factor] = factor
        words = " ".join(factor.replace("_", " ").replace("-", " ").split())
        if words and words != factor:
            phrases.setdefault(words, factor)
    # a factor spelled like the key itself ("key", "cache_key") names the subject of every sentence
    # about the key, never one of its factors
    phrases = {phrase: factor for phrase, factor in phrases.items() if not KEY_WORDS.fullmatch(phrase)}
    return {**phrases, **vocabulary}


def _cues(sentence: str) -> list[tuple[int, int, bool]]:
    """(start, end, says in) of every in/out cue in `sentence`; a negated "in" verb is one out cue."""
    cues: list[tuple[int, int, bool]] = []
    taken: list[tuple[int, int]] = []
    for match in NEGATED_IN.finditer(sentence):
        cues.append((match.start(), match.end(), False))
        taken.append(match.span())

    def free(span: tuple[int, int]) -> bool:
        return not any(a < span[1] and span[0] < b for a, b in taken)

    for pattern, says_in in ((OUT_CUE, False), (IN_CUE, True)):
        for match in pattern.finditer(sentence):
            if free(match.span()):
                cues.append((match.start(), match.end(), says_in))
                taken.append(match.span())
    return cues


def _nearest(cues: list[tuple[int, int, bool]], start: int, end: int) -> bool:
    def distance(cue: tuple[int, int, bool]) -> int:
        return cue[0] - end if cue[0] >= end else start - cue[1] if cue[1] <= start else 0

    return min(cues, key=lambda cue: (distance(cue), cue[0] > start))[2]


def find_stale_claims(
    text: str, vocabulary: dict[str, str], factors: list[str], gained: list[str], known: list[str] | None = None
) -> list[tuple[str, dict[str, str]]]:
    """(claim sentence, problem) for each wrong claim in `text`, once per problem; the problem is the
    message parameters `problem` (absent | included | omits), `phrase`, `factor` and `missing`.
    `known`: factor names of the other revision (a claim naming a factor the change removed is
    wrong too)."""
    if not factors:
        return []
    phrases = factor_phrases(vocabulary, [*factors, *(known or [])])
    patterns = [(p, _phrase_pattern(p), f) for p, f in sorted(phrases.items(), key=lambda kv: -len(kv[0]))]
    out: list[tuple[str, dict[str, str]]] = []
    seen: set[tuple[str, str, str]] = set()

    def add(sentence: str, problem: dict[str, str]) -> None:
        ident = (problem["problem"], problem["factor"], problem["missing"])
        if ident not in seen:
            seen.add(ident)
            out.append((sentence, problem))

    for raw in SENTENCE_SPLIT.split(text):
        sentence = " ".join(raw.split())
        if not sentence or not KEY_WORDS.search(sentence):
            continue
        cues = _cues(sentence)
        if not cues:
            continue
        claims: dict[str, tuple[str, bool]] = {}
        masked = sentence
        for phrase, pattern, factor in patterns:
            for match in pattern.finditer(masked):
                claims.setdefault(factor, (phrase, _nearest(cues, match.start(), match.end())))
            masked = pattern.sub(lambda m: " " * len(m.group()), masked)
        for factor, (phrase, says_in) in claims.items():
            if says_in and factor not in factors:
                add(sentence, {"problem": "absent", "phrase": phrase, "factor": factor, "missing": ""})
            elif not says_in and factor in factors:
                add(sentence, {"problem": "included", "phrase": phrase, "factor": factor, "missing": ""})
        listed = [f for f, (_, says_in) in claims.items() if says_in]
        missing = [g for g in gained if g not in claims]
        if len(listed) >= 2 and missing:
            add(sentence, {"problem": "omits", "phrase": "", "factor": "", "missing": ", ".join(missing)})
    return out


def _stale_finding(
    path: str,
    start: int,
    end: int,
    qualname: str,
    claims: list[tuple[str, dict[str, str]]],
    factors: list[str],
    where: str,
) -> Finding:
    """One finding for one text's wrong `claims`; `where`: pr | test | closure (the kind of text)."""
    sentences = list(dict.fromkeys(sentence for sentence, _ in claims))
    quoted = " / ".join(sentences)
    quoted = quoted if len(quoted) <= 300 else quoted[:297] + "..."
    return Finding(
        rule="stale-key-doc",
        severity=Severity.P4,
        path=path,
        line_start=start,
        line_end=end,
        message_id="stale-key-doc.claims",
        params={"where": where, "claims": [problem for _, problem in claims]},
        extra={"quoted": quoted, "actual": ", ".join(factors)},
        qualname=qualname,
        details=quoted,
    )


def _docstrings(tree: ast.Module) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    for node in pysource.nodes(tree):
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
            claims = find_stale_claims(text, ctx.config.vocabulary, ctx.factors, ctx.factors_gained, ctx.factors_known)
            if claims:
                findings.append(_stale_finding(ctx.path, start, end, ctx.qualname(start), claims, ctx.factors, where))
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
        used = {n.id for stmt in node.body for n in pysource.walk(stmt) if isinstance(n, ast.Name)}
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
    """At most one `stale-key-doc` finding for the PR body, listing every wrong claim in it."""
    claims = find_stale_claims(body, vocabulary, factors, gained, known)
    return [_stale_finding("PR description", 0, 0, "", claims, factors, "pr")] if claims else []
