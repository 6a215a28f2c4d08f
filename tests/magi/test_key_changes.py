"""Through real compiles: a codegen config field or an edit of a traced source file moves
the model to another key directory; an unrelated field (log level) does not."""

import importlib.util
import os

import pytest
import torch

from magi_compiler import get_entry_state, magi_compile

MODEL_SOURCE = """
import torch


def block(x):
    return torch.relu(x) * {factor}
"""


def compiled_key_dir(source_dir, name, factor, config_patch):
    path = source_dir / f"{name}.py"
    path.write_text(MODEL_SOURCE.format(factor=factor))
    spec = importlib.util.spec_from_file_location(f"magi_key_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    compiled = magi_compile(module.block, config_patch={"backend": "eager", **config_patch})
    x = torch.randn(3, 2)
    torch.testing.assert_close(compiled(x), module.block(x))
    state = get_entry_state(compiled)
    return os.path.basename(state.backend.cache_dir), state.backend.key_factors


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory, module_cache_env):
    return tmp_path_factory.mktemp("sources")


def test_key_follows_codegen_config_and_traced_sources(source_dir):
    base_key, base_factors = compiled_key_dir(source_dir, "base", 2, {})
    same_key, _ = compiled_key_dir(source_dir, "same", 2, {"log_level": "INFO"})
    assert same_key == base_key, "an unrelated field (log level) must not change the key"
    split_key, split_factors = compiled_key_dir(source_dir, "split", 2, {"disable_graph_split": True})
    assert split_key != base_key
    assert split_factors["compile_config"] != base_factors["compile_config"]
    edited_key, edited_factors = compiled_key_dir(source_dir, "edited", 3, {})
    assert edited_key != base_key
    assert edited_factors["traced_sources"] != base_factors["traced_sources"]
    assert edited_factors["compile_config"] == base_factors["compile_config"]
