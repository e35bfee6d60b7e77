"""Dashboard tests: page-level ones through the FastAPI TestClient (on SQLite
and PostgreSQL), browser ones against a real server (see browser.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from apportion.api.app import create_app
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from tests.pgfixture import backend_url, pg_server  # noqa: F401
from tests.web.demo import ADMIN_TOKEN, Demo, bearer, build

CSRF_INPUT = re.compile(r'name="csrf" value="([^"]+)"')


def login(app: FastAPI, token: str) -> TestClient:
    """A browser-like client logged in through the login form."""
    client = TestClient(app, raise_server_exceptions=False, follow_redirects=False)
    page = client.get("/login")
    nonce = CSRF_INPUT.search(page.text)
    assert page.status_code == 200 and nonce, page.text
    r = client.post("/login", data={"token": token, "csrf": nonce.group(1), "next": "/"})
    assert r.status_code == 303, r.text
    return client


def csrf_of(html: str) -> str:
    m = CSRF_INPUT.search(html)
    assert m, "no CSRF field on the page"
    return m.group(1)


@dataclass
class Site:
    app: FastAPI
    control: ControlPlane
    api: TestClient
    demo: Demo

    def cycle(self) -> None:
        self.control.loop.tick()
        self.demo.report_running()
        self.control.loop.tick()

    def as_admin(self) -> TestClient:
        return login(self.app, ADMIN_TOKEN)

    def as_token(self, name: str, role: str, teams: list[str] | None = None) -> TestClient:
        return login(self.app, self.demo.token(name, role, teams))


def api_call(client: TestClient) -> Any:
    def call(method: str, path: str, headers: dict[str, str] | None = None,
             json: Any = None) -> Any:
        r = client.request(method, path, headers=headers or bearer(ADMIN_TOKEN), json=json)
        assert r.status_code < 300, f"{method} {path}: {r.text}"
        return r.json()["data"]

    return call


@pytest.fixture
def site(backend_url: str) -> Iterator[Site]:  # noqa: F811
    control = ControlPlane(Settings(database_url=backend_url, bootstrap_token=ADMIN_TOKEN,
                                    run_scheduler=False, rate_limit=0.0))
    control.start()
    app = create_app(control=control)
    try:
        with TestClient(app, raise_server_exceptions=False) as api:
            s = Site(app, control, api, build(api_call(api)))
            s.cycle()
            yield s
    finally:
        control.stop()
