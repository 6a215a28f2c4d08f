"""The precision benchmark's round-13 rules, next to their near misses, on a real git repo reviewed
statically (`--suites none`):

- a deferred re-raise (`reviewbot.rules.error_reach`): the handler keeps the error in a name that is
  raised after a barrier, under `if error is not None:`: nothing; the near misses only log the kept
  error, raise it under a condition that tests something else, or return before the raise (still
  the P2 swallow);
- a retry whose exhaustion fails: a bounded `while` loop with a success flag, the handler logging
  the error and cleaning up, an exit with a failing status when the flag is never set: nothing for
  `except RuntimeError`; the near misses loop unbounded, only log at exhaustion, or do not name the
  error (still `no-oom-reraise`);
- the same call under another name: `except RuntimeError` whose handler loads
  `f"{prefix}.embedding"` where the try loaded `f"{prefix}.embeddings"` with the same loader:
  nothing; the near misses move to another device, by a constant or a keyword, or hand the call
  another value (still `no-oom-reraise`);
- the callee's own signal: `except RuntimeError` around a lookup function of the file that raises
  `RuntimeError` itself and reads nothing imported: nothing; the near misses' functions call torch
  or another function of the file (still `no-oom-reraise`);
- a reported placeholder entry: the handler logs the error and writes a constant into the entry the
  try writes (`metadata["hash"] = "unknown"`): nothing, like `hash = "unknown"`; the near miss writes
  it silently (still the P2 swallow);
- a reported fallback that replaces the caller's argument: the try converts the parameter `schema`
  in place and the handler logs and sets it to a constant the function then uses: P2
  `broad-except.replaces-argument`; the near misses switch an option the try does not bind, or set
  a local name (nothing: the reported fallback).

They are the classes of llm-foundry's data preparation, fairscale's MNIST download and `auto_shard`
lookup, text-generation-inference's Mamba weight names and grammar fallback, and Olive's model-hash
metadata: round 13's held-out set, now tuning material of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

PREP = """
import logging

import dist

log = logging.getLogger(__name__)


def prepare(name, signal_path):
    error = None
    dataset = None
    try:
        dataset = dist.load(name)
        dataset = dataset.tokenize()
    except Exception as e:
        error = e
    if dist.local_rank() == 0:
        with open(signal_path, "wb") as f:
            f.write(b"done")
    dist.barrier()
    if error is not None:
        log.error("data preparation failed")
        raise error
    return dataset


def prepare_logged(name):
    error = None
    dataset = None
    try:
        dataset = dist.load(name)
        dataset = dataset.tokenize()
    except Exception as e:
        error = e
    dist.barrier()
    if error is not None:
        log.error("data preparation failed: %s", error)
    return dataset


def prepare_rank_zero(name):
    error = None
    dataset = None
    try:
        dataset = dist.load(name)
        dataset = dataset.tokenize()
    except Exception as e:
        error = e
    dist.barrier()
    if error is not None and dist.local_rank() == 0:
        raise error
    return dataset


def prepare_returning(name):
    error = None
    dataset = None
    try:
        dataset = dist.load(name)
        dataset = dataset.tokenize()
    except Exception as e:
        error = e
    if dist.world_size() == 1:
        return dataset
    if error is not None:
        raise error
    return dataset
"""

DOWNLOAD = """
import logging
import shutil

from vision import Digits


def fetch(root):
    done, tries = False, 0
    while not done and tries < 5:
        try:
            Digits(download=True, root=root)
            done = True
        except RuntimeError as e:
            logging.warning(e)
            shutil.rmtree(root)
        tries += 1
    if done is False:
        logging.error("could not download the digits")
        exit(-1)


def fetch_forever(root):
    done = False
    while not done:
        try:
            Digits(download=True, root=root)
            done = True
        except RuntimeError as e:
            logging.warning(e)
            shutil.rmtree(root)
    if done is False:
        exit(-1)


