"""`reviewbot worker`: run queued jobs from the service database until interrupted."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from reviewbot.service import settings as settings_mod


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="run queued review jobs (when `serve` runs without its embedded worker)",
        description="Claim and run jobs from the service database (same settings as `reviewbot serve`; the "
        "listening address and embedded_worker are unused). Several workers may share one database.",
    )
    settings_mod.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from reviewbot.service.db import make_sessionmaker
    from reviewbot.service.worker import Worker

    try:
        settings = settings_mod.load(args)
    except ValueError as exc:
        print(f"reviewbot worker: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("reviewbot").setLevel(settings.log_level)
    worker = Worker(settings, make_sessionmaker(settings.database_url))

    def _graceful(signum: int, _frame: object) -> None:
        logging.getLogger("reviewbot").info("signal %d: stopping after the current job", signum)
        worker.stop_soon()

    signal.signal(signal.SIGTERM, _graceful)
    signal.signal(signal.SIGINT, _graceful)
    worker.run_forever()
    return 0
