"""The precision benchmark's round-24 classes from round 23's held-out set (helper h24tune23), next to
their near misses, on real git repos reviewed statically (`--suites none`).

- A kept error raised after the loop the handler leaves (`kept_error.raised_after_loop`) or by every
  caller its function returns it to (`kept_error.raised_by_caller`) gives nothing (optimum-habana's
  dataset load, Megatron-DeepSpeed's ranks agreeing before the re-raise). Near misses: a raise of
  something else after the loop, a caller that never raises the returned error:
  `broad-except.swallows` as before.
- `silent-gate` leaves alone a loop filter's `continue` (a loop that only filters and collects) and a
  guard every caller in the file has checked (optimum-habana's LLaVA LoRA targets and vision-tower
  freeze). Near misses: a loop that also converts each element, a public function, a call outside
  the check: `silent-gate.skips` as before.
- A key left unset whose readers' default is the base's code (`previous_behaviour.unset_key_selects_base`)
  gives nothing (optimum-intel's generation-config loads). Near misses: a reader that indexes the
  key, a default the base did not compute: `broad-except.swallows`.
- A handler's `self` code in a class the change adds is no base code (`previous_behaviour._new_class_self`):
  `broad-except.swallows` where main said nothing (optimum-intel's generation wrapper). Near miss: the
  same handler in a method added to a class the base has: nothing, as before.
- `None` markers that the next statement tests and replaces or turns into an error
  (`data_fallback.replaced_marker`) give nothing (optimum-habana's Whisper audio read). Near miss: a
  replacement that leaves one marker `None`: `broad-except.constant-data` as before.
- The same statement again outside its context manager (`context_retry.retried_outside_context`) is
  `P3` `runtime-error-fallback.context-retry` (optimum-intel's autocast retry). Near miss: a retry
  with other arguments: `runtime-error-fallback.no-oom-reraise` as before.
- A raise the base made on every entry, now under a condition with a way through that does nothing
  (`dropped_raise.raise_made_conditional`), is `P2` `broad-except.raise-made-conditional`
  (optimum-intel's task inference). Near miss: the same handler with `else: raise` restored: nothing.
- A probe whose flag opens a branch that starts with a warning (`warned_flag.warned_flag_probe`)
  gives nothing (optimum-habana's PEFT base model check). Near misses: an info-level message, the
  flag read again later: `broad-except.swallows` as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

LOAD = """
import logging

LOG = logging.getLogger(__name__)


def fetch(name):
    return name


def agree(ok):
    return ok


def load_first(names):
    last_error = None
    for name in names:
        try:
            return fetch(name)
        except Exception as exc:
            last_error = exc
            LOG.error("could not load %s: %s", name, exc)
            break
    raise last_error if last_error else RuntimeError("nothing to load")


def load_first_other_error(names):
    last_error = None
    for name in names:
        try:
            return fetch(name)
        except Exception as exc:
            last_error = exc
            LOG.error("could not load %s: %s", name, exc)
            break
    raise RuntimeError("nothing to load")


def load_part(path):
    success = True
    err = None
    try:
        data = fetch(path)
    except Exception as e:
        print("ERROR: could not load", path)
        success = False
        err = e
    success = agree(success)
    if not success:
        return None, err
    return data, err


def load_part_dropped(path):
    success = True
    err = None
    try:
        data = fetch(path)
    except Exception as e:
        print("ERROR: could not load", path)
        success = False
        err = e
    success = agree(success)
    if not success:
        return None, err
    return data, err


def main(path):
    data, err = load_part(path)
    if data is None:
        if err is not None:
            raise err
        return None
    return data


def main_dropped(path):
    data, err = load_part_dropped(path)
    if data is None:
        return None
    return data
"""

TARGETS = """
import logging

LOG = logging.getLogger(__name__)


def convert(module):
    return module


def choose_targets(model, lora_config):
    if not lora_config.targets:
        return lora_config
    selected = []
    for name, module in model.named_modules():
        if not module.trainable:
            continue
        if name.endswith("proj"):
            selected.append(name)
    lora_config.targets = selected
    LOG.info("chose %d targets", len(selected))
    return lora_config


