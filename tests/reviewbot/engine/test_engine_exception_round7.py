"""The precision benchmark's round-7 classes, each next to its near miss that still fires, on a real
git repo reviewed statically (`--suites none`):

- a bounded retry: a handler in a loop that re-raises the caught exception once the attempts are
  used up, and otherwise only logs and waits;
- an optional third-party import followed by a success flag (`WITH_NUMBA = True`) in its try;
- an error handed to a consumer through a queue or a future (`await self.queue.put(e)`).

These are classes of the false findings of the round-6 held-out set (Megatron-LM,
pytorch_geometric) and of the round-7 held-out experiments cases (fsspec), now tuning material of
`reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding

READER = """
import logging
import time

logger = logging.getLogger(__name__)


def read_with_retries(read, retries, pause):
    for attempt in range(retries + 1):
        try:
            return read()
        except Exception as e:
            if attempt == retries:
                logger.warning("%d tries failed; re-raising %s", retries + 1, e)
                raise e
            logger.warning("attempt %d failed with %s; retrying", attempt + 1, e)
            time.sleep(pause)


def read_or_default(read, retries, pause):
    for attempt in range(retries + 1):
        try:
            return read()
        except Exception as e:
            if attempt == retries:
                logger.warning("%d tries failed (%s); using the default", retries + 1, e)
                return b""
            time.sleep(pause)


def read_until_it_works(read, pause):
    while True:
        try:
            return read()
        except Exception as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            time.sleep(pause)
"""

NUMBA = """
try:
    import numba
    WITH_NUMBA = True
except Exception:
    WITH_NUMBA = False
"""

NUMBA_CONFIGURED = """
try:
    import numba
    numba.config.THREADING_LAYER = "omp"
    WITH_NUMBA = True
except Exception:
    WITH_NUMBA = False
"""


PRODUCER = """
import asyncio


class Prefetcher:
    def __init__(self, fetch):
        self.fetch = fetch
        self.queue = asyncio.Queue()

    async def run(self):
        try:
            while True:
                await self.queue.put(await self.fetch())
        except Exception as e:
            await self.queue.put(e)

    async def run_until_failure(self):
        try:
            while True:
                await self.queue.put(await self.fetch())
        except Exception:
            await self.queue.put(None)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round7") / "r",
        {"pkg/__init__.py": ""},
        {
            "pkg/reader.py": READER,
            "pkg/numba_flag.py": NUMBA,
            "pkg/numba_configured.py": NUMBA_CONFIGURED,
            "pkg/producer.py": PRODUCER,
        },
    )


def test_a_bounded_retry_re_raises_once_the_attempts_are_used_up(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/reader.py", "read_with_retries") == {}
    # near misses: a default after the last attempt, and a loop that never gives the error back
    for name in ("read_or_default", "read_until_it_works"):
        found = findings_by_rule(review, "pkg/reader.py", name)["broad-except"]
        assert found.message_id == "broad-except.swallows-one-operation", name


def test_an_optional_import_with_a_success_flag(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/numba_flag.py", "") == {}
    # near miss: the try also configures the library, code that runs besides the import
    found = findings_by_rule(review, "pkg/numba_configured.py", "")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_an_error_handed_to_a_consumer_through_a_queue(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/producer.py", "Prefetcher.run") == {}
    # near miss: a sentinel in the queue, the reader cannot tell a failure from the end of the data
    found = findings_by_rule(review, "pkg/producer.py", "Prefetcher.run_until_failure")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"
