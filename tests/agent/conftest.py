"""Agent tests run a real control plane (uvicorn in a thread, SQLite, scheduler
loop on) and real agents against it over HTTP. Every wait is bounded."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from apportion.agent.executor import Executor
from apportion.agent.loop import Agent, AgentOptions
from apportion.agent.state import StateFile
from apportion.api.app import create_app
from apportion.client import ApportionClient
from apportion.clock import SYSTEM_CLOCK, Clock
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from tests.netutil import bound_socket, port_of
from tests.timing import wait_until

ADMIN_TOKEN = "apt_agenttests01_" + "a" * 32
FAST = AgentOptions(poll_interval=0.1, heartbeat_interval=1.0, max_backoff=0.5)


class LiveServer:
    """The control plane on a port of its own with its database at ``db_path``;
    restartable (on the same port: agents keep its URL)."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        # bound now and handed to uvicorn: the port is never free for another
        # process (an xdist worker) to take between choosing it and serving on it
        self._sock: socket.socket | None = bound_socket()
        self.port = port_of(self._sock)
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._control: ControlPlane | None = None

    def start(self) -> None:
        settings = Settings(database_url=f"sqlite:///{self.db_path}",
                            bootstrap_token=ADMIN_TOKEN, cycle_interval=0.2,
                            cycle_min_gap=0.02, rate_limit=0.0, lease_ttl=3.0)
        self._control = ControlPlane(settings)
        self._control.start()
        config = uvicorn.Config(create_app(control=self._control), log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        # a restart binds the old port again (the stopped server closed its socket)
        sock = self._sock if self._sock is not None else bound_socket(self.port)
        self._sock = None
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        wait_for(lambda: self._server is not None and self._server.started, 20, "server up")

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._control is not None:
            self._control.stop()
        self._server = self._thread = self._control = None


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` every 50 ms until truthy; fail after ``timeout`` s."""
    return wait_until(predicate, timeout=timeout, what=what)


@dataclass
class AgentThread:
    agent: Agent
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> AgentThread:
        self.thread = threading.Thread(target=self.agent.run, args=(self.stop,), daemon=True)
        self.thread.start()
        return self

    def halt(self) -> None:
        """Stop the loop (as if the agent process died: runs are left as they are)."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
            assert not self.thread.is_alive()


@dataclass
class Cluster:
    server: LiveServer
    admin: ApportionClient
    agent_token: str
    tmp: Path
    agents: list[AgentThread] = field(default_factory=list)

    def agent(self, executor: Executor, pool: str = "main",
              options: AgentOptions = FAST, clock: Clock = SYSTEM_CLOCK) -> AgentThread:
        api = ApportionClient(self.server.url, self.agent_token, timeout=30.0)
        state = StateFile(self.tmp / f"agent-{pool}.json")
        thread = AgentThread(Agent(api, executor, state, pool, options, clock=clock)).start()
        self.agents.append(thread)
        return thread

    def status(self, wid: int) -> str:
        return str(self.admin.get_workload(wid)["status"])

    def wait_status(self, wid: int, status: str, timeout: float = 10.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            w = self.admin.get_workload(wid)
            return w if w["status"] == status else None
        return wait_for(check, timeout, f"workload {wid} {status}")  # type: ignore[no-any-return]

    def submit(self, **spec: Any) -> int:
        spec.setdefault("name", "w")
        spec.setdefault("team", "nlp")
        spec.setdefault("class", "elastic")
        return int(self.admin.submit_workload(spec)["id"])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A control plane with pool ``main`` (grace 1 s), teams research/{nlp,vision}
    and production, and an agent token for ``main``. No agent runs yet."""
    server = LiveServer(tmp_path / "apportion.db")
    server.start()
    # request timeouts of 30 s: a loaded machine (parallel workers, other runs) answered
    # a plain POST in more than 5 s; a dead server still fails at once (refused)
    admin = ApportionClient(server.url, ADMIN_TOKEN, timeout=30.0)
    admin.create_pool("main", preemption_grace=1)
    token = admin.create_token("agent-main", "agent", pool="main")["token"]
    admin.create_team("research")
    admin.create_team("nlp", parent="research")
    admin.create_team("vision", parent="research")
    admin.create_team("production")
    c = Cluster(server, admin, token, tmp_path)
    try:
        yield c
    finally:
        for a in c.agents:
            a.halt()
            a.agent.executor.close()
        admin.close()
        server.stop()