def convert_targets(model, lora_config):
    if not lora_config.targets:
        return lora_config
    for name, module in model.named_modules():
        if not module.trainable:
            continue
        convert(module)
    return lora_config


class Trainer:
    def __init__(self, model_config, model):
        self.model_config = model_config
        self.model = model

    def setup(self):
        if self.model_config.get("family") == "llava":
            self._freeze_vision()
            self.freeze_text()
            self._freeze_audio()
        self._freeze_audio()

    def _freeze_vision(self):
        \"\"\"Freeze the vision tower.\"\"\"
        if not self.model_config or self.model_config.get("family") != "llava":
            return
        for param in self.model.parameters():
            param.requires_grad = False

    def freeze_text(self):
        if not self.model_config or self.model_config.get("family") != "llava":
            return
        for param in self.model.parameters():
            param.requires_grad = False

    def _freeze_audio(self):
        if not self.model_config or self.model_config.get("family") != "llava":
            return
        for param in self.model.parameters():
            param.requires_grad = False
"""

MODEL_BASE = """
class Config:
    @classmethod
    def from_model(cls, config):
        return cls()

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    @classmethod
    def from_new(cls, config):
        return cls()


class Model:
    def __init__(self, config, **kwargs):
        self.generation_config = Config.from_model(config)
        self.tokenizer = Config.from_model(config)
        self.processor = None

    @classmethod
    def load(cls, name, config, **kwargs):
        return cls(config, **kwargs)


class FallbackWrapper:
    def __init__(self, optimized, default):
        self._optimized = optimized
        self._default = default

    def __call__(self, *args, **kwargs):
        try:
            return self._optimized(*args, **kwargs)
        except Exception:
            return self._default(*args, **kwargs)
"""

MODEL = """
class Config:
    @classmethod
    def from_model(cls, config):
        return cls()

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    @classmethod
    def from_new(cls, config):
        return cls()


class Model:
    def __init__(self, config, **kwargs):
        self.generation_config = kwargs.get("generation_config", Config.from_model(config))
        self.tokenizer = kwargs["tokenizer"] if "tokenizer" in kwargs else Config.from_model(config)
        self.processor = kwargs.get("processor", Config.from_new(config))

    @classmethod
    def load(cls, name, config, **kwargs):
        try:
            generation_config = Config.from_pretrained(name)
            kwargs["generation_config"] = generation_config
        except Exception:
            pass
        return cls(config, **kwargs)

    @classmethod
    def load_tokenizer(cls, name, config, **kwargs):
        try:
            tokenizer = Config.from_pretrained(name)
            kwargs["tokenizer"] = tokenizer
        except Exception:
            pass
        return cls(config, **kwargs)

    @classmethod
    def load_processor(cls, name, config, **kwargs):
        try:
            processor = Config.from_pretrained(name)
            kwargs["processor"] = processor
        except Exception:
            pass
        return cls(config, **kwargs)


class FallbackWrapper:
    def __init__(self, optimized, default):
        self._optimized = optimized
        self._default = default

    def __call__(self, *args, **kwargs):
        try:
            return self._optimized(*args, **kwargs)
        except Exception:
            return self._default(*args, **kwargs)

    def generate(self, *args, **kwargs):
        try:
            outputs = self._optimized(*tuple(args))
            return outputs[0]
        except Exception:
            return self._default(*args, **kwargs)


class GenerationWrapper:
    def __init__(self, optimized, default):
        self._optimized = optimized
        self._default = default

    def __call__(self, *args, **kwargs):
        try:
            outputs = self._optimized(*tuple(args))
            return outputs[0]
        except Exception:
            return self._default(*args, **kwargs)
"""

AUDIO = """
import io
import logging

LOG = logging.getLogger(__name__)


def read(source):
    return source, 16000


def prepare(sample):
    path = sample.get("path")
    wav, rate = None, None
    if isinstance(path, str):
        try:
            wav, rate = read(path)
        except Exception as e:
            LOG.warning(f"could not read {path} ({e}); reading the bytes")
            wav, rate = None, None
    if wav is None:
        raw = sample.get("bytes")
        if raw is None:
            raise RuntimeError(f"cannot open {sample}")
        wav, rate = read(io.BytesIO(raw))
    return wav, rate


