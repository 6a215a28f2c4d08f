"""The precision benchmark's round-16 classes, next to their near misses, on a real git repo reviewed
statically (`--suites none`), the base revision holding the code the change replaced.

A catch-all whose fallback is what the base revision did gives nothing
(`reviewbot.rules.previous_behaviour`): an import probe's flag whose off branch runs the base's
calls (xtuner's `FlattenedTensorBucket` probe), the base's code kept as the handler (xformers'
address exchange). Near misses: an off branch that calls something new, a flag also passed on, one
handler statement changed. A new step skipped with a log call stays the swallow (xtuner's NUMA
binding has that shape, and so do a compile step and a save): tried this round and left out, with
the guards it had (a try running the base's statement, a silent handler, a try raising on purpose,
a result lost to the fall-through), each still reported here.

A handler that reports and takes a route its function takes outside every handler gives nothing
(`reviewbot.rules.own_route`: flash-attention's system ptxas falling back to the embedded one);
near misses: another argument in the handler's route, and a bare `return` the function also takes
elsewhere (giving up is no route that does the work).

The same call under another name (`version("pkg-nightly")` after `version("pkg")`, torchrl) now
gives nothing for the catch-all too; near miss: a device changed. Alternatives tried in turn,
unrolled, whose exhaustion raises (torchrl's pad id: tokenizer, then model config, then
`ValueError`) give nothing; near miss: a function that ends in a `return` (ms-swift's vLLM
overrides).

A reported failure (`return -1, str(e)`) whose caller tests the status right after and reads the
error on neither the branch the status takes nor after it drops the error: the P2 swallow (xtuner's
search plugin); near miss: a caller that shows the error. And a loop that writes into a map the try
did not make is no "one operation" a comment can excuse (diffusers' package map): the P2 swallow;
near miss: a loop that only counts.

A request boundary that logs the traceback and answers with an HTTP error status (positional, `503`)
in each branch of an `if` ends its unit and says it failed: nothing (TorchServe's predict handler);
near miss: one branch answering "OK" with a guessed result."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

TRAINER_BASE = """
import logging

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, rank, cache):
        self.rank = rank
        self.cache = cache

    def warm(self):
        self.cache.load(self.rank)
"""

TRAINER = """
import logging

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, rank, cache):
        self.rank = rank
        self.cache = cache
        self.bind_numa()

    def warm(self):
        try:
            self.cache.load(self.rank)
            self.cache.pin(self.rank)
        except Exception:
            logger.info("rank %d: cache warm-up failed", self.rank)

    def bind_numa(self):
        try:
            import numa

            nodes = numa.info.get_max_node() + 1
            if nodes < 2:
                return
            numa.schedule.run_on_nodes(self.rank % nodes)
        except Exception:
            logger.info("rank %d: NUMA affinity not set", self.rank)
            return
        else:
            logger.info("rank %d: NUMA affinity set", self.rank)

    def bind_quietly(self):
        try:
            import numa

            numa.schedule.run_on_nodes(self.rank)
        except Exception:
            pass

    def check_health(self, query):
        try:
            output = query(self.rank)
            parse_health(output)
        except Exception as e:
            logger.info("health query failed: %s", e)
        return

    def group_gemm(self, tokens, strategy):
        try:
            return strategy.execute(tokens, self.rank)
        except Exception as e:
            logger.info("group GEMM failed: %s", e)


def parse_health(text):
    if "OK" not in text:
        raise RuntimeError("the card is not healthy")
"""

WORKER_BASE = """
from serial import serialize


def send(state, post):
    payload = serialize(state)
    post(payload)
"""

WORKER = """
from serial import serialize


def send(state, post):
    try:
        from serial import Bucket

        use_bucket = True
    except Exception:
        use_bucket = False
    if use_bucket:
        payload = serialize(Bucket(state).flatten())
    else:
        payload = serialize(state)
    post(payload)


def send_compressed(state, post, compress):
    try:
        from serial import Bucket

        use_bucket = True
    except Exception:
        use_bucket = False
    if use_bucket:
        payload = serialize(Bucket(state).flatten())
    else:
        payload = serialize(compress(state))
    post(payload)


def send_told(state, post):
    try:
        from serial import Bucket

        use_bucket = True
    except Exception:
        use_bucket = False
    if not use_bucket:
        payload = serialize(state)
    else:
        payload = serialize(Bucket(state).flatten())
    post(payload, bucket=use_bucket)
