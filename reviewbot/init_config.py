"""`reviewbot init`: propose a `.reviewbot.yml` for a repository, and check one against it.

Nothing of the repository runs: the Python files committed at a revision are parsed (AST only).

Key roots (`cache_key.roots`). A function or method *hashes* when its body uses `hashlib` (or
`.hexdigest()`/`.digest()`), calls a function of the repository that does, or calls a method named
like a hash (`hash`, `compute_hash`, `cache_key`, ...). Candidates, best first:

1. key builders: hash and build a cache path (`os.path.join`, `Path /`, `makedirs`/`mkdir` with a
   name or string containing "cache");
2. functions that hash and whose name says so (`cache`, `key`, `hash`, `digest`, `fingerprint`).

A method of a configuration class (a dataclass, a pydantic model, or a class named `*Config`,
`*Options`, `*Settings`) is proposed as its class, which also enables the ignored-field check. The
configuration classes a chosen root reads through a typed parameter or `self` attribute, or
references directly, are proposed too, even when a function root reaches them (a class root
also enables the ignored-field check). Another candidate reached from a listed one's closure is
left out (listed as covered). At most `MAX_ROOTS` roots; the rest are listed as comments. Files under test,
docs, example, benchmark and script directories are not inspected.

Suites: pytest `testpaths` (pyproject.toml, pytest.ini, setup.cfg, tox.ini) when configured, else the
directories holding `test_*.py` files under `tests/` or `test/`, then under a top-level package's
own `tests/` or `test/` (`pkg/tests/`), one suite per first-level subdirectory; with no test
directory, one suite per top-level directory holding test files beside its modules
(`pkg/manager_test.py`). A file named like a test that defines none (pytorch/data's
`_common_utils_for_test.py`) is no test file: a suite of only such files collects nothing. `gpus: 1`
when most of the suite's files use CUDA. The probe command is a commented template:
the repository has to provide a command printing its reference keys.

Every candidate carries its reason, written as a YAML comment above it.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import re
import shlex
import time
import tomllib
from collections import Counter
from pathlib import Path

import yaml

from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.closure import (
    SOURCE_DIRS,
    ModuleIndex,
    ModuleInfo,
    annotation_classes,
    attribute_types,
    compute_closure,
    lookup_definition,
    resolvable_roots,
    unwind_attributes,
)
from reviewbot.repo_config import CONFIG_FILE, ConfigError, parse_config

MAX_ROOTS = 6
# candidate scores: key builders, configuration classes (hashed by a candidate, or with their own
# hashing method), functions that hash and say so in their name
BUILDER, CONFIG_CLASS, NAMED_HASHER = 6, 5, 4
MAX_CONSIDERED = 10
MAX_CLOSURES = 40  # candidates whose closures are compared (best first)
MAX_SUITES = 8
TEST_DIRS = ("tests", "test")
SKIPPED_DIRS = frozenset(
    {
        "tests",
        "test",
        "testing",
        "docs",
        "doc",
        "examples",
        "example",
        "benchmarks",
        "benchmark",
        "scripts",
        "tools",
        "third_party",
        ".github",
    }
)
KEY_WORDS = ("cache", "key", "hash", "digest", "fingerprint")
# a member that hashes: `hash`, `compute_hash`, `hash_source`, `config_hash`, `cache_key`, `uuid`, ...
HASH_METHOD = re.compile(r"^(compute_)?(hash|digest|fingerprint|uuid|cache_key)(_\w+)?$|_hash$")
# an attribute read (not a call) that is a hash: `self.config.hash` (a property), or ends in `_hash`
HASH_PROPERTIES = frozenset({"hash", "compute_hash", "digest", "fingerprint", "uuid", "cache_key", "key_hash"})
CONFIG_NAME = re.compile(r"(Config|Options|Settings|Params)$")
CUDA_USE = re.compile(r"torch\.cuda|\.cuda\(|[\"']cuda[\"']|device=[\"']cuda|requires_cuda|@cuda")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A proposed value and why it was picked (rendered as a YAML comment)."""

    value: str
    reason: str
    score: int = 0


@dataclasses.dataclass(frozen=True)
class SuiteCandidate:
    name: str
    command: str
    gpus: int
    reason: str


