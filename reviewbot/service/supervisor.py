"""`serve`'s worker process: started with the server, restarted when it exits, stopped with it.

The worker runs as `reviewbot worker --supervised-by <serve pid>` in its own process, so reviews
(CPU, the GIL, git and suites) never delay a webhook answer. It receives the resolved settings as
JSON on its standard input (no secret travels in its environment; `REVIEWBOT_*` variables are
removed from it) and stops by itself when `serve` is gone. It runs in a process group of its own,
so a signal to serve's group (Ctrl-C in a terminal) reaches serve alone, which stops it. An exit is logged and followed by a
restart after a backoff (1 s, doubling up to 60 s; back to 1 s after a minute of uptime).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

from reviewbot.service.health import OwnWorker
from reviewbot.service.settings import ENV_PREFIX, Settings

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 60.0
STABLE_SECONDS = 60.0


class WorkerProcess:
    def __init__(self, settings: Settings, stop_timeout: float = 20.0) -> None:
        """`stop_timeout`: seconds `stop` lets the worker finish its job before killing it (its
        job is then claimed again when the lease ends)."""
        self.settings = settings
        self.stop_timeout = stop_timeout
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._restarts = 0
        self._note = "starting"
        self._thread = threading.Thread(target=self._supervise, name="worker-supervisor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def status(self) -> OwnWorker:
        with self._lock:
            running = self._proc is not None and self._proc.poll() is None
            return OwnWorker(self._proc.pid if running and self._proc else None, self._restarts, self._note)

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "reviewbot", "worker", "--supervised-by", str(os.getpid())],
            stdin=subprocess.PIPE,
            env=env,
            # Its own process group: Ctrl-C in serve's terminal (SIGINT to the foreground group)
            # reaches serve alone, which then stops the worker itself; otherwise the worker would
            # exit first and be taken for a crash and started again while serve shuts down.
            start_new_session=True,
        )
        assert proc.stdin is not None
        proc.stdin.write(self.settings.to_json().encode())
        proc.stdin.close()
        return proc

    def _supervise(self) -> None:
        delay = 1.0
        while True:
            with self._lock:
                if self._stopping.is_set():
                    return
                self._proc = self._spawn()
                self._note = "running"
                proc = self._proc
            logger.info("worker process %d started", proc.pid)
            started = time.monotonic()
            code = proc.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - started > STABLE_SECONDS:
                delay = 1.0
            with self._lock:
                self._restarts += 1
                self._note = f"exited with code {code}, restart {self._restarts} in {delay:g} s"
            logger.error("worker process %d exited with code %d: restarting in %g s", proc.pid, code, delay)
            self._stopping.wait(delay)
            delay = min(delay * 2, MAX_BACKOFF_SECONDS)

    def stop(self) -> None:
        """SIGTERM (the worker stops after its current job), SIGKILL after `stop_timeout`."""
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                logger.warning("worker process %d still busy after %g s: killed", proc.pid, self.stop_timeout)
                proc.kill()
                proc.wait()
        self._thread.join(timeout=5)
