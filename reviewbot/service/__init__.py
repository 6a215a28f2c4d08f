"""The GitHub service: `reviewbot serve` (webhook endpoint) and `reviewbot worker` (job runner).

Flow: `app.py` verifies and persists a delivery and turns it into jobs (`events.py`) in one
database transaction (`db.py`, `jobs.py`); a worker (`worker.py`, embedded in the server by
default) claims jobs under a lease, checks the PR out (`checkout.py`), runs the review engine
(`review_call.py`) or the GPU suites (`gpu_dispatch.py`), and posts through `github_api.py`
(retries, metrics) and `posting.py` (summary upsert by marker, inline comments, statuses).
Settings: `settings.py`; metrics: `metrics.py`; load test: `python -m reviewbot.service.loadtest`.
"""