@dataclasses.dataclass
class Proposal:
    """What `propose_config` found at `revision` (a commit sha)."""

    revision: str
    files_inspected: int
    roots: list[Candidate]
    considered: list[Candidate]
    probe_module: str
    suites: list[SuiteCandidate]
    seconds: float = 0.0

    def to_yaml(self) -> str:
        """The proposal as `.reviewbot.yml` text: valid configuration, reasons as comments."""
        out = [
            (
                f"# {CONFIG_FILE} proposed by `reviewbot init` at {self.revision[:12]} "
                f"({self.files_inspected} Python files inspected)."
            ),
            "# Each entry says why it was picked: keep what the compiled-artifact cache key really depends on.",
            "# `reviewbot init --check` verifies the file against the repository.",
        ]
        if self.roots:
            out += ["cache_key:", "  roots:"]
            for root in self.roots:
                out += [f"    # {_one_line(root.reason)}", f"    - {_scalar(root.value)}"]
        else:
            out += [
                "# cache_key: no function or method was found that hashes and builds a cache path or is named",
                "#   for a key or hash; list the key's roots by hand.",
            ]
        if self.considered:
            out.append("  # also considered, not listed:" if self.roots else "# considered:")
            prefix = "  #" if self.roots else "#"
            out += [f"{prefix}   {c.value}: {_one_line(c.reason)}" for c in self.considered]
        indent = "  " if self.roots else ""
        out += [
            f'{indent}# probe: a command printing {{"cases": {{NAME: {{"factors": {{...}}, "key": "..."}}}}}} for a',
            f"{indent}# few reference configurations confirms key changes; write it, then uncomment (a leading",
            f"{indent}# `python` is the reviewing interpreter):",
            f"{indent}# probe:",
            f"{indent}#   command: python -m {self.probe_module}",
            f"{indent}#   timeout_s: 120",
        ]
        if self.suites:
            out.append("suites:")
            for suite in self.suites:
                out += [
                    f"  # {_one_line(suite.reason)}",
                    f"  {_scalar(suite.name)}:",
                    f"    command: {_scalar(suite.command)}",
                    f"    gpus: {suite.gpus}",
                ]
        else:
            out.append("# suites: no test directory or pytest testpaths found")
        return "\n".join(out) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _scalar(value: str) -> str:
    """`value` as a YAML plain or quoted scalar."""
    return yaml.safe_dump(value, default_style=None, width=10_000).removesuffix("\n...\n").strip()


