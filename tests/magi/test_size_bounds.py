"""The bytecode swap and the ranges the traced code allows on a dynamic size: a swapped call
whose size is outside them takes the guarded path (found trying nanoGPT: a sequence longer than
``block_size`` ran the captured graph past the model's ``assert t <= block_size`` and read past
the end of the position-embedding table, with no error)."""

import torch

from magi_compiler import compilation_counter, magi_compile


def doubled_up_to_eight(x):
    if x.shape[0] <= 8:  # Dynamo guards on it: the traced graph holds for 2..8 rows only
        return x * 2
    return x * 3


def plain(x):
    return torch.relu(x) + 1


def test_a_size_outside_the_traced_range_takes_the_guarded_path(module_cache_env):
    compiled = magi_compile(doubled_up_to_eight, dynamic_arg_dims={"x": 0}, config_patch={"backend": "eager"})
    with torch.no_grad():
        compiled(torch.randn(4, 3))
        with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
            x = torch.randn(6, 3)
            torch.testing.assert_close(compiled(x), x * 2)
        with compilation_counter.expect(num_swapped_calls=0, num_backend_compilations=1):
            x = torch.randn(12, 3)
            torch.testing.assert_close(compiled(x), x * 3)
        with compilation_counter.expect(num_backend_compilations=0):
            for rows in (5, 16, 3, 9):
                x = torch.randn(rows, 3)
                torch.testing.assert_close(compiled(x), x * (2 if rows <= 8 else 3))


def test_an_unbounded_size_keeps_the_swap(module_cache_env):
    compiled = magi_compile(plain, dynamic_arg_dims={"x": 0}, config_patch={"backend": "eager"})
    with torch.no_grad():
        compiled(torch.randn(4, 3))
        with compilation_counter.expect(num_swapped_calls=3, num_backend_compilations=0):
            for rows in (2, 100, 7):
                x = torch.randn(rows, 3)
                torch.testing.assert_close(compiled(x), plain(x))
