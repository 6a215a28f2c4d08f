"""The relinked captured bytecode of the swap: unwrapped graph and helper globals, one
Dynamo switch-off per call, the pre-graph profiler range kept while a profiler runs."""

import torch

from magi_compiler import compilation_counter, get_entry_state, magi_compile, swapped_code


def shifted_softplus(x, y):
    return torch.nn.functional.softplus(x) - y.sum(dim=0)


def test_swapped_code_calls_unwrapped_graph_and_lean_helpers(module_cache_env):
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, config_patch={"backend": "eager"})(shifted_softplus)
    y = torch.randn(3, 8)
    with torch.no_grad():
        compiled(torch.randn(4, 8), y)
        (swapped,) = get_entry_state(compiled)._swapped.values()
        names = swapped.__code__.co_names
        assert swapped_code.LEAN_UTILS_GLOBAL in names and swapped_code.UTILS_GLOBAL not in names
        direct = [n for n in names if n.startswith(swapped_code.DIRECT_PREFIX + swapped_code.GRAPH_GLOBAL_PREFIX)]
        assert len(direct) == 1 and not any(n.startswith(swapped_code.GRAPH_GLOBAL_PREFIX) for n in names)
        graph_fn = shifted_softplus.__globals__[direct[0]]
        assert not getattr(graph_fn, "_torchdynamo_disable", False)
        for rows in (5, 9):
            x = torch.randn(rows, 8)
            with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
                torch.testing.assert_close(compiled(x, y), shifted_softplus(x, y))
        with torch.profiler.profile() as prof, compilation_counter.expect(num_swapped_calls=1):
            x = torch.randn(6, 8)
            torch.testing.assert_close(compiled(x, y), shifted_softplus(x, y))
    assert "Pregraph bytecode" in {event.name for event in prof.events()}


def test_call_without_dynamo_restores_the_callback():
    seen = []

    def probe():
        previous = torch._C._dynamo.eval_frame.set_eval_frame(None)
        seen.append(previous)
        torch._C._dynamo.eval_frame.set_eval_frame(previous)
        return 7

    outer = torch._C._dynamo.eval_frame.set_eval_frame(None)
    try:
        assert swapped_code.call_without_dynamo(probe) == 7
    finally:
        torch._C._dynamo.eval_frame.set_eval_frame(outer)
    assert seen == [None]
