"""API tests run the real app (FastAPI TestClient) on SQLite and PostgreSQL.

The scheduler loop thread is off; tests run cycles explicitly with
``api.cycle()`` so every outcome is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient

from apportion.api.app import create_app
from apportion.clock import SYSTEM_CLOCK, Clock
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from tests.pgfixture import backend_url, pg_server  # noqa: F401

ADMIN_TOKEN = "apt_adminadmin01_" + "s" * 32


@dataclass
class Api:
    client: TestClient
    control: ControlPlane
    admin: dict[str, str] = field(default_factory=lambda: bearer(ADMIN_TOKEN))

    def call(self, method: str, path: str, headers: dict[str, str] | None = None,
             **kw: Any) -> Any:
        head = self.admin if headers is None else headers
        return self.client.request(method, path, headers=head, **kw)

    def ok(self, method: str, path: str, headers: dict[str, str] | None = None,
           **kw: Any) -> Any:
        r = self.call(method, path, headers, **kw)
        assert r.status_code < 300, r.text
        return r.json()["data"]

    def token(self, name: str, role: str, teams: list[str] | None = None,
              pool: str | None = None) -> dict[str, str]:
        body = {"name": name, "role": role, "teams": teams or [], "pool": pool}
        return bearer(self.ok("POST", "/v1/tokens", json=body)["token"])

    def cycle(self) -> int:
        return self.control.loop.tick()

    def submit(self, headers: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
        spec.setdefault("name", "w")
        data: dict[str, Any] = self.ok("POST", "/v1/workloads", headers, json=spec)
        return data

    def workload(self, wid: int) -> dict[str, Any]:
        data: dict[str, Any] = self.ok("GET", f"/v1/workloads/{wid}")
        return data

    def org(self, gpus_per_node: int = 8, nodes: int = 1) -> dict[str, str]:
        """Pool ``main`` with ``nodes`` nodes, teams research/{nlp,vision} and
        production; returns the agent's headers."""
        self.ok("POST", "/v1/pools", json={"name": "main", "preemption_grace": 0})
        agent = self.token("agent-main", "agent", pool="main")
        self.ok("POST", "/v1/agent/heartbeat", agent, json={
            "nodes": [{"name": f"n{i}", "gpus": gpus_per_node} for i in range(1, nodes + 1)]})
        for body in ({"slug": "research"}, {"slug": "nlp", "parent": "research"},
                     {"slug": "vision", "parent": "research"}, {"slug": "production"}):
            self.ok("POST", "/v1/teams", json=body)
        return agent


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_api(url: str, clock: Clock = SYSTEM_CLOCK, **settings: Any) -> Iterator[Api]:
    """The app on ``url``; ``clock`` drives the scheduler loop, the silence sweep,
    heartbeat stamps and the rate limiter (a ``ManualClock`` lets a test make time pass)."""
    base: dict[str, Any] = {"database_url": url, "bootstrap_token": ADMIN_TOKEN,
                            "run_scheduler": False, "rate_limit": 0.0}
    base.update(settings)
    control = ControlPlane(Settings(**base), clock)
    control.start()
    app = create_app(control=control)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Api(client, control)
    finally:
        control.stop()


@pytest.fixture
def api(backend_url: str) -> Iterator[Api]:  # noqa: F811
    yield from make_api(backend_url)