"""

EXCHANGE_BASE = """
def exchange(group, mine, gather):
    everyone = [None] * group.size
    gather(everyone, mine, group=group)
    return everyone
"""

EXCHANGE = """
def exchange(group, mine, gather):
    try:
        store = group.store()
        store.set(f"addr_{group.rank}", mine)
        everyone = [store.get(f"addr_{i}") for i in range(group.size)]
    except Exception:
        everyone = [None] * group.size
        gather(everyone, mine, group=group)
    return everyone


def exchange_changed(group, mine, gather):
    try:
        store = group.store()
        store.set(f"addr_{group.rank}", mine)
        everyone = [store.get(f"addr_{i}") for i in range(group.size)]
    except Exception:
        everyone = [None] * group.size
        gather(everyone, mine, group=None)
    return everyone
"""

PTXAS = """
_original = None


def _log(msg):
    print(msg)


def load(module, find_ptx, compile_ptx, install):
    ptx = find_ptx(module)
    if not ptx:
        _log("no PTX file: the bundled assembler builds it")
        return _original(module)
    try:
        cubin = compile_ptx(ptx)
    except Exception as e:
        _log(f"the system assembler failed ({e}): the bundled one builds it")
        return _original(module)
    return install(cubin)


def load_slow(module, find_ptx, compile_ptx, install):
    ptx = find_ptx(module)
    if not ptx:
        _log("no PTX file: the bundled assembler builds it")
        return _original(module)
    try:
        cubin = compile_ptx(ptx)
    except Exception as e:
        _log(f"the system assembler failed ({e}): the bundled one builds it")
        return _original(module, optimise=False)
    return install(cubin)


def load_state(model, path, exists, read):
    if not exists(path):
        _log("no state to load")
        return
    try:
        state = read(path)
    except Exception as e:
        _log(f"failed to read the state ({e})")
        return
    model.state = state
"""

LOOKUPS = """
from importlib.metadata import version as dist_version


def package_version():
    try:
        return dist_version("pkg")
    except Exception:
        return dist_version("pkg-nightly")


def load_model(load):
    try:
        return load("model.bin", device="cuda")
    except Exception:
        return load("model.bin", device="cpu")


def pad_id(model, path, load_tokenizer):
    try:
        tokenizer = load_tokenizer(path)
    except Exception:
        tokenizer = None
    if tokenizer is not None:
        if tokenizer.pad_id is not None:
            return tokenizer.pad_id
    if model.config.pad_id is not None:
        return model.config.pad_id
    raise ValueError("no pad id found: pass one")


def overrides(config, path, load_config):
    try:
        disk = load_config(path)
    except Exception:
        disk = None
    changed = {}
    if disk is not None:
        changed = {key: value for key, value in config.items() if disk.get(key) != value}
    return changed
"""

SEARCH = """
import requests


def search(term):
    try:
        response = requests.post("https://example.invalid/search", params={"q": term}, timeout=5)
    except Exception as e:
        return -1, str(e)
    return response.status_code, response.json()


def answer(term):
    status, response = search(term)
    if status != 200:
        text = "None"
    else:
        text = str(response)
    return text


def lookup(term):
    try:
        response = requests.get("https://example.invalid/lookup", params={"q": term}, timeout=5)
    except Exception as e:
        return -1, str(e)
    return response.status_code, response.json()


def shown(term):
    status, response = lookup(term)
    if status != 200:
        text = f"lookup failed: {response}"
    else:
        text = str(response)
    return text
"""

PACKAGES = """
_package_map = None


def package_map(distributions):
    global _package_map
    if _package_map is None:
        _package_map = {}
        try:
            # Fallback for old Python versions
            for dist in distributions():
                for name in dist.top_level():
                    _package_map.setdefault(name, []).append(dist.name)
        except Exception:
            pass
    return _package_map


def count(distributions):
    total = 0
    try:
        # Fallback for old Python versions
        for _ in distributions():
            total += 1
    except Exception:
        total = 0
    return total
"""


SERVICE = """
import logging

logger = logging.getLogger(__name__)


