"""The persistent cache across real processes: a cold run bakes it (including a graph
that needs a restart), a warm run in assert_cache_hit mode compiles nothing, an empty
cache in that mode fails with the documented error; concurrent index writers."""

import json
import multiprocessing

import pytest
import torch

from magi_compiler.cache import ArtifactIndex, ArtifactKey

from .conftest import last_json_line, run_script, script_env


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("roundtrip")
    out = root / "cold.pt"
    proc = run_script("cache_roundtrip.py", str(out), env=script_env(root / "cache"))
    return root, last_json_line(proc.stdout), torch.load(out)


def test_cold_run_bakes_cache_with_restart(cold_run):
    root, counters, _ = cold_run
    assert counters["num_inductor_compiles"] >= 4
    assert counters["num_restarts"] == 1
    assert counters["num_splitting_ops_seen"] >= 2
    assert counters["num_swapped_calls"] == 2
    indexes = sorted((root / "cache").glob("model_*_rank_0_ws1/*/index.json"))
    assert [p.parent.parent.name for p in indexes] == ["model_0_tiny_rank_0_ws1", "model_1_fn_rank_0_ws1"]
    key_dirs = list((root / "cache" / "model_0_tiny_rank_0_ws1").iterdir())
    assert len(key_dirs) == 1, "both traces of the restarted graph must land in one key directory"
    tiny = json.loads(indexes[0].read_text())
    assert tiny["graphs"]["0"]["restarts"] == 0
    assert tiny["graphs"]["1"]["restarts"] == 1
    assert set(tiny["graphs"]["1"]["artifacts"]) == {"general|0|inductor", "general|2|inductor"}
    assert all(not path.startswith("/") for path in tiny["graphs"]["1"]["artifacts"].values())


def test_second_process_hits_cache_in_assert_mode(cold_run):
    root, _, cold_outputs = cold_run
    out = root / "warm.pt"
    proc = run_script("cache_roundtrip.py", str(out), env=script_env(root / "cache", MAGI_COMPILE_ASSERT_CACHE_HIT="1"))
    counters = last_json_line(proc.stdout)
    assert "error" not in counters, counters
    assert counters["num_inductor_compiles"] == 0
    assert counters["num_cache_misses"] == 0
    assert counters["num_cache_hits"] == 5
    assert counters["num_restarts_replayed"] == 1
    warm_outputs = torch.load(out)
    assert all(torch.equal(a, b) for a, b in zip(cold_outputs, warm_outputs, strict=True))


def test_assert_cache_hit_on_empty_cache_raises(tmp_path):
    env = script_env(tmp_path / "empty", MAGI_COMPILE_ASSERT_CACHE_HIT="1")
    result = last_json_line(run_script("cache_roundtrip.py", str(tmp_path / "x.pt"), env=env).stdout)
    message = result["error"]
    assert message.startswith("MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss"), message
    assert "model_0_tiny" in message
    assert str(tmp_path / "empty" / "model_0_tiny_rank_0_ws1") in message
    assert "graph index 0" in message


def _record_many(cache_dir: str, worker: int) -> None:
    index = ArtifactIndex(cache_dir)
    for piece in range(40):
        index.record(
            0,
            0,
            "code",
            {ArtifactKey("general", worker * 1000 + piece, "inductor"): f"artifacts/w{worker}_{piece}.bin"},
        )


def test_concurrent_processes_do_not_corrupt_index(tmp_path):
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_record_many, args=(str(tmp_path), w)) for w in range(4)]
    for proc in workers:
        proc.start()
    for proc in workers:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    artifacts = json.loads((tmp_path / "index.json").read_text())["graphs"]["0"]["artifacts"]
    assert len(artifacts) == 4 * 40
    assert not list(tmp_path.glob(".tmp-*")), "temp files must be renamed into place"


def _tuple_split_run(tmp_path, name: str, aot: str, **extra: str) -> dict:
    """One process of ``tuple_split_roundtrip.py`` on the cache in ``tmp_path``: its counters;
    its outputs must equal eager's."""
    env = script_env(tmp_path / "cache", MAGI_COMPILE_AOT=aot, **extra)
    counters = last_json_line(run_script("tuple_split_roundtrip.py", str(tmp_path / name), env=env).stdout)
    run = torch.load(tmp_path / name)
    torch.testing.assert_close(run["outputs"], run["eager"])
    return counters


@pytest.mark.parametrize("aot", ["0", "1"], ids=["jit", "aot"])
def test_tuple_returning_splitting_op_round_trips_through_the_cache(tmp_path, aot):
    """The piece after a splitting op that returns a tuple takes its elements one argument
    each, so a piece loaded from the cache (or an AOT artifact) in a new process is called
    like the freshly compiled one was."""
    cold = _tuple_split_run(tmp_path, "cold.pt", aot)
    assert (cold["num_inductor_compiles"], cold["num_splitting_ops_seen"]) == (2, 1)
    warm = _tuple_split_run(tmp_path, "warm.pt", aot, MAGI_COMPILE_ASSERT_CACHE_HIT="1")
    assert warm["num_inductor_compiles"] == 0
    if aot == "0":
        assert (warm["num_cache_hits"], warm["num_cache_misses"]) == (2, 0)
        assert warm["num_swapped_calls"] == 2, "the later calls take the lean path through the loaded pieces"
        return
    assert warm["num_graphs_seen"] == 0, "the AOT artifact runs without tracing"
    (aot_file,) = (tmp_path / "cache").glob("*/aot/*.magi-aot")
    aot_file.unlink()
    # without the AOT file the backend runs again, on pieces loaded from the Magi cache (one
    # of them a single-output piece, unwrapped by compiler_interface.SingleOutput), which a new
    # AOT file must carry
    rebuilt = _tuple_split_run(tmp_path, "rebuilt.pt", aot)
    assert (rebuilt["num_graphs_seen"], rebuilt["num_inductor_compiles"], rebuilt["num_cache_hits"]) == (1, 0, 2)
    assert aot_file.exists(), "the loaded pieces are saved into a new AOT file"
    again = _tuple_split_run(tmp_path, "again.pt", aot, MAGI_COMPILE_ASSERT_CACHE_HIT="1")
    assert (again["num_graphs_seen"], again["num_inductor_compiles"]) == (0, 0)