def fetch_or_go_on(root):
    done, tries = False, 0
    while not done and tries < 5:
        try:
            Digits(download=True, root=root)
            done = True
        except RuntimeError as e:
            logging.warning(e)
            shutil.rmtree(root)
        tries += 1
    if done is False:
        logging.error("could not download the digits")


def fetch_quietly(root):
    done, tries = False, 0
    while not done and tries < 5:
        try:
            Digits(download=True, root=root)
            done = True
        except RuntimeError:
            logging.warning("download failed")
            shutil.rmtree(root)
        tries += 1
    if done is False:
        exit(-1)
"""

WEIGHTS = """
from layers import Embedding


class Backbone:
    def __init__(self, prefix, weights, model):
        try:
            self.embed = Embedding(f"{prefix}.embeddings", weights)
        except RuntimeError:
            self.embed = Embedding(f"{prefix}.embedding", weights)


def to_device(model):
    try:
        model = model.to("cuda")
    except RuntimeError:
        model = model.to("cpu")
    return model


def load_on(name, weights):
    try:
        table = Embedding(name, weights, device="cuda:0")
    except RuntimeError:
        table = Embedding(name, weights, device="cpu")
    return table


def run(model, batch):
    try:
        out = model(batch)
    except RuntimeError:
        out = model(batch.cpu())
    return out
"""

SHARDS = """
from typing import Dict

import torch


def _count(counts: Dict, name: str) -> int:
    if name in counts:
        return counts[name]
    elif name.split("_")[0] in counts:
        return counts[name.split("_")[0]]
    raise RuntimeError(f"no parameter count for {name}")


def _count_tensor(counts, name):
    if name in counts:
        return torch.tensor(counts[name]).sum().item()
    raise RuntimeError(f"no parameter count for {name}")


def _count_via(counts, name):
    if name in counts:
        return _sizes(counts)[name]
    raise RuntimeError(f"no parameter count for {name}")


def _sizes(counts):
    return {key: value.numel() for key, value in counts.items()}


def shard_counts(counts, shards):
    out = {}
    for name in shards:
        try:
            count = _count(counts, name)
        except RuntimeError:
            continue
        out[shards[name]] = out.get(shards[name], 0) + count
    return out


def shard_counts_tensor(counts, shards):
    out = {}
    for name in shards:
        try:
            count = _count_tensor(counts, name)
        except RuntimeError:
            continue
        out[shards[name]] = out.get(shards[name], 0) + count
    return out


def shard_counts_via(counts, shards):
    out = {}
    for name in shards:
        try:
            count = _count_via(counts, name)
        except RuntimeError:
            continue
        out[shards[name]] = out.get(shards[name], 0) + count
    return out
"""

METADATA = """
import logging

from configs import ModelConfig

logger = logging.getLogger(__name__)


def describe(model):
    metadata = {"name": model.name}
    try:
        config = ModelConfig.parse(model.to_json())
        metadata["hash"] = config.identifier()
    except Exception as e:
        logger.warning("could not compute the model hash: %s", e)
        metadata["hash"] = "unknown"
    return metadata


def describe_silently(model):
    metadata = {"name": model.name}
    try:
        config = ModelConfig.parse(model.to_json())
        metadata["hash"] = config.identifier()
    except Exception:
        metadata["hash"] = "unknown"
    return metadata
"""

GRAMMAR = """
import logging

from outlines import regex_from_schema, RegexMachine

logger = logging.getLogger(__name__)


def compile_grammar(kind, schema, tokenizer):
    if kind == "json":
        try:
            schema = regex_from_schema(schema)
        except Exception as e:
            logger.error(f"could not compile the grammar, it will not be enforced: {e}")
            schema = "(.*?)"
    return RegexMachine(schema, tokenizer)


def save(model, path, external=False):
    if not external:
        try:
            size = model.byte_size()
        except Exception as e:
            logger.warning("could not compute the size (%s): saving the tensors as external data", e)
            external = True
        else:
            if size > 2**31:
                external = True
    model.save(path, external=external)


