"""Dashboard tests: page-level ones through the FastAPI TestClient (on SQLite
and PostgreSQL), browser ones against a real server (see browser.py)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
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
        # a live agent heartbeats all along: without it, a test that runs more
        # than agent_timeout (60 s) after the session's demo database was made
        # finds the nodes swept to ``unknown`` and nothing starts
        self.demo.heartbeat()
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


def _open_site(url: str, demo: Demo | None) -> Iterator[Site]:
    control = ControlPlane(Settings(database_url=url, bootstrap_token=ADMIN_TOKEN,
                                    run_scheduler=False, rate_limit=0.0))
    control.start()
    app = create_app(control=control)
    try:
        with TestClient(app, raise_server_exceptions=False) as api:
            if demo is None:
                s = Site(app, control, api, build(api_call(api)))
                s.cycle()
            else:
                s = Site(app, control, api, replace(demo, call=api_call(api),
                                                    ids=dict(demo.ids),
                                                    tokens=dict(demo.tokens),
                                                    reported=set(demo.reported)))
            yield s
    finally:
        control.stop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Demo]]:
    """The demo organization built once in an SQLite file; each test gets a copy."""
    path = tmp_path_factory.mktemp("web-template") / "apportion.db"
    for s in _open_site(f"sqlite:///{path}", None):
        demo = s.demo
    yield path, demo


@pytest.fixture
def site(sqlite_template: tuple[Path, Demo], tmp_path: Path) -> Iterator[Site]:
    """A server app (TestClient) on a fresh copy of the demo database (SQLite)."""
    template, demo = sqlite_template
    shutil.copy(template, tmp_path / "apportion.db")
    yield from _open_site(f"sqlite:///{tmp_path / 'apportion.db'}", demo)


@pytest.fixture(scope="session")
def ro_site(sqlite_template: tuple[Path, Demo], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Site]:
    """One copy of the demo database shared by the tests that change nothing."""
    template, demo = sqlite_template
    path = tmp_path_factory.mktemp("web-ro") / "apportion.db"
    shutil.copy(template, path)
    yield from _open_site(f"sqlite:///{path}", demo)


@pytest.fixture
def any_site(backend_url: str) -> Iterator[Site]:  # noqa: F811
    """The demo organization built fresh on SQLite and on PostgreSQL."""
    yield from _open_site(backend_url, None)


# -- browser tests -------------------------------------------------------------------
@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, need_chromium

    need_chromium()
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def live(tmp_path: Any, browser: Any) -> Iterator[Any]:
    """A fresh real server with the demo organization (one per test: any order)."""
    from tests.web.browser import start_server

    yield from start_server(tmp_path)


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    """One real server with the demo organization for tests that only look."""
    from tests.web.browser import start_server

    yield from start_server(tmp_path_factory.mktemp("web-shared"))


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Any:
    """The server of this test: ``live`` if it asked for one, else ``shared``."""
    name = "live" if "live" in request.fixturenames else "shared"
    return request.getfixturevalue(name)


@pytest.fixture
def page(browser: Any, server: Any) -> Iterator[Any]:
    """A new browser context (no cookies) at 1280 x 800 on the test's server."""
    from tests.web.browser import TIMEOUT_MS

    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=server.url)
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"script errors on the page: {errors}"