def prepare_partly(sample):
    path = sample.get("path")
    wav, rate = None, None
    if isinstance(path, str):
        try:
            wav, rate = read(path)
        except Exception as e:
            LOG.warning(f"could not read {path} ({e}); reading the bytes")
            wav, rate = None, None
    if wav is None:
        raw = sample.get("bytes")
        if raw is None:
            raise RuntimeError(f"cannot open {sample}")
        wav = read(io.BytesIO(raw))[0]
    return wav, rate
"""

AUTOCAST = """
import torch


class Wrapped:
    def __init__(self, model, dtype):
        self.model = model
        self.dtype = dtype

    def call(self, *args):
        try:
            with torch.autocast("cpu", self.dtype):
                out = self.model(*args)
        except RuntimeError:
            out = self.model(*args)
        return out

    def call_other(self, *args):
        try:
            with torch.autocast("cpu", self.dtype):
                out = self.model(*args)
        except RuntimeError:
            out = self.model(*args, use_cache=False)
        return out
"""

TASK_BASE = """
def lookup(name):
    return {"bert": "fill-mask"}[name]


def load_config(name):
    return {"architectures": [name]}


def infer(task, name):
    if task == "auto":
        try:
            task = lookup(name)
        except KeyError as e:
            raise KeyError(f"could not infer the task of {name}: {e}")
    return task


def infer_fixed(task, name):
    if task == "auto":
        try:
            task = lookup(name)
        except KeyError as e:
            raise KeyError(f"could not infer the task of {name}: {e}")
    return task
"""

TASK = """
def lookup(name):
    return {"bert": "fill-mask"}[name]


def load_config(name):
    return {"architectures": [name]}


def infer(task, name):
    if task == "auto":
        try:
            task = lookup(name)
        except KeyError as e:
            try:
                config = load_config(name)
                if "Mistral" in config["architectures"]:
                    task = "text-generation"
            except Exception:
                raise KeyError(f"could not infer the task of {name}: {e}")
    return task


def infer_fixed(task, name):
    if task == "auto":
        try:
            task = lookup(name)
        except KeyError as e:
            try:
                config = load_config(name)
                if "Mistral" in config["architectures"]:
                    task = "text-generation"
                else:
                    raise KeyError(f"could not infer the task of {name}: {e}")
            except Exception:
                raise KeyError(f"could not infer the task of {name}: {e}")
    return task
"""

PEFT = """
import logging
from pathlib import Path

LOG = logging.getLogger(__name__)


def list_files(name):
    return [name]


def load(name):
    return name


def base_model(base_name, fallback_name):
    is_local = Path(base_name).is_dir()
    if not is_local:
        try:
            list_files(base_name)
            is_remote = True
        except Exception:
            is_remote = False
    if is_local or is_remote:
        model = load(base_name)
    else:
        LOG.warning(f"the base model {base_name} does not exist; using {fallback_name} instead")
        model = load(fallback_name)
    return model


def base_model_quiet(base_name, fallback_name):
    is_local = Path(base_name).is_dir()
    if not is_local:
        try:
            list_files(base_name)
            is_remote = True
        except Exception:
            is_remote = False
    if is_local or is_remote:
        model = load(base_name)
    else:
        LOG.info(f"the base model {base_name} does not exist; using {fallback_name} instead")
        model = load(fallback_name)
    return model


