"""A real server on 127.0.0.1 with the demo organization, and headless Chromium.

The server is the production stack (ControlPlane with its scheduler loop,
``create_app``, uvicorn) on SQLite; the only stand-in is the agent: a thread
that reports every start decision as running, as an agent's executor would.
The browser is Debian's ``chromium`` driven by Playwright (never a
downloaded browser).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from apportion.api.app import create_app
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from tests.netutil import bound_socket, port_of
from tests.timing import wait_until
from tests.web.demo import ADMIN_TOKEN, Demo, bearer, build

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
#: bounded waits for what the page shows (a loaded 2-core machine is slow)
TIMEOUT_MS = 15_000
#: seconds between the stand-in agent's heartbeats (well under ``agent_timeout``)
HEARTBEAT_EVERY = 2.0


def need_chromium() -> None:
    """Skip without /usr/bin/chromium, except in CI (CI=true), where it must be there."""
    if CHROMIUM.exists():
        return
    if os.environ.get("CI"):
        pytest.fail("CI is set but /usr/bin/chromium is missing: .ci/run installs it "
                    "(apt-get install chromium)")
    pytest.skip("browser tests need Debian's chromium at /usr/bin/chromium "
                "(apt-get install chromium); it is not installed here")


@dataclass
class LiveServer:
    url: str
    control: ControlPlane
    demo: Demo
    http: httpx.Client

    def api(self, method: str, path: str, headers: dict[str, str] | None = None,
            json: Any = None) -> Any:
        r = self.http.request(method, path, headers=headers or bearer(ADMIN_TOKEN), json=json)
        assert r.status_code < 300, f"{method} {path}: {r.text}"
        return r.json()["data"]

    def wait_for(self, what: str, check: Any, timeout: float = 15.0) -> Any:
        """Poll ``check()`` until it is truthy (bounded: tests/timing.py)."""
        return wait_until(check, timeout=timeout, what=what)


def _agent(server: LiveServer, stop: threading.Event) -> None:
    """Report start decisions as running, and heartbeat as a real agent does."""
    beat = time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(AssertionError, httpx.HTTPError):  # the server is stopping
            server.demo.report_running()
            if time.monotonic() - beat >= HEARTBEAT_EVERY:
                server.demo.heartbeat()
                beat = time.monotonic()
        stop.wait(0.1)


def start_server(tmp: Path) -> Iterator[LiveServer]:
    import uvicorn

    control = ControlPlane(Settings(
        database_url=f"sqlite:///{tmp / 'apportion.db'}", bootstrap_token=ADMIN_TOKEN,
        cycle_interval=0.5, rate_limit=0.0))
    control.start()
    sock = bound_socket()  # handed to uvicorn: no window for another process to take it
    port = port_of(sock)
    server = uvicorn.Server(uvicorn.Config(create_app(control=control), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    stop = threading.Event()
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, timeout=30.0)
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=30,
                   interval=0.02, what="the server to start")
        assert server.started, "the server thread ended before it started serving"
        live = LiveServer(url, control, Demo(lambda *a, **k: None), http)
        live.demo = build(live.api)
        agent = threading.Thread(target=_agent, args=(live, stop), daemon=True)
        agent.start()
        live.wait_for("the demo to settle", lambda: _settled(live))
        yield live
    finally:
        stop.set()
        server.should_exit = True
        thread.join(timeout=15)
        http.close()
        control.stop()
        sock.close()


def _settled(live: LiveServer) -> bool:
    running = live.api("GET", "/v1/workloads?status=Running")
    waiting = live.api("GET", "/v1/workloads?status=Queued")
    return len(running) == 2 and len(waiting) == 1
