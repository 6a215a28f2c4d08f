"""An AOT entry whose compiled code reaches a module that is not one of its arguments: torch
cannot save it, the entry runs compiled, and the warning says so in one line with the remedy. A
save that fails on an unpicklable object is a warning whatever exception type CPython uses."""

import logging
import pickle

import pytest
import torch

from magi_compiler import compilation_counter, get_entry_state, magi_compile

GLOBAL_MODEL = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))


def step(x):
    return GLOBAL_MODEL(x).relu()


OTHER_MODEL = torch.nn.Linear(8, 8)


def two_modules(x):
    return GLOBAL_MODEL(x) + OTHER_MODEL(x)


def test_a_global_module_gives_a_one_line_warning_with_the_remedy(module_cache_env, caplog):
    """Found trying nanoGPT (a function entry calling a global GPT): the warning held the
    module's whole repr over 30 lines and advised torch's ``external_data``, which
    ``magi_compile`` does not take."""
    compiled = magi_compile(step, config_patch={"aot": True})
    logged = caplog.at_level(logging.WARNING, logger="magi_compiler")
    with torch.no_grad(), logged, compilation_counter.expect(num_graphs_seen=1):
        for batch in (4, 6):
            x = torch.randn(batch, 8)
            torch.testing.assert_close(compiled(x), step(x))
    lines = [r.getMessage() for r in caplog.records if "could not be saved" in r.getMessage()]
    name = f"{get_entry_state(compiled).model_name}:{__name__}.step"
    expected = (
        f"AOT artifact of {name} could not be saved: torch cannot save the torch.nn.Module Sequential, which "
        "the compiled code reaches other than through the entry's arguments (a global or closure variable); "
        "pass the module as an argument, or compile its method (magi_compile(model.forward)); it runs "
        "compiled in this process, the next process compiles it again"
    )
    assert lines == [expected]


def test_two_global_modules_are_both_named(module_cache_env, caplog):
    compiled = magi_compile(two_modules, config_patch={"aot": True})
    x = torch.randn(4, 8)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="magi_compiler"):
        torch.testing.assert_close(compiled(x), two_modules(x))
    (line,) = [r.getMessage() for r in caplog.records if "could not be saved" in r.getMessage()]
    assert "\n" not in line, line
    named = line.split("torch cannot save the torch.nn.Modules ", 1)[1].split(", which", 1)[0]
    assert sorted(named.split(", ")) == ["Linear", "Sequential"], line


def relu_plus_one(x):
    return torch.relu(x) + 1


def test_a_pickling_attribute_error_while_saving_is_a_warning(module_cache_env, caplog, monkeypatch):
    """CPython 3.11 reports an unpicklable local object as an AttributeError; before, such a save
    failure (nanoGPT's attention split under AOT, since fixed in the serializer) crashed the
    process although the entry had compiled. The save here pickles a real local object."""
    from magi_compiler.aot import entry

    def save_reaching_a_local_object(path, name, functions):
        def local():
            return None

        pickle.dumps(local)

    monkeypatch.setattr(entry, "save_artifact", save_reaching_a_local_object)
    compiled = magi_compile(relu_plus_one, config_patch={"aot": True})
    x = torch.randn(4, 8)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="magi_compiler"):
        torch.testing.assert_close(compiled(x), relu_plus_one(x))
    (line,) = [r.getMessage() for r in caplog.records if "could not be saved" in r.getMessage()]
    assert "(AttributeError: Can't pickle local object" in line, line
    assert line.endswith("it runs compiled in this process, the next process compiles it again"), line


def test_another_attribute_error_while_saving_propagates(module_cache_env, monkeypatch):
    from magi_compiler.aot import entry

    def broken_save(path, name, functions):
        return functions.no_such_attribute

    monkeypatch.setattr(entry, "save_artifact", broken_save)
    compiled = magi_compile(relu_plus_one, config_patch={"aot": True})
    with torch.no_grad(), pytest.raises(AttributeError, match="no_such_attribute"):
        compiled(torch.randn(4, 8))
