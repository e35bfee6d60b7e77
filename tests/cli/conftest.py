"""CLI tests run ``apportion`` as a user would (Typer's CliRunner, in-process) against a
real control plane: uvicorn in a thread on a free port, SQLite in a temp dir, the
scheduler loop on. Each test gets its own organization, so tests never see each other's
teams or workloads. Every wait is bounded."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner, Result

from apportion.api.app import create_app
from apportion.cli.main import app
from apportion.client import ApportionClient
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from tests.netutil import bound_socket, port_of
from tests.timing import wait_until

BOOTSTRAP_TOKEN = "apt_clitests0001_" + "c" * 32
_org_numbers = itertools.count(1)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` every 50 ms until truthy; fail after ``timeout`` s."""
    return wait_until(predicate, timeout=timeout, what=what)


@contextlib.contextmanager
def live_server(directory: Path, agent_timeout: float = 60.0) -> Iterator[str]:
    """A control plane with its SQLite database in ``directory``; yields its URL.
    ``agent_timeout``: a fixture that heartbeats once and lives long (a module's
    snapshot) raises it, or its nodes would turn ``unknown`` mid-module."""
    db = directory / "apportion.db"
    settings = Settings(database_url=f"sqlite:///{db}", bootstrap_token=BOOTSTRAP_TOKEN,
                        cycle_interval=0.2, cycle_min_gap=0.02, rate_limit=0.0,
                        agent_timeout=agent_timeout)
    control = ControlPlane(settings)
    control.start()
    sock = bound_socket()  # handed to uvicorn: no window for another process to take it
    port = port_of(sock)
    server = uvicorn.Server(uvicorn.Config(create_app(control=control), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 20, "server up")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        control.stop()


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("server")) as url:
        yield url


@dataclass
class Org:
    """A fresh organization on the live server, and a CLI runner logged in to it."""

    url: str
    admin_token: str
    config: Path
    admin: ApportionClient

    def env(self, token: str | None = None, **extra: str) -> dict[str, str]:
        return {"APPORTION_CONFIG": str(self.config), "APPORTION_SERVER": self.url,
                "APPORTION_TOKEN": token or self.admin_token, "COLUMNS": "120",
                "NO_COLOR": "1", **extra}

    def cli(self, *args: str, token: str | None = None, input: str | None = None,
            env: dict[str, str] | None = None) -> Result:
        """Run ``apportion ARGS`` as this org's admin (or with ``token``)."""
        return CliRunner().invoke(app, list(args), env=env or self.env(token), input=input)

    def ok(self, *args: str, token: str | None = None) -> str:
        result = self.cli(*args, token=token)
        assert result.exit_code == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def token(self, name: str, role: str, teams: list[str] | None = None,
              pool: str | None = None) -> str:
        return str(self.admin.create_token(name, role, teams=teams, pool=pool)["token"])

    def add_pool(self, pool: str = "main", nodes: int = 2, gpus: int = 8,
                 labels: Callable[[int], dict[str, str]] | None = None) -> ApportionClient:
        """Register ``nodes`` nodes through an agent heartbeat; returns the agent client."""
        agent = ApportionClient(self.url, self.token(f"agent-{pool}", "agent", pool=pool))
        inventory = [{"name": f"{pool[0]}{i}", "gpus": gpus, "gpu_type": "h100",
                      "gpu_memory_mib": 81920, "labels": labels(i) if labels else {},
                      "health": "ready"} for i in range(1, nodes + 1)]
        agent.agent_heartbeat(pool, inventory, agent_version="test")
        return agent

    def wait_status(self, wid: int, *statuses: str, timeout: float = 10.0) -> dict[str, Any]:
        return wait_for(lambda: (w := self.admin.get_workload(wid))["status"] in statuses
                        and w, timeout, f"workload {wid} in {statuses}")

    def run(self, agent: ApportionClient, wid: int) -> None:
        """Report a Starting workload as running, as its agent would."""
        w = self.wait_status(wid, "Starting", "Running")
        if w["status"] == "Starting":
            agent.agent_report(wid, w["attempt"], f"w{wid}-a{w['attempt']}", "running")
        self.wait_status(wid, "Running")


@contextlib.contextmanager
def new_org(server_url: str, tmp_path: Path, slug: str | None = None) -> Iterator[Org]:
    """A new organization ``slug`` (default ``cli<n>``, numbered in creation order)."""
    if slug is None:
        slug = f"cli{next(_org_numbers)}"
    with ApportionClient(server_url, BOOTSTRAP_TOKEN) as root:
        created = root.create_organization(slug, f"CLI test {slug}")
    token = created["admin_token"]["token"]
    with ApportionClient(server_url, token) as admin:
        yield Org(server_url, token, tmp_path / "config.yaml", admin)


@pytest.fixture
def org(server_url: str, tmp_path: Path) -> Iterator[Org]:
    with new_org(server_url, tmp_path) as o:
        yield o


def seed_org(org: Org) -> ApportionClient:
    """The tour's organization: research (nlp, vision) and production on a 2 x 4 GPU pool.

    Returns the pool's agent client."""
    agent = org.add_pool("main", nodes=2, gpus=4, labels=lambda i: {"rack": f"r{i}"})
    org.admin.create_team("research", bursting_priority=3)
    org.admin.create_team("nlp", parent="research", bursting_priority=2)
    org.admin.create_team("vision", parent="research")
    org.admin.create_team("production", burst_limit_percent=50)
    org.admin.set_reservation("research", "main", 4)
    org.admin.set_reservation("nlp", "main", 3)
    org.admin.set_reservation("production", "main", 2)
    return agent


def submit(org: Org, name: str, team: str, gpus: float, **extra: Any) -> int:
    """Submit through the API (setup, not the thing under test); returns the id."""
    body = {"name": name, "team": team, "gpus": gpus, **extra}
    return int(org.admin.submit_workload(body)["id"])
