"""``apportion server --workers N`` (N > 1): N server processes on one port.

The parent migrates the database and bootstraps the first organization once,
binds the listening socket, then starts N worker processes (``spawn``) that
share it: the kernel hands each new connection to one of them. Every worker is a
whole server (``ControlPlane``: API, dashboard, token cache, ``LISTEN``
connection, scheduler loop); the scheduler lease lets exactly one of them commit
cycles. Worker ``i`` holds the lease under the identity ``<base>/w<i>`` (base:
``APPORTION_HOLDER``, or one per parent process), so a worker that dies is
started again by the parent under the same identity and, like a restarted
server, takes its own lease back at once.

PostgreSQL only: on SQLite a second writer process only waits for the first
(one writer at a time) and nothing tells it of the other's changes.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import replace
from multiprocessing.process import BaseProcess

from apportion.service.settings import Settings

log = logging.getLogger("apportion.server")
#: a worker that dies sooner than this after its start is started again only after a
#: growing pause (1, 2, 4, ... 30 s), so a worker that cannot start does not spin
_QUICK_DEATH = 10.0


def holder_base(settings: Settings) -> str:
    return settings.holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def worker_main(index: int, settings: Settings, sock: socket.socket, log_level: str) -> None:
    """One worker: a whole server on the shared socket."""
    import uvicorn

    from apportion.api.app import create_app
    from apportion.service.control import ControlPlane

    logging.basicConfig(level=log_level.upper(), format=f"%(asctime)s %(levelname)s "
                        f"[worker {index}] %(name)s: %(message)s")
    _end_with_parent()
    control = ControlPlane(settings)
    control.start()  # migrations and bootstrap are already done: no-ops here
    config = uvicorn.Config(create_app(control=control), log_level=log_level.lower(),
                            access_log=log_level.lower() == "debug")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        control.stop()


def _end_with_parent() -> None:
    """Shut this worker down (SIGTERM to itself) when its parent is gone (killed), so
    no orphan keeps serving the port or holding the lease."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="apportion-parent-watch", daemon=True).start()


class Supervisor:
    """Starts the workers, starts a dead one again, stops them all on SIGINT/SIGTERM."""

    def __init__(self, settings: Settings, workers: int, sock: socket.socket,
                 log_level: str) -> None:
        self.settings = settings
        self.base = holder_base(settings)
        self.sock = sock
        self.log_level = log_level
        self.procs: list[BaseProcess | None] = [None] * workers
        self.started_at = [0.0] * workers
        self.pause = [0.0] * workers
        self.stopping = threading.Event()
        self._ctx = multiprocessing.get_context("spawn")

    def _start(self, index: int) -> None:
        settings = replace(self.settings, holder=f"{self.base}/w{index}")
        proc = self._ctx.Process(target=worker_main, name=f"apportion-worker-{index}",
                                 args=(index, settings, self.sock, self.log_level))
        proc.start()
        self.procs[index] = proc
        self.started_at[index] = time.monotonic()

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stopping.set())
        for i in range(len(self.procs)):
            self._start(i)
        print(f"apportion: {len(self.procs)} server processes on one socket "
              f"(supervisor pid {os.getpid()})", file=sys.stderr, flush=True)
        due = [0.0] * len(self.procs)
        while not self.stopping.wait(0.2):
            now = time.monotonic()
            for i, proc in enumerate(self.procs):
                if proc is None or proc.is_alive():
                    continue
                if not due[i]:
                    quick = now - self.started_at[i] < _QUICK_DEATH
                    self.pause[i] = min(30.0, max(1.0, 2 * self.pause[i])) if quick else 0.0
                    due[i] = now + self.pause[i]
                    log.warning("worker %d (pid %s) exited with %s; starting it again in "
                                "%.0f s", i, proc.pid, proc.exitcode, self.pause[i])
                if now >= due[i]:
                    due[i] = 0.0
                    self._start(i)
        return self._stop_all()

    def _stop_all(self) -> int:
        alive = [p for p in self.procs if p is not None and p.is_alive()]
        for proc in alive:
            proc.terminate()  # SIGTERM: uvicorn shuts down gracefully, the lease is released
        deadline = time.monotonic() + 15
        for proc in alive:
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        return 0
