"""key-ignores-field on a fake project whose config classes hash themselves in the ways real code
does: pydantic-style `model_dump` (a plain class, no pydantic), a module helper over
`dataclasses.fields` with a metadata filter (magi_compiler's shape), `vars(self)`, `repr(self)` of a
dataclass (pytorch/helion's `LooseAutotuneCacheKey.stable_hash`) and of a class with its own
`__repr__`, an explicit field list, and a key function that walks the whole object."""

from __future__ import annotations

import pytest
from engine_gitrepos import Repo, sub

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity
from reviewbot.keychange import detect_key_change
from reviewbot.repo_config import load_config

CONFIGS = """
import dataclasses
import hashlib
import json


def _sha(payload):
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _no_hash(default):
    return dataclasses.field(default=default, metadata={"hash": False})


def _hashed_fields(obj):
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.metadata.get("hash", True)}


class PydanticLike:
    mode: str = "jit"

    def __init__(self, **values):
        for name in type(self).__annotations__:
            setattr(self, name, values.get(name, getattr(type(self), name)))

    def model_dump(self, exclude=None):
        return {n: getattr(self, n) for n in type(self).__annotations__ if n not in (exclude or ())}

    def compute_hash(self):
        return _sha(self.model_dump(exclude={"log_level"}))


@dataclasses.dataclass
class HelperHashed:
    level: int = 1
    cache_dir: str = _no_hash("/tmp")

    @property
    def hash(self):
        return _sha(_hashed_fields(self))


@dataclasses.dataclass
class VarsHashed:
    width: int = 1

    def digest(self):
        return _sha(json.dumps(vars(self), sort_keys=True))


@dataclasses.dataclass
class ReprHashed:
    depth: int = 1

    def key(self):
        return _sha(repr(self))


_state = vars  # an alias the static reading does not follow


@dataclasses.dataclass(repr=False)
class CustomRepr:
    size: int = 1

    def __repr__(self):
        return "CustomRepr" + json.dumps(_state(self), sort_keys=True)

    def key(self):
        return _sha(repr(self))


@dataclasses.dataclass
class ReprAddsHidden:
    rank: int = 1

    def __repr__(self):
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
        trials = getattr(self, "trials", 1)
        return f"ReprAddsHidden({shown}, trials={trials})" if trials != 1 else f"ReprAddsHidden({shown})"

    def stable_hash(self):
        return _sha(repr(self))


@dataclasses.dataclass
class Explicit:
    tile: int = 1

    def hash(self):
        return _sha([self.tile])


@dataclasses.dataclass
class Walked:
    warps: int = 4

    def hash(self):
        return _sha([self.warps])
"""

KEY = """
import dataclasses
import json

from pkg.configs import (
    CustomRepr,
    Explicit,
    HelperHashed,
    PydanticLike,
    ReprAddsHidden,
    ReprHashed,
    VarsHashed,
    Walked,
    _sha,
)


def cache_key_factors(p, h, v, r, c, a, e, w: Walked):
    return {
        "pydantic": p.compute_hash(),
        "helper": h.hash,
        "vars": v.digest(),
        "repr": r.key(),
        "custom_repr": c.key(),
        "repr_adds": a.stable_hash(),
        "explicit": e.hash(),
        "walked": _sha(dataclasses.asdict(w)),
    }


if __name__ == "__main__":
    factors = cache_key_factors(
        PydanticLike(), HelperHashed(), VarsHashed(), ReprHashed(), CustomRepr(), ReprAddsHidden(), Explicit(), Walked()
    )
    print(json.dumps({"cases": {"default": {"factors": factors, "key": _sha(factors)}}}))
"""

CLASSES = (
    "PydanticLike",
    "HelperHashed",
    "VarsHashed",
    "ReprHashed",
    "CustomRepr",
    "ReprAddsHidden",
    "Explicit",
    "Walked",
)
REVIEWBOT_YML = "cache_key:\n  roots:\n    - pkg.key.cache_key_factors\n" + "".join(
    f"    - pkg.configs.{name}\n" for name in CLASSES
)
REVIEWBOT_YML += "  probe:\n    command: python -m pkg.key\n    timeout_s: 60\n"