def _skipped(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (
        any(p in SKIPPED_DIRS for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name in ("conftest.py", "setup.py")
    )


def _module_name(path: str) -> str:
    """The dotted module of `path`, without a source directory (`src/`, `python/`) in front: the
    key-change closure resolves modules there too."""
    for prefix in SOURCE_DIRS:
        if prefix and path.startswith(prefix) and path.count("/") > 1:
            path = path.removeprefix(prefix)
            break
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _words(name: str) -> set[str]:
    return {w.lower() for w in re.split(r"_+|(?<=[a-z])(?=[A-Z])", name) if w}


def _is_config_class(node: ast.ClassDef) -> str | None:
    """Why `node` is a configuration class, or None."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if "dataclass" in ast.unparse(target):
            return "a dataclass"
    for base in node.bases:
        text = ast.unparse(base)
        if text.split(".")[-1] in ("BaseModel", "BaseSettings"):
            return f"a pydantic model ({text})"
    if CONFIG_NAME.search(node.name):
        return f"named like a configuration ({node.name})"
    return None


@dataclasses.dataclass
class _Def:
    """A module-level function or a method, with what its body shows."""

    qual: str
    module: ModuleInfo
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: ast.ClassDef | None
    hashlib_use: str = ""
    hash_calls: list[str] = dataclasses.field(default_factory=list)
    cache_path: str = ""

    @property
    def name(self) -> str:
        return self.node.name


def _defs(module: ModuleInfo) -> list[_Def]:
    out: list[_Def] = []
    for stmt in module.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(_Def(f"{module.name}.{stmt.name}", module, stmt, None))
        elif isinstance(stmt, ast.ClassDef):
            for sub in stmt.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
                    sub.name.startswith("__") and sub.name.endswith("__")
                ):
                    out.append(_Def(f"{module.name}.{stmt.name}.{sub.name}", module, sub, stmt))
    return out


def _read_body(d: _Def) -> None:
    """Fill `hashlib_use` and `cache_path` from the body of `d`."""
    mentions_cache = "cache" in d.name.lower()
    builds_path = ""
    for sub in ast.walk(d.node):
        if isinstance(sub, ast.Attribute):
            attrs, inner = unwind_attributes(sub)
            chain = ".".join([*(["?"] if not isinstance(inner, ast.Name) else [inner.id]), *reversed(attrs)])
            if chain.startswith("hashlib.") and not d.hashlib_use.startswith("hashlib."):
                d.hashlib_use = chain
            if sub.attr in ("hexdigest", "digest") and not d.hashlib_use:
                d.hashlib_use = f".{sub.attr}()"
        text = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else None
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            text = sub.value
        if text is not None and "cache" in text.lower():
            mentions_cache = True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and not d.hashlib_use.startswith("hashlib."):
            imported = d.module.imports.get(sub.func.id)  # `from hashlib import sha256`
            if imported is not None and imported[0] == "hashlib":
                d.hashlib_use = f"hashlib.{imported[1] or sub.func.id}"
        if isinstance(sub, ast.Call):
            func = ast.unparse(sub.func)
            if func.endswith(("path.join", "makedirs", ".mkdir")) and not builds_path:
                builds_path = func
        elif isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Div) and not builds_path:
            left = ast.unparse(sub.left).lower()
            if any(word in left for word in ("cache", "path", "dir", "root")):
                builds_path = f"{_short(ast.unparse(sub.left))} / ..."
    if builds_path and mentions_cache:
        d.cache_path = builds_path


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _link_hashers(index: ModuleIndex, defs: list[_Def]) -> None:
    """Mark defs that hash indirectly, to a fixed point: they call a repository function or a
    method of their own class (`self.key()`) that hashes, or call or read a hash-named member.
    `hash_calls` lists the hashing callees first, then the hash-named members."""
    members: dict[str, list[str]] = {}
    for d in defs:
        if not d.hashlib_use:
            called = {id(sub.func) for sub in ast.walk(d.node) if isinstance(sub, ast.Call)}
            members[d.qual] = [
                f".{sub.attr}"
                for sub in ast.walk(d.node)
                if isinstance(sub, ast.Attribute)
                and (
                    HASH_METHOD.search(sub.attr)
                    if id(sub) in called
                    else sub.attr in HASH_PROPERTIES or sub.attr.endswith("_hash")
                )
            ]
    hashing = {d.qual for d in defs if d.hashlib_use or members.get(d.qual)}
    callees = {d.qual: _callees(index, d) for d in defs if not d.hashlib_use}
    changed = True
    while changed:
        changed = False
        for d in defs:
            if d.qual not in hashing and any(callee in hashing for callee, _ in callees.get(d.qual, [])):
                hashing.add(d.qual)
                changed = True
    for d in defs:
        if not d.hashlib_use:
            d.hash_calls = [label for callee, label in callees[d.qual] if callee in hashing] + members[d.qual]


def _callees(index: ModuleIndex, d: _Def) -> list[tuple[str, str]]:
    """(qualified name, how it is written) of the repository functions `d` calls by name and the
    methods of its own class it calls through its first parameter."""
    params = [*d.node.args.posonlyargs, *d.node.args.args]
    self_name = params[0].arg if d.cls is not None and params else None
    out: list[tuple[str, str]] = []
    for sub in ast.walk(d.node):
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Name):
            target = lookup_definition(index, d.module, func.id)
            if target is not None:
                out.append((f"{target[0].name}.{target[1]}", func.id))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == self_name:
            assert d.cls is not None
            out.append((f"{d.module.name}.{d.cls.name}.{func.attr}", f"{self_name}.{func.attr}"))
    return out


def _hash_reason(d: _Def) -> str:
    if d.hashlib_use:
        return f"hashes with `{d.hashlib_use}`"
    return "hashes through " + ", ".join(f"`{c}`" for c in list(dict.fromkeys(d.hash_calls))[:3])


def _score(d: _Def) -> tuple[int, str]:
    hashes = bool(d.hashlib_use or d.hash_calls)
    if not hashes:
        return 0, ""
    named = [w for w in KEY_WORDS if w in _words(d.name)]
    if d.cache_path:
        return BUILDER, f"{_hash_reason(d)} and builds a cache path (`{d.cache_path}`)"
    if named:
        return NAMED_HASHER, f"{_hash_reason(d)}; its name says `{named[0]}`"
    return 0, ""


def _configs_read(index: ModuleIndex, d: _Def) -> list[tuple[str, str]]:
    """(class qualified name, how `d` reaches it) for the configuration classes `d` reads."""
    found: dict[str, str] = {}

    reader = f"{d.cls.name}.{d.name}" if d.cls is not None else d.name

    def note(mod: ModuleInfo, cls: ast.ClassDef, how: str, typed: bool = True) -> None:
        kind = _is_config_class(cls)
        # a plain dataclass counts when a key builder, or a function hashing with hashlib, reads it
        # through a typed parameter or attribute; a class named like a configuration always counts
        strong = kind is not None and not kind.startswith("a dataclass")
        if kind is not None and (strong or (typed and (d.cache_path or d.hashlib_use))):
            found.setdefault(f"{mod.name}.{cls.name}", f"{kind}, read by `{reader}` through {how}")

    args = d.node.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    used = {sub.id for sub in ast.walk(d.node) if isinstance(sub, ast.Name)}
    for param in params:
        if param.arg in used:
            for mod, cls in annotation_classes(index, d.module, param.annotation):
                note(mod, cls, f"its parameter `{param.arg}`")
    if d.cls is not None and params:
        self_name = params[0].arg
        attrs = attribute_types(index, d.module, d.cls)
        for sub in ast.walk(d.node):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == self_name:
                for mod, cls in attrs.get(sub.attr, []):
                    note(mod, cls, f"`{self_name}.{sub.attr}`")
    for name in sorted(used):
        target = lookup_definition(index, d.module, name)
        if target is not None and isinstance(target[0].defs.get(target[1]), ast.ClassDef):
            note(target[0], target[0].defs[target[1]], f"the name `{name}`", typed=False)
    return list(found.items())


def _propose_roots(
    git: GitRepo, rev: str, index: ModuleIndex, modules: list[ModuleInfo]
) -> tuple[list[Candidate], list[Candidate]]:
    defs = [d for mod in modules for d in _defs(mod)]
    for d in defs:
        _read_body(d)
    _link_hashers(index, defs)
    ranked: dict[str, Candidate] = {}
    for d in defs:
        score, reason = _score(d)
        if not score:
            continue
        if d.cls is not None and _is_config_class(d.cls) is not None and HASH_METHOD.search(d.name):
            qual = d.qual.rsplit(".", 1)[0]
            reason = f"configuration class ({_is_config_class(d.cls)}) whose `{d.name}` {reason}"
            score = CONFIG_CLASS
        else:
            qual = d.qual
        old = ranked.get(qual)
        if old is None or old.score < score:
            ranked[qual] = Candidate(qual, reason, score)
        for cls_qual, how in _configs_read(index, d):
            if cls_qual not in ranked or ranked[cls_qual].score < CONFIG_CLASS:
                ranked[cls_qual] = Candidate(cls_qual, f"configuration class: {how}", CONFIG_CLASS)
    # ties: the candidate more other functions hash through first (`Task.calculate_hash` called as
    # `.calculate_hash` by a key builder); a name several definitions share says nothing
    names = Counter(d.name for d in defs)
    fan_in = Counter(
        call.rsplit(".", 1)[-1] for d in defs for call in set(d.hash_calls) if names[call.rsplit(".", 1)[-1]] == 1
    )
    order = sorted(ranked.values(), key=lambda c: (-c.score, -fan_in[c.value.rsplit(".", 1)[-1]], c.value))
    closures = {c.value: set(compute_closure(git, rev, [c.value], index)) - {c.value} for c in order[:MAX_CLOSURES]}
    covered: dict[str, str] = {}
    for pos, cand in enumerate(order[:MAX_CLOSURES]):
        if cand.score == CONFIG_CLASS:  # listed even when reached: class roots enable the ignored-field check
            continue
        for other in order[:MAX_CLOSURES]:
            mutual = cand.value in closures[other.value] and other.value in closures[cand.value]
            if other is not cand and cand.value in closures[other.value] and not (mutual and order.index(other) > pos):
                covered[cand.value] = other.value
                break
    chosen: list[Candidate] = []
    considered: list[Candidate] = []
    for cand in order:
        if cand.value in covered:
            considered.append(Candidate(cand.value, f"in the closure of `{covered[cand.value]}` ({cand.reason})"))
        elif len(chosen) < MAX_ROOTS:
            chosen.append(cand)
        else:
            considered.append(cand)
    return chosen, considered[:MAX_CONSIDERED]


def _pytest_testpaths(git: GitRepo, rev: str) -> tuple[list[str], str]:
    """pytest `testpaths` and the file that sets them, or ([], "")."""
    text = git.read(rev, "pyproject.toml")
    if text is not None:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            data = {}
        paths = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("testpaths")
        if isinstance(paths, list) and paths:
            return [str(p) for p in paths], "pyproject.toml"
        if isinstance(paths, str) and paths.strip():
            return paths.split(), "pyproject.toml"
    for name, section in (("pytest.ini", "pytest"), ("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        text = git.read(rev, name)
        if text is None:
            continue
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        if parser.has_option(section, "testpaths"):
            return parser.get(section, "testpaths").split(), name
    return [], ""


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _suite(git: GitRepo, rev: str, name: str, target: str, files: list[str], why: str) -> SuiteCandidate:
    cuda = [f for f in files if CUDA_USE.search(git.read(rev, f) or "")]
    gpus = 1 if 2 * len(cuda) > len(files) else 0
    if not cuda:
        gpu_note = "none uses CUDA, so gpus: 0"
    elif gpus:
        gpu_note = f"{len(cuda)} of them use CUDA (e.g. {cuda[0]}), so gpus: 1"
    else:
        gpu_note = f"only {len(cuda)} of them use CUDA (e.g. {cuda[0]}), so gpus: 0: those must skip without a GPU"
    reason = f"{why}: {len(files)} test file(s); {gpu_note}"
    return SuiteCandidate(name, f"python -m pytest {target} -q", gpus, reason)


def _defines_tests(text: str | None) -> bool:
    """pytest would find a test in the file: a top-level `test*` function, or a class named `Test*`
    or deriving from a base whose name holds `Test` (`unittest.TestCase`, a project's `BaseTest`).
    A file that does not parse counts (pytest reports it); a binary file does not."""
    if text is None:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return True
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and (
            node.name.startswith("Test") or any("Test" in ast.unparse(base) for base in node.bases)
        ):
            return True
    return False


def _propose_suites(git: GitRepo, rev: str, files: list[str]) -> list[SuiteCandidate]:
    tests = [f for f in files if _is_test_file(f) and _defines_tests(git.read(rev, f))]
    testpaths, source = _pytest_testpaths(git, rev)
    suites: list[SuiteCandidate] = []
    if testpaths:
        for path in testpaths:
            inside = [f for f in tests if f == path or f.startswith(path.rstrip("/") + "/")]
            name = re.sub(r"[^\w.-]+", "_", path.strip("/")) or "tests"
            suites.append(_suite(git, rev, name, path, inside, f"`testpaths` in {source} lists {path}"))
        return suites[:MAX_SUITES]
    # a package's own test directory (`fastvideo/tests/`) after the repository's
    in_packages = sorted(
        {"/".join(f.split("/")[:2]) for f in tests if f.count("/") >= 2 and f.split("/")[1] in TEST_DIRS}
    )
    for top in (*TEST_DIRS, *in_packages):
        inside = [f for f in tests if f.startswith(f"{top}/")]
        if not inside:
            continue
        prefix = "" if top in TEST_DIRS else top.split("/")[0] + "_"
        groups: dict[str, list[str]] = {}
        for f in inside:
            parts = f[len(top) + 1 :].split("/")
            groups.setdefault(parts[0] if len(parts) > 1 else "", []).append(f)
        subdirs = sorted(g for g in groups if g)
        if len(subdirs) > MAX_SUITES - 1 or not subdirs:
            suites.append(_suite(git, rev, top.replace("/", "_"), top, inside, f"test files under {top}/"))
            continue
        for sub in subdirs:
            suites.append(_suite(git, rev, prefix + sub, f"{top}/{sub}", groups[sub], f"test files under {top}/{sub}/"))
        if "" in groups:
            ignores = " ".join(f"--ignore={top}/{sub}" for sub in subdirs)
            name = top.replace("/", "_") + "_root"
            suites.append(_suite(git, rev, name, f"{top} {ignores}", groups[""], f"test files directly in {top}/"))
    if suites:
        return suites
    # no test directory: test files beside the modules they test (pytorch/torchft's `torchft/manager_test.py`)
    beside: dict[str, list[str]] = {}
    for f in tests:
        parts = f.split("/")
        if len(parts) > 1 and not any(p in SKIPPED_DIRS for p in parts[:-1]):
            beside.setdefault(parts[0], []).append(f)
    return [
        _suite(git, rev, top, top, inside, f"test files beside the modules under {top}/ (no test directory)")
        for top, inside in sorted(beside.items())
    ][:MAX_SUITES]


def _probe_package(modules: list[ModuleInfo], roots: list[Candidate]) -> str:
    """Where the probe template proposes the probe module: the top-level package of the first
    key root, else the top-level package holding the most inspected modules, the first by name
    on a tie (a repository-root `__init__.py` names none)."""
    if roots:
        return roots[0].value.split(".")[0]
    packages = sorted(m.name for m in modules if m.path.endswith("/__init__.py") and "." not in m.name)
    if not packages:
        return "your_package"
    sizes = Counter(m.name.split(".")[0] for m in modules)
    return max(packages, key=sizes.__getitem__)  # max keeps the first of equals: name order


def propose_config(repo: Path | str, revision: str = "HEAD") -> Proposal:
    """Inspect the Python files committed at `revision` of the git repository at `repo` and
    propose its configuration (see the module docstring). Raises ValueError when `revision` names
    no commit."""
    started = time.monotonic()
    with GitRepo(repo) as git:
        if not git.has_revision(revision):
            raise ValueError(f"{revision!r} names no commit in {repo}")
        rev = git.rev_parse(revision)
        files = git.list_files(rev)
        index = ModuleIndex(git, rev)
        modules = [
            mod
            for path in files
            if path.endswith(".py") and not _skipped(path)
            for mod in [index.module(_module_name(path))]
            if mod is not None and mod.path == path
        ]
        roots, considered = _propose_roots(git, rev, index, modules)
        probe_module = f"{_probe_package(modules, roots)}.reviewbot_probe"
        suites = _propose_suites(git, rev, files)
    return Proposal(rev, len(modules), roots, considered, probe_module, suites, time.monotonic() - started)


def check_config(repo: Path | str, text: str, revision: str = "HEAD") -> list[str]:
    """Problems of configuration `text` against the repository at `revision`, one line each
    (empty when valid): invalid configuration, key roots that name nothing there, a probe
    `python -m MODULE` of the repository's own package that does not exist, suite command paths
    that do not exist."""
    try:
        config = parse_config(text)
    except ConfigError as exc:
        return [str(exc)]
    with GitRepo(repo) as git:
        if not git.has_revision(revision):
            raise ValueError(f"{revision!r} names no commit in {repo}")
        rev = git.rev_parse(revision)
        files = git.list_files(rev)
        resolved = set(resolvable_roots(git, rev, config.key_roots))
        index = ModuleIndex(git, rev)
        problems = [
            f"cache_key.roots: {root!r} names nothing at {rev[:12]} "
            "(expected pkg.module.function, pkg.module.Class or pkg.module.Class.method)"
            for root in config.key_roots
            if root not in resolved
        ]
        if config.probe is not None:
            words = shlex.split(config.probe.command)
            if len(words) >= 3 and words[0].startswith("python") and words[1] == "-m":
                module = words[2]
                own = index.module(module.split(".")[0]) is not None
                if own and index.module(module) is None:
                    problems.append(f"cache_key.probe.command: module {module!r} does not exist at {rev[:12]}")
    dirs = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    for suite in config.suites.values():
        for word in shlex.split(suite.command)[1:]:
            path = word.split("::")[0].rstrip("/")
            if word.startswith("-") or "{" in word or not ("/" in path or path.endswith(".py")) or path.startswith("/"):
                continue
            if path not in files and path not in dirs:
                problems.append(f"suites.{suite.name}.command: {path!r} does not exist at {rev[:12]}")
    return problems
