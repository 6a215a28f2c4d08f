"""`reviewbot serve`: the webhook endpoint (uvicorn + FastAPI), with an embedded worker by default."""

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

    from reviewbot.service.app import create_app

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
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("reviewbot").setLevel(settings.log_level)
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)
    return 0