# branch -> (field line added after `anchor`, anchor)
BRANCHES = {
    "pyd-field": ("    fuse: bool = True\n", '    mode: str = "jit"\n'),
    "pyd-excluded": ('    log_level: str = ""\n', '    mode: str = "jit"\n'),
    "helper-field": ("    unroll: int = 2\n", "    level: int = 1\n"),
    "helper-nohash": ("    verbose: bool = _no_hash(False)\n", "    level: int = 1\n"),
    "helper-both": ("    unroll: int = 2\n    verbose: bool = _no_hash(False)\n", "    level: int = 1\n"),
    "vars-field": ("    height: int = 1\n", "    width: int = 1\n"),
    "repr-field": ("    stride: int = 1\n", "    depth: int = 1\n"),
    "repr-hidden": ('    secret: str = dataclasses.field(default="x", repr=False)\n', "    depth: int = 1\n"),
    "custom-repr-field": ("    stride: int = 1\n", "    size: int = 1\n"),
    "repr-adds-hidden": ("    trials: int = dataclasses.field(default=1, repr=False)\n", "    rank: int = 1\n"),
    "explicit-field": ("    fused: bool = False\n", "    tile: int = 1\n"),
    "walked-field": ("    stages: int = 2\n", "    warps: int = 4\n"),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("fields") / "r")
    repo.commit(
        {"pkg/__init__.py": "", "pkg/configs.py": CONFIGS, "pkg/key.py": KEY, ".reviewbot.yml": REVIEWBOT_YML},
        "initial",
    )
    for branch, (line, anchor) in BRANCHES.items():
        repo.branch(branch, "main")
        repo.commit({"pkg/configs.py": sub(CONFIGS, anchor, anchor + line)}, branch)
    repo.checkout("main")
    return repo


def _static(repo: Repo, branch: str):
    change = detect_key_change(repo.path, "main", branch, load_config(repo.path, branch), probe=False)
    (field,) = change.new_fields
    return field


def test_a_key_change_from_one_new_field_does_not_cover_another(repo: Repo) -> None:
    # `unroll` moves the key; `verbose` is left out by its metadata: the probe's change is not its
    review = run_review(repo.path, "main", "helper-both")
    assert review.key_change is not None and review.key_change.confirmed
    fields = {f.field: f for f in review.key_change.new_fields}
    assert not fields["unroll"].ignored and fields["verbose"].ignored and fields["verbose"].excluded
    (finding,) = [f for f in review.findings if f.rule == "key-ignores-field"]
    assert (finding.params["field"], finding.severity) == ("verbose", Severity.P4)


@pytest.mark.parametrize(
    ("branch", "how"),
    [
        ("pyd-field", "`compute_hash` hashes the whole object (`model_dump`)"),
        ("helper-field", "`hash` hashes the whole object (`fields`)"),
        ("vars-field", "`digest` hashes the whole object (`vars`)"),
        ("repr-field", "`key` hashes the whole object (`repr`)"),
        ("walked-field", "the key function `cache_key_factors` hashes the whole `Walked`"),
    ],
)
def test_whole_object_hashing_covers_a_new_field(repo: Repo, branch: str, how: str) -> None:
    field = _static(repo, branch)
    assert not field.ignored and not field.excluded
    assert field.evidence.startswith(how)
    review = run_review(repo.path, "main", branch)
    assert not [f for f in review.findings if f.rule == "key-ignores-field"]
    assert review.key_change is not None and review.key_change.confirmed  # the probe sees the field


@pytest.mark.parametrize(
    ("branch", "why"),
    [
        ("pyd-excluded", "excludes `log_level` by name"),
        ("helper-nohash", "skips fields by their metadata"),
        ("repr-hidden", "hashes the dataclass's repr, which `secret` is declared out of"),
    ],
)
def test_a_field_left_out_on_purpose_is_a_p4_reminder(repo: Repo, branch: str, why: str) -> None:
    field = _static(repo, branch)
    assert field.ignored and field.excluded and why in field.evidence
    review = run_review(repo.path, "main", branch)
    (finding,) = [f for f in review.findings if f.rule == "key-ignores-field"]
    assert (finding.severity, finding.message_id) == (Severity.P4, "key-ignores-field.excluded")
    assert not review.blocking


def test_explicit_field_list_without_the_field_is_p0_when_the_probe_keeps_every_key(repo: Repo) -> None:
    field = _static(repo, "explicit-field")
    assert field.ignored and not field.excluded
    review = run_review(repo.path, "main", "explicit-field")
    (finding,) = [f for f in review.findings if f.rule == "key-ignores-field"]
    assert finding.severity is Severity.P0 and finding.evidence.kind is EvidenceKind.PROBE
    assert "`fused`" in finding.message and finding.in_diff
    static = run_review(repo.path, "main", "explicit-field", suites="none")
    (finding,) = [f for f in static.findings if f.rule == "key-ignores-field"]
    assert finding.severity is Severity.P2 and not finding.evidence.confirmed


def test_a_field_the_probe_shows_changing_the_key_is_never_ignored(repo: Repo) -> None:
    # `key()` hashes repr(self) with a hand-written __repr__: the static reading finds no field
    # named, the probe sees the key move
    assert _static(repo, "custom-repr-field").ignored
    review = run_review(repo.path, "main", "custom-repr-field")
    assert review.key_change is not None
    (field,) = review.key_change.new_fields
    assert not field.ignored and field.probe == "changed"
    assert field.evidence.startswith("the probe saw the key change (custom_repr)")
    assert not [f for f in review.findings if f.rule == "key-ignores-field"]


def test_a_hand_written_repr_the_hash_reads_is_read_too(repo: Repo) -> None:
    # pytorch/helion's best_of_k: declared repr=False, added by the class's own __repr__ when not 1
    field = _static(repo, "repr-adds-hidden")
    assert not field.ignored and not field.excluded, field.evidence
