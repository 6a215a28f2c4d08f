"""The GitHub service: `reviewbot serve` (webhook endpoint) and `reviewbot worker` (job runner).

Flow: `app.py` verifies a delivery and stores it (one INSERT) before answering; a worker
(`worker.py`, embedded in the server by default) ingests stored deliveries into jobs in arrival
order (`ingest.py` calling the handlers in `events.py`, queue operations in `jobs.py`, tables in
`db.py`), claims jobs under a lease, checks the PR out (`checkout.py`), runs the review engine
(`review_call.py`) or the GPU suites (`gpu_dispatch.py`), and posts through `github_api.py`
(retries, metrics) and `posting.py` (summary upsert by marker, inline comments, statuses).
Slash commands: `commands.py`; settings: `settings.py`; metrics: `metrics.py`; load test:
`python benchmarks/reviewbot_loadtest.py`. Deployment and settings: docs/service.md.
"""
