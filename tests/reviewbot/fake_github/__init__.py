"""A local stand-in for the GitHub REST API, for tests (github.com itself is the one thing tests may fake).

`FakeGitHub` serves HTTP on 127.0.0.1 with in-memory state (`FakeState`), one instance per test.
Endpoints live in small route modules under `routes/`, each registering handlers with the `route`
decorator; `ROUTE_MODULES` lists them. To add endpoints (releases, workflow runs, artifacts...),
write a module that decorates handlers with `@route(METHOD, PATTERN)` and append its dotted name
to `ROUTE_MODULES` (a one-line merge), or pass it as `FakeGitHub(extra_route_modules=[...])`.

Handlers receive a `Request` and return a `Response` (or a JSON-able object for 200). Response
bodies may carry `https://api.github.com` URLs: the server rewrites them to its own origin, as
PyGithub only follows URLs on its base URL. `fixtures.load_webhook(...)` does the same for the
shared webhook payload examples.

State for new areas goes in `FakeState.extra` (a dict: e.g. `state.extra.setdefault("releases", {})`)
so route modules need not change the state class. `routes/common.py` has helpers (404, 422,
repository lookup); `webhooks.py` builds signed deliveries from the shared payload examples.

Faults (`FakeState.add_fault`) make the next N matching requests answer a given status/headers
or sleep first: that is how tests exercise retries, rate limits and a worker killed mid-request.
"""

from tests.reviewbot.fake_github.router import Request, Response, route
from tests.reviewbot.fake_github.server import ROUTE_MODULES, FakeGitHub
from tests.reviewbot.fake_github.state import FakeState, Fault

__all__ = ["ROUTE_MODULES", "FakeGitHub", "FakeState", "Fault", "Request", "Response", "route"]