def test_an_aot_entry_compiling_a_second_function_numbers_its_graph_on(tmp_path):
    """A call the first AOT function's guards reject (1 row after 8: a prefill, then a decode step)
    compiles a second function; its graph is graph 1 of the piece cache, not a second graph 0
    overwriting the first ("differs from the graph cached under that number"), so a process that
    lost the AOT file loads both from the piece cache (found on gpt-fast's decode loop)."""
    env = script_env(tmp_path / "cache", MAGI_COMPILE_AOT="1")
    cold = run_script("aot_two_functions.py", str(tmp_path / "cold.pt"), env=env)
    assert "differs from the graph cached" not in cold.stderr, cold.stderr
    counters = last_json_line(cold.stdout)
    assert (counters["num_graphs_seen"], counters["num_inductor_compiles"]) == (2, 2)
    (index,) = (tmp_path / "cache").glob("model_*_two_rank_0_ws1/*/index.json")
    assert set(json.loads(index.read_text())["graphs"]) == {"0", "1"}
    (aot_file,) = (tmp_path / "cache").glob("*/aot/*.magi-aot")
    aot_file.unlink()
    rebuilt = run_script("aot_two_functions.py", str(tmp_path / "rebuilt.pt"), env=env)
    assert "differs from the graph cached" not in rebuilt.stderr, rebuilt.stderr
    counters = last_json_line(rebuilt.stdout)
    assert (counters["num_inductor_compiles"], counters["num_cache_hits"]) == (0, 2)
    for name in ("cold.pt", "rebuilt.pt"):
        run = torch.load(tmp_path / name)
        torch.testing.assert_close(run["outputs"], run["eager"])


def test_a_process_calling_the_graphs_in_another_order_hits_them_all(tmp_path):
    """Graph numbers follow call order: an inference process meets, under number 0, the graph a
    training process compiled first. Each graph is found by its code, so a production process in
    `assert_cache_hit` mode loads both whatever the order (a CacheMissError before)."""
    env = script_env(tmp_path / "cache")
    proc = run_script("call_order.py", str(tmp_path / "cold.pt"), "training-first", env=env)
    cold = last_json_line(proc.stdout)
    assert (cold["num_graphs_seen"], cold["num_cache_hits"]) == (2, 0), cold
    env = script_env(tmp_path / "cache", MAGI_COMPILE_ASSERT_CACHE_HIT="1")
    proc = run_script("call_order.py", str(tmp_path / "warm.pt"), "inference-first", env=env)
    warm = last_json_line(proc.stdout)
    assert (warm["num_inductor_compiles"], warm["num_cache_misses"]) == (0, 0), warm
    assert warm["num_cache_hits"] == cold["num_cache_saves"], (warm, cold)
    for name in ("cold.pt", "warm.pt"):
        run = torch.load(tmp_path / name)
        torch.testing.assert_close(run["outputs"], run["eager"])


def _attention_split_run(tmp_path, name: str, **extra: str) -> dict:
    """One AOT process of ``attention_split_roundtrip.py`` on the cache in ``tmp_path``: its
    counters; its outputs must equal eager's."""
    env = script_env(tmp_path / "cache", MAGI_COMPILE_AOT="1", **extra)
    counters = last_json_line(run_script("attention_split_roundtrip.py", str(tmp_path / name), env=env).stdout)
    run = torch.load(tmp_path / name)
    torch.testing.assert_close(run["outputs"], run["eager"])
    return counters


def test_attention_split_with_dynamic_batch_and_sequence_round_trips_through_aot(tmp_path):
    """nanoGPT's attention split at a custom op, batch and sequence dynamic: the eager piece of
    the splitting op kept its nodes' fake values, whose symbolic shapes GraphPickler cannot
    carry, so saving the AOT artifact crashed the cold process (AttributeError: Can't pickle
    local object 'WeakValueDictionary.__init__.<locals>.remove')."""
    cold = _attention_split_run(tmp_path, "cold.pt")
    assert (cold["num_graphs_seen"], cold["num_splitting_ops_seen"]) == (1, 1)
    assert len(list((tmp_path / "cache").glob("*/aot/*.magi-aot"))) == 1, "the cold process saved the artifact"
    warm = _attention_split_run(tmp_path, "warm.pt", MAGI_COMPILE_ASSERT_CACHE_HIT="1")
    assert (warm["num_graphs_seen"], warm["num_inductor_compiles"]) == (0, 0), "the AOT artifact runs untraced"
