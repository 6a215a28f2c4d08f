"""`reviewbot serve`: the webhook endpoint (uvicorn + FastAPI), by default with its own worker process.

It binds its socket itself, then says on stderr where it listens (the bound port, also for
`--port 0`), which database it uses (password masked) and where its work directory and worker are.
SIGTERM and Ctrl-C (SIGINT) stop it cleanly: deliveries still being received get up to 10 s, then
its worker process finishes its job (up to 20 s); after Ctrl-C it says so in one line and exits 130.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

from reviewbot.service import settings as settings_mod

SHUTDOWN_GRACE_SECONDS = 10  # how long a stop waits for deliveries still being received


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the GitHub App webhook endpoint",
        description="Run the GitHub App webhook endpoint (POST /webhook, GET or HEAD /healthz, GET /metrics). Every "
        "setting below can also come from the environment (REVIEWBOT_<NAME>) or a YAML file (--config); "
        "flags win over the environment, which wins over the file. See docs/service.md.",
    )
    settings_mod.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn
    from sqlalchemy.exc import OperationalError

    from reviewbot.service import http_protocol
    from reviewbot.service.app import create_app
    from reviewbot.service.health import first_line

    try:
        settings = settings_mod.load(args)
    except ValueError as exc:
        print(f"reviewbot serve: {exc}", file=sys.stderr)
        return 2
    try:
        secret = settings.secret("webhook_secret")
    except ValueError as exc:  # the secret file is missing or not UTF-8 text
        print(f"reviewbot serve: {exc}", file=sys.stderr)
        return 2
    if not secret:
        print(
            "reviewbot serve: no webhook secret: set REVIEWBOT_WEBHOOK_SECRET or --webhook-secret-file FILE "
            "(deliveries cannot be verified without it)",
            file=sys.stderr,
        )
        return 2
    problem = (settings.github_auth_problem() or settings.work_dir_problem()) if settings.embedded_worker else ""
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
        shown = settings_mod.shown_database(settings.database_url)
        print(f"reviewbot serve: cannot open the database {shown}: {first_line(exc)}", file=sys.stderr)
        return 2
    try:
        sock = socket.create_server(
            (settings.host, settings.port), family=socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        )
    except OSError as exc:  # a taken port, an address not of this machine, an unknown host name
        reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else (exc.strerror or str(exc))
        print(f"reviewbot serve: cannot listen on {settings.host}:{settings.port}: {reason}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    where = f"[{host}]" if ":" in host else host
    worker = (
        "an embedded `reviewbot worker` process" if settings.embedded_worker else "none here (run `reviewbot worker`)"
    )
    for line in (
        f"listening on http://{where}:{port} (POST /webhook, GET or HEAD /healthz, GET /metrics); pid {os.getpid()}",
        f"database {settings_mod.shown_database(settings.database_url)}",
        f"work directory {os.path.abspath(settings.work_dir)}; worker: {worker}",
    ):
        print(f"reviewbot serve: {line}", file=sys.stderr, flush=True)
    # On SIGTERM/Ctrl-C uvicorn waits for open requests before the lifespan stops the worker; a
    # sender stalled mid-body would hold serve (and its worker) forever. GitHub gives up on a
    # delivery after 10 s, so one still open after that is cancelled. The protocol is uvicorn's
    # h11 one with deadlines for a request's headers and an answered body (http_protocol.py).
    config = uvicorn.Config(
        app,
        http=http_protocol.protocol(settings.header_timeout_seconds, settings.body_timeout_seconds),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C: uvicorn has shut down (its worker stopped), then re-raised the SIGINT
        print("reviewbot serve: stopped (SIGINT)", file=sys.stderr)
        return 130
    return 0
