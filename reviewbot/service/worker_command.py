"""`reviewbot worker`: run queued jobs from the service database until interrupted."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from reviewbot.service import settings as settings_mod

logger = logging.getLogger(__name__)

# serve's worker process yields the CPU to serve: webhook answers first, reviews (its children too) after
SUPERVISED_NICENESS = 10


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="run queued review jobs (when `serve` runs without its embedded worker)",
        description="Claim and run jobs from the service database (same settings as `reviewbot serve`; the "
        "listening address and embedded_worker are unused). Several workers may share one database. "
        "Exit status: 0 after SIGTERM/SIGINT (once the current jobs are done), 1 when a worker loop died, "
        "2 for bad settings.",
    )
    settings_mod.add_arguments(parser)
    parser.add_argument(
        "--supervised-by",
        type=int,
        metavar="PID",
        help="(used by `serve` for its worker process) read the settings as JSON from standard input "
        "instead of flags, environment and file, and stop when process PID is gone",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import OperationalError

    from reviewbot.service.db import make_sessionmaker
    from reviewbot.service.health import first_line
    from reviewbot.service.worker import Worker

    try:
        if args.supervised_by is not None:
            settings = settings_mod.Settings.from_json(sys.stdin.read())
        else:
            settings = settings_mod.load(args)
        sessions = make_sessionmaker(settings.database_url, max_bytes=settings.database_max_mb << 20, durable=False)
    except ValueError as exc:  # bad settings, or a database of another schema version
        print(f"reviewbot worker: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        shown = settings_mod.shown_database(settings.database_url)
        print(f"reviewbot worker: cannot open the database {shown}: {first_line(exc)}", file=sys.stderr)
        return 2
    problem = settings.github_auth_problem() or settings.work_dir_problem()
    if problem:
        print(f"reviewbot worker: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("reviewbot").setLevel(settings.log_level)
    if args.supervised_by is not None:
        os.nice(SUPERVISED_NICENESS)
    worker = Worker(settings, sessions, parent_pid=args.supervised_by)

    def _graceful(signum: int, _frame: object) -> None:
        logger.info("signal %d: stopping after the current job", signum)
        worker.stop_soon()

    signal.signal(signal.SIGTERM, _graceful)
    signal.signal(signal.SIGINT, _graceful)
    started = f"serve's worker (serve pid {args.supervised_by})" if args.supervised_by is not None else "worker"
    print(
        f"reviewbot worker: {started}, pid {os.getpid()}: database {settings_mod.shown_database(settings.database_url)}"
        f"; work directory {os.path.abspath(settings.work_dir)}; {settings.worker_threads} job(s) at a time",
        file=sys.stderr,
        flush=True,
    )
    return worker.run_forever()
