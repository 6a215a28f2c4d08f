"""CompileConfig: environment reading, priority, validation and the config hash."""

import pytest

from magi_compiler.config import CompileConfig, CompileMode, FSDPConfig, apply_config_patch


def test_defaults_and_env_reading():
    config = CompileConfig.from_env(
        {
            "MAGI_COMPILE_COMPILE_MODE": "torch_compile",
            "MAGI_COMPILE_BACKEND": "eager",
            "MAGI_COMPILE_AOT": "yes",
            "MAGI_COMPILE_SPLITTING_OPS": "magi::attn, other::op",
            "MAGI_COMPILE_FSDP__ENABLE_FSDP": "1",
            "MAGI_COMPILE_FSDP__BUCKET_SIZE_MIB": "16",
        }
    )
    assert config.compile_mode is CompileMode.TORCH_COMPILE
    assert config.backend == "eager"
    assert config.aot is True
    assert config.splitting_ops == ["magi::attn", "other::op"]
    assert config.fsdp == FSDPConfig(enable_fsdp=True, bucket_mode="coalesced", bucket_size_mib=16, prefetch_depth=1)
    default = CompileConfig.from_env({})
    assert default == CompileConfig()
    assert default.cache_root_dir == "~/.cache/magi_compiler"
    assert CompileConfig.from_env({"MAGI_COMPILE_SPLITTING_OPS": '["a::b"]'}).splitting_ops == ["a::b"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MAGI_COMPILE_AOT", "maybe"),
        ("MAGI_COMPILE_COMPILE_MODE", "fast"),
        ("MAGI_COMPILE_FSDP__BUCKET_SIZE_MIB", "big"),
        ("MAGI_COMPILE_FSDP__BUCKET_MODE", "scattered"),
        ("MAGI_COMPILE_BACKEND", "tvm"),
        ("MAGI_COMPILE_SPLITTING_OPS", "[1, 2]"),
    ],
)
def test_malformed_env_value_names_the_variable(variable, value):
    with pytest.raises(ValueError, match=variable):
        CompileConfig.from_env({variable: value})


def test_priority_patch_over_env_over_default():
    from_env = CompileConfig.from_env({"MAGI_COMPILE_BACKEND": "eager", "MAGI_COMPILE_DISABLE_CACHE": "1"})
    patched = apply_config_patch(from_env, {"backend": "inductor", "fsdp": {"prefetch_depth": 2}})
    assert patched.backend == "inductor"
    assert patched.disable_cache is True
    assert patched.fsdp.prefetch_depth == 2
    assert from_env.fsdp.prefetch_depth == 1, "the patch must not mutate its input"

    def patch(cfg):
        cfg.splitting_ops.append("magi::attn")

    assert apply_config_patch(from_env, patch).splitting_ops == ["magi::attn"]
    assert from_env.splitting_ops == []
    with pytest.raises(ValueError, match="unknown CompileConfig field"):
        apply_config_patch(from_env, {"no_such_field": 1})
    with pytest.raises(ValueError, match="bucket_mode"):
        apply_config_patch(from_env, {"fsdp": {"bucket_mode": "bad"}})
    with pytest.raises(TypeError, match="splitting_ops must be a list"):
        apply_config_patch(from_env, {"splitting_ops": "magi::attn"})


def test_hash_covers_codegen_fields_only():
    base = CompileConfig()
    assert base.hash == CompileConfig().hash
    for patch in (
        {"backend": "eager"},
        {"compile_mode": "TORCH_COMPILE"},
        {"splitting_ops": ["magi::attn"]},
        {"disable_graph_split": True},
        {"aot": True},
        {"fsdp": {"enable_fsdp": True}},
        {"fsdp": {"bucket_mode": "none"}},
        {"fsdp": {"bucket_size_mib": 8}},
        {"fsdp": {"prefetch_depth": 2}},
    ):
        assert apply_config_patch(base, patch).hash != base.hash, patch
    for patch in (
        {"log_level": "DEBUG"},
        {"cache_root_dir": "/elsewhere"},
        {"disable_cache": True},
        {"assert_cache_hit": True},
        {"bytecode_swap": False},
        {"cudagraph_mode": "PIECEWISE"},
        {"cudagraph_capture_sizes": [1, 2, 4]},
    ):
        assert apply_config_patch(base, patch).hash == base.hash, patch


def test_readme_configuration_table_lists_every_field_with_its_key_membership():
    import dataclasses
    import re

    from .conftest import REPO_ROOT

    doc = (REPO_ROOT / "README.md").read_text()
    rows = {
        m[0]: (m[1], m[2]) for m in re.findall(r"^\| `([\w.]+)` \| `(\w+)` \| [^|]+ \| (yes|no) \|", doc, re.MULTILINE)
    }
    expected = {}
    for f in dataclasses.fields(CompileConfig):
        if f.name != "fsdp":
            in_key = "yes" if f.metadata.get("hash", True) else "no"
            expected[f.name] = (f"MAGI_COMPILE_{f.name.upper()}", in_key)
    for f in dataclasses.fields(FSDPConfig):
        expected[f"fsdp.{f.name}"] = (f"MAGI_COMPILE_FSDP__{f.name.upper()}", "yes")
    assert rows == expected
