"""`reviewbot serve`: the webhook endpoint (uvicorn + FastAPI), by default with its own worker process."""

from __future__ import annotations

import argparse
import logging
import sys

from reviewbot.service import settings as settings_mod


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the GitHub App webhook endpoint",
        description="Run the GitHub App webhook endpoint (POST /webhook, GET /healthz, GET /metrics). Every "
        "setting below can also come from the environment (REVIEWBOT_<NAME>) or a YAML file (--config); "
        "flags win over the environment, which wins over the file. See docs/service.md.",
    )
    settings_mod.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn
    from sqlalchemy.exc import OperationalError

    from reviewbot.service.app import create_app
    from reviewbot.service.health import first_line

    try:
        settings = settings_mod.load(args)
    except ValueError as exc:
        print(f"reviewbot serve: {exc}", file=sys.stderr)
        return 2
    try:
        secret = settings.secret("webhook_secret")
    except ValueError as exc:  # the secret file is missing
        print(f"reviewbot serve: {exc}", file=sys.stderr)
        return 2
    if not secret:
        print(
            "reviewbot serve: no webhook secret: set REVIEWBOT_WEBHOOK_SECRET or --webhook-secret-file FILE "
            "(deliveries cannot be verified without it)",
            file=sys.stderr,
        )
        return 2
    problem = settings.github_auth_problem() if settings.embedded_worker else ""
    if problem:  # its worker process would fail every job
        print(f"reviewbot serve: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("reviewbot").setLevel(settings.log_level)
    try:
        app = create_app(settings)
    except ValueError as exc:  # a database of another schema version
        print(f"reviewbot serve: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(f"reviewbot serve: cannot open the database: {first_line(exc)}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)
    return 0