def compile_local(kind, text, tokenizer):
    pattern = text
    if kind == "json":
        try:
            pattern = regex_from_schema(text)
        except Exception as e:
            logger.error(f"could not compile the grammar, it will not be enforced: {e}")
            pattern = "(.*?)"
    return RegexMachine(pattern, tokenizer)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round13") / "r",
        {"pkg/__init__.py": "", "pkg/torch_project.py": TORCH_PROJECT},
        {
            "pkg/prep.py": PREP,
            "pkg/download.py": DOWNLOAD,
            "pkg/weights.py": WEIGHTS,
            "pkg/shards.py": SHARDS,
            "pkg/metadata.py": METADATA,
            "pkg/grammar.py": GRAMMAR,
        },
    )


def _finding(review: list[Finding], path: str, qualname: str, rule: str, message_id: str) -> Finding:
    found = findings_by_rule(review, path, qualname)[rule]
    assert (found.message_id, found.severity) == (message_id, Severity.P2), qualname
    return found


def test_an_error_kept_and_raised_after_the_barrier_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/prep.py", "prepare") == {}


def test_near_misses_the_kept_error_logged_raised_on_one_rank_or_returned_past(review: list[Finding]) -> None:
    for qualname in ("prepare_logged", "prepare_rank_zero", "prepare_returning"):
        _finding(review, "pkg/prep.py", qualname, "broad-except", "broad-except.swallows")


def test_a_bounded_retry_that_exits_failing_when_exhausted_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/download.py", "fetch") == {}


def test_near_misses_an_unbounded_retry_a_quiet_exhaustion_or_an_unnamed_error(review: list[Finding]) -> None:
    for qualname in ("fetch_forever", "fetch_or_go_on", "fetch_quietly"):
        _finding(review, "pkg/download.py", qualname, "runtime-error-fallback", "runtime-error-fallback.no-oom-reraise")


def test_the_same_loader_under_another_weight_name_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/weights.py", "Backbone.__init__") == {}


def test_near_misses_another_device_or_another_value_stay_no_oom(review: list[Finding]) -> None:
    for qualname in ("to_device", "run"):
        _finding(review, "pkg/weights.py", qualname, "runtime-error-fallback", "runtime-error-fallback.no-oom-reraise")
    # a device is no name; since round 22 the same construction again on the CPU, unguarded, is the
    # P3 cpu-retry (test_engine_exception_round22.py), still reported
    found = findings_by_rule(review, "pkg/weights.py", "load_on")["runtime-error-fallback"]
    assert (found.message_id, found.severity) == ("runtime-error-fallback.cpu-retry", Severity.P3)


def test_a_lookups_own_runtime_error_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/shards.py", "shard_counts") == {}


def test_near_misses_a_lookup_calling_torch_or_another_function_stay_no_oom(review: list[Finding]) -> None:
    for qualname in ("shard_counts_tensor", "shard_counts_via"):
        _finding(review, "pkg/shards.py", qualname, "runtime-error-fallback", "runtime-error-fallback.no-oom-reraise")


def test_a_reported_placeholder_in_the_tries_entry_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/metadata.py", "describe") == {}


def test_near_miss_the_placeholder_written_silently(review: list[Finding]) -> None:
    _finding(review, "pkg/metadata.py", "describe_silently", "broad-except", "broad-except.swallows")


def test_a_reported_fallback_replacing_the_callers_converted_argument_is_a_p2(review: list[Finding]) -> None:
    found = _finding(review, "pkg/grammar.py", "compile_grammar", "broad-except", "broad-except.replaces-argument")
    assert found.params["argument"] == "schema"
    assert "replaces the caller's `schema`" in found.message
    assert "`schema`" in found.text("zh").message


def test_near_misses_an_option_switched_or_a_local_name_give_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/grammar.py", "save") == {}
    assert findings_by_rule(review, "pkg/grammar.py", "compile_local") == {}