def base_model_read_again(base_name, fallback_name):
    is_local = Path(base_name).is_dir()
    if not is_local:
        try:
            list_files(base_name)
            is_remote = True
        except Exception:
            is_remote = False
    if is_local or is_remote:
        model = load(base_name)
    else:
        LOG.warning(f"the base model {base_name} does not exist; using {fallback_name} instead")
        model = load(fallback_name)
    return model, is_remote
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round24_tune23")
    base = {
        "pkg/__init__.py": "",
        "pkg/load.py": "",
        "pkg/targets.py": "",
        "pkg/model.py": MODEL_BASE,
        "pkg/audio.py": "",
        "pkg/autocast.py": "",
        "pkg/task.py": TASK_BASE,
        "pkg/peft.py": "",
    }
    shapes = {
        "pkg/load.py": LOAD,
        "pkg/targets.py": TARGETS,
        "pkg/model.py": MODEL,
        "pkg/audio.py": AUDIO,
        "pkg/autocast.py": AUTOCAST,
        "pkg/task.py": TASK,
        "pkg/peft.py": PEFT,
    }
    return review_shapes(path, base, shapes)


def _shown(review: list[Finding], path: str, qualname: str, rule: str) -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get(rule)
    return None if finding is None else (finding.message_id, finding.severity)


@pytest.mark.parametrize("qualname", ["load_first", "load_part"])
def test_a_kept_error_raised_later_gives_nothing(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/load.py", qualname) == {}


@pytest.mark.parametrize("qualname", ["load_first_other_error", "load_part_dropped"])
def test_a_kept_error_nothing_raises_stays_a_swallow(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/load.py", qualname, "broad-except") == (
        "broad-except.swallows-one-operation",
        Severity.P3,
    )


@pytest.mark.parametrize("qualname", ["choose_targets", "Trainer._freeze_vision"])
def test_a_loop_filter_and_a_guard_its_callers_checked_are_no_gates(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/targets.py", qualname) == {}


@pytest.mark.parametrize("qualname", ["convert_targets", "Trainer.freeze_text", "Trainer._freeze_audio"])
def test_near_misses_of_the_loop_filter_and_the_checked_guard_stay_gates(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/targets.py", qualname, "silent-gate") == ("silent-gate.skips", Severity.P2)


def test_a_key_left_unset_for_the_base_default_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/model.py", "Model.load") == {}


@pytest.mark.parametrize("qualname", ["Model.load_tokenizer", "Model.load_processor"])
def test_near_misses_of_the_unset_key_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/model.py", qualname, "broad-except") == (
        "broad-except.swallows-one-operation",
        Severity.P3,
    )


def test_self_code_in_a_new_class_is_no_base_code(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/model.py", "GenerationWrapper.__call__", "broad-except")
    assert shown == ("broad-except.swallows-one-operation", Severity.P3)


def test_self_code_in_a_class_the_base_has_is_still_base_code(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/model.py", "FallbackWrapper.generate") == {}


def test_none_markers_the_next_statement_replaces_give_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/audio.py", "prepare") == {}


def test_a_marker_left_none_stays_constant_data(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/audio.py", "prepare_partly", "broad-except")
    assert shown == ("broad-except.constant-data", Severity.P2)


def test_the_same_statement_outside_its_context_is_a_p3_retry(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/autocast.py", "Wrapped.call", "runtime-error-fallback")
    assert shown == ("runtime-error-fallback.context-retry", Severity.P3)


def test_a_retry_with_other_arguments_stays_no_oom_reraise(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/autocast.py", "Wrapped.call_other", "runtime-error-fallback")
    assert shown == ("runtime-error-fallback.no-oom-reraise", Severity.P2)


def test_a_raise_made_conditional_with_a_silent_way_through_is_p2(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/task.py", "infer")["broad-except"]
    line = TASK.lstrip("\n").splitlines().index("        except KeyError as e:") + 1
    assert (finding.message_id, finding.severity, finding.line_start) == (
        "broad-except.raise-made-conditional",
        Severity.P2,
        line,
    )


def test_a_raise_kept_on_every_silent_way_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/task.py", "infer_fixed") == {}


def test_a_probe_whose_flag_opens_a_warned_branch_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/peft.py", "base_model") == {}


@pytest.mark.parametrize("qualname", ["base_model_quiet", "base_model_read_again"])
def test_near_misses_of_the_warned_flag_stay_swallows(review: list[Finding], qualname: str) -> None:
    # round 25: the same swallow, worded by the branch its flag picks (`route_decision`)
    assert _shown(review, "pkg/peft.py", qualname, "broad-except") == ("broad-except.decides-route", Severity.P2)