def predict(entry_point, batch, ids, respond):
    try:
        result = entry_point(batch)
    except Exception as ex:
        if "CUDA" in str(ex):
            logger.error("device memory exhausted", exc_info=True)
            return respond(None, ids, "no memory left", 507)
        else:
            logger.warning("the model raised", exc_info=True)
            return respond(None, ids, "the model failed", 503)
    return respond(result, ids, "OK", 200)


def predict_or_guess(entry_point, batch, ids, respond, guess):
    try:
        result = entry_point(batch)
    except Exception as ex:
        if "CUDA" in str(ex):
            logger.error("device memory exhausted", exc_info=True)
            return respond(None, ids, "no memory left", 507)
        else:
            logger.warning("the model raised", exc_info=True)
            return respond(guess(batch), ids, "OK", 200)
    return respond(result, ids, "OK", 200)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round16") / "r",
        {
            "pkg/__init__.py": "",
            "pkg/trainer.py": TRAINER_BASE,
            "pkg/worker.py": WORKER_BASE,
            "pkg/exchange.py": EXCHANGE_BASE,
        },
        {
            "pkg/trainer.py": TRAINER,
            "pkg/worker.py": WORKER,
            "pkg/exchange.py": EXCHANGE,
            "pkg/ptxas.py": PTXAS,
            "pkg/lookups.py": LOOKUPS,
            "pkg/search.py": SEARCH,
            "pkg/packages.py": PACKAGES,
            "pkg/service.py": SERVICE,
        },
    )


def _swallow(review: list[Finding], path: str, qualname: str, one_operation: bool = True) -> Finding:
    """The plain swallow: round 26's P3 over a try that guards one operation, else the P2 (or the
    documented P2)."""
    found = findings_by_rule(review, path, qualname)["broad-except"]
    if one_operation:
        assert (found.message_id, found.severity) == ("broad-except.swallows-one-operation", Severity.P3), qualname
    else:
        assert found.severity is Severity.P2 and found.message_id in (
            "broad-except.swallows",
            "broad-except.documented",
        )
    return found


@pytest.mark.parametrize(
    ("qualname", "one_operation"),
    [
        ("Trainer.bind_numa", False),
        ("Trainer.warm", False),
        ("Trainer.bind_quietly", False),
        ("Trainer.check_health", False),
        ("Trainer.group_gemm", True),
    ],
)
def test_a_new_step_skipped_stays_the_swallow(review: list[Finding], qualname: str, one_operation: bool) -> None:
    _swallow(review, "pkg/trainer.py", qualname, one_operation)


def test_a_flag_whose_off_branch_runs_the_base_calls_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/worker.py", "send") == {}


@pytest.mark.parametrize("qualname", ["send_compressed", "send_told"])
def test_near_misses_an_off_branch_calling_something_new_or_the_flag_passed_on(
    review: list[Finding], qualname: str
) -> None:
    # round 25: the same swallow, worded by the branch its flag picks (`route_decision`)
    found = findings_by_rule(review, "pkg/worker.py", qualname)["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.decides-route", Severity.P2)


def test_the_base_code_kept_as_the_handler_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/exchange.py", "exchange") == {}
    _swallow(review, "pkg/exchange.py", "exchange_changed", one_operation=False)


def test_a_route_the_function_takes_outside_handlers_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/ptxas.py", "load") == {}
    _swallow(review, "pkg/ptxas.py", "load_slow")
    _swallow(review, "pkg/ptxas.py", "load_state")


def test_the_same_call_under_another_name_gives_nothing_for_the_catch_all(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/lookups.py", "package_version") == {}
    _swallow(review, "pkg/lookups.py", "load_model")


def test_alternatives_unrolled_whose_exhaustion_raises_give_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/lookups.py", "pad_id") == {}
    _swallow(review, "pkg/lookups.py", "overrides")


def test_a_reported_failure_the_caller_drops_on_its_failure_branch_is_the_swallow(review: list[Finding]) -> None:
    _swallow(review, "pkg/search.py", "search")
    assert findings_by_rule(review, "pkg/search.py", "lookup") == {}


def test_a_loop_filling_a_map_the_try_did_not_make_is_no_guarded_probe(review: list[Finding]) -> None:
    _swallow(review, "pkg/packages.py", "package_map")
    assert findings_by_rule(review, "pkg/packages.py", "count") == {}


def test_a_request_boundary_answering_an_http_error_in_each_branch_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/service.py", "predict") == {}
    _swallow(review, "pkg/service.py", "predict_or_guess")
