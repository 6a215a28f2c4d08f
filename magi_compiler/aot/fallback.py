"""Which failures of an AOT compile fall back to JIT, which are retried, and which propagate.

The protected region is the single AOT compile call of one entry. Only a ``RuntimeError`` that
means "this entry cannot be compiled ahead of time" falls back (Dynamo's ``Unsupported``, the
"does not implement SerializableCallable" refusal, the fullgraph/cache preconditions of
``aot_compile``, DTensor graphs that Dynamo's AOT capture cannot handle...). One more kind of
error means the same: a *serialisation* failure, which the AOT compile turns fatal (it runs
with ``strict_autograd_cache``) while JIT only logs it. On torch 2.13 a DTensor graph fails
this way (``AttributeError: Can't pickle local object 'WeakValueDictionary...'`` from
AOTAutograd's cache entry), and a class defined in local scope fails guard serialisation
(``TypeError: ... cannot be saved into torch.compile() package``); these are recognised by
their pickling / package-saving messages only (``is_serialization_failure``). These never fall
back, wherever they sit in the exception chain (Dynamo may wrap a backend error in
``BackendCompilerFailed`` or ``InternalTorchDynamoError``):

- programmer errors (``AssertionError``, ``TypeError``, ``NameError``, ...), other than the
  serialisation failures above: not ``RuntimeError`` at the top, and looked for in the chain
  below a wrapping one;
- ``torch.OutOfMemoryError`` (a ``RuntimeError`` subclass);
- the ``assert_cache_hit`` miss (``MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss ...``);
- ``ConstraintViolationError``: a dim named in ``dynamic_arg_dims`` that the code specializes
  (the user's input; the JIT compile fails the same way);
- Dynamo's ``RestartAnalysis`` family: the compile is retried instead.
"""

from __future__ import annotations

import enum
import pickle
import re

import torch
from torch._dynamo import exc as dynamo_exc
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

ASSERT_CACHE_HIT_PREFIX = "MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss"

# Errors of the user's or our own code: falling back would hide a bug.
_PROGRAMMER_ERRORS: tuple[type[BaseException], ...] = (
    AssertionError,
    TypeError,
    NameError,
    AttributeError,
    KeyError,
    IndexError,
    ValueError,
)


# CPython's pickle messages ("Can't pickle local object ...", "cannot pickle '_thread.RLock'
# object") and Dynamo's guard-serialisation refusal.
_SERIALIZATION_FAILURE = re.compile(
    r"can't pickle|cannot pickle|cannot be saved into torch\.compile\(\) package", re.IGNORECASE
)

# What the AOT compile driver catches: RuntimeError, and the types a serialisation failure has.
CAUGHT_AOT_ERRORS: tuple[type[BaseException], ...] = (RuntimeError, AttributeError, TypeError, pickle.PicklingError)


def is_serialization_failure(error: BaseException) -> bool:
    """True for an error that says some object of the compiled entry cannot be serialised."""
    if isinstance(error, pickle.PicklingError):
        return True
    return isinstance(error, (AttributeError, TypeError)) and bool(_SERIALIZATION_FAILURE.search(str(error)))


class AOTFailureKind(enum.Enum):
    FALLBACK = "fallback"
    RESTART = "restart"
    PROPAGATE = "propagate"


class AOTUnsupportedError(RuntimeError):
    """Raised by the AOT compile driver when an entry cannot be compiled ahead of time.

    ``__cause__`` holds the original error; the entry state catches this type only.
    ``dynamo_cache_entries_before``: Dynamo cache entries of the entry's code before the
    attempt (set by the AOT mode around the compile; the fallback compares it).
    """

    dynamo_cache_entries_before: int | None = None


def _exception_chain(error: BaseException) -> list[BaseException]:
    """``error`` and what it wraps: ``inner_exception`` (BackendCompilerFailed), then ``__cause__``."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        inner = getattr(current, "inner_exception", None)
        current = inner if isinstance(inner, BaseException) else current.__cause__
    return chain


def is_assert_cache_hit_miss(error: BaseException) -> bool:
    """True for the ``assert_cache_hit`` miss error, whatever class carries it."""
    return any(str(link).startswith(ASSERT_CACHE_HIT_PREFIX) for link in _exception_chain(error))


def classify_aot_failure(error: BaseException) -> AOTFailureKind:
    """Decide what the AOT compile driver does with an error in ``CAUGHT_AOT_ERRORS`` raised by the AOT compile."""
    chain = _exception_chain(error)
    if any(isinstance(link, torch.OutOfMemoryError) for link in chain):
        return AOTFailureKind.PROPAGATE
    if is_assert_cache_hit_miss(error):
        return AOTFailureKind.PROPAGATE
    if any(isinstance(link, ConstraintViolationError) for link in chain):
        return AOTFailureKind.PROPAGATE  # a named dynamic dim the code specializes: JIT fails alike
    if any(is_serialization_failure(link) for link in chain):
        return AOTFailureKind.FALLBACK
    if any(isinstance(link, _PROGRAMMER_ERRORS) for link in chain):
        return AOTFailureKind.PROPAGATE
    if any(isinstance(link, dynamo_exc.RestartAnalysis) for link in chain):
        return AOTFailureKind.RESTART
    return AOTFailureKind.FALLBACK
