"""Hostile input (issue 18, part 6): the agent endpoints get duplicated,
out-of-order and forged reports (another pool's runs, another organization's
token), and the server gets oversized bodies and slow clients. Each gets a
clear answer in the error envelope, changes nothing it may not, and each
denial is in the audit log. Reports on SQLite and PostgreSQL; the raw-socket
cases against a real uvicorn server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apportion.api.app import create_app
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from tests.api.conftest import ADMIN_TOKEN, Api, bearer
from tests.api.conftest import api as api
from tests.chaos.figures import record
from tests.netutil import bound_socket, port_of
from tests.pgfixture import backend_url, pg_server  # noqa: F401
from tests.timing import wait_until

pytestmark = pytest.mark.chaos


def _running(api: Api) -> tuple[dict[str, str], int]:
    """Pool main with one node; one workload Starting (decided, not yet reported)."""
    agent = api.org()
    wid = int(api.submit(team="nlp", gpus=1)["id"])
    api.cycle()
    assert api.workload(wid)["status"] == "Starting"
    return agent, wid


def _report(api: Api, agent: dict[str, str], wid: int, status: str, attempt: int = 1,
            run_id: str | None = None) -> Any:
    return api.call("POST", "/v1/agent/reports", agent, json={
        "workload_id": wid, "attempt": attempt, "run_id": run_id or f"w{wid}-a{attempt}",
        "status": status})


def _events(api: Api, wid: int) -> list[str]:
    return [e["status"] for e in api.ok("GET", f"/v1/workloads/{wid}/events")
            if e["type"] == "workload.status"]


def _audit(api: Api, outcome: str) -> list[dict[str, Any]]:
    return list(api.ok("GET", "/v1/audit", params={"outcome": outcome, "limit": 100}))


def test_a_duplicated_report_is_applied_once(api: Api) -> None:
    agent, wid = _running(api)
    first = _report(api, agent, wid, "running")
    again = _report(api, agent, wid, "running")
    assert first.status_code == again.status_code == 200
    assert again.json()["data"]["note"] == "already applied"
    assert _events(api, wid).count("Running") == 1


def test_out_of_order_reports_end_where_the_last_real_one_says(api: Api) -> None:
    # "completed" overtakes "running" (two HTTP requests racing): the workload
    # runs and completes; the late "running" is ignored and audited.
    agent, wid = _running(api)
    assert _report(api, agent, wid, "completed").status_code == 200
    late = _report(api, agent, wid, "running")
    assert late.status_code == 200 and late.json()["data"]["accepted"] is False
    assert api.workload(wid)["status"] == "Completed"
    assert _events(api, wid) == ["Pending", "Queued", "Starting", "Running", "Completed"]
    ignored = [a for a in _audit(api, "ignored") if a["object"] == f"workload/{wid}"]
    assert ignored, "the late report is not in the audit log"


def test_forged_reports_change_nothing_and_are_audited(api: Api) -> None:
    agent, wid = _running(api)
    # a run id that is not this attempt's (a forged or confused agent)
    forged = _report(api, agent, wid, "failed", run_id="w424242-a1")
    assert forged.status_code == 200 and forged.json()["data"]["accepted"] is False
    # another pool's agent
    api.ok("POST", "/v1/pools", json={"name": "other"})
    other = api.token("agent-other", "agent", pool="other")
    r = _report(api, other, wid, "failed")
    assert r.status_code == 403 and r.json()["error"]["code"], r.text
    # another organization's agent, for a pool of the same name
    made = api.ok("POST", "/v1/organizations", json={"slug": "rival", "name": "Rival"})
    rival_admin = bearer(made["admin_token"]["token"])
    api.ok("POST", "/v1/pools", rival_admin, json={"name": "main"})
    rival_agent = bearer(api.ok("POST", "/v1/tokens", rival_admin, json={
        "name": "agent-main", "role": "agent", "teams": [], "pool": "main"})["token"])
    r = _report(api, rival_agent, wid, "failed")
    assert r.status_code == 404, r.text  # another org's workload does not exist for it
    assert api.workload(wid)["status"] == "Starting"  # none of them changed it
    denied = _audit(api, "denied")
    assert any(a["action"] == "agent.report" for a in denied), denied
    assert any(f"workload/{wid}" == a["object"] for a in _audit(api, "ignored"))


# -- oversized bodies and slow clients, against a real server ----------------------------
class Live:
    def __init__(self, url: str, control: ControlPlane) -> None:
        self.url = url
        self.control = control
        self.port = int(url.rsplit(":", 1)[1])


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    import uvicorn

    control = ControlPlane(Settings(
        database_url=f"sqlite:///{tmp_path / 'apportion.db'}", bootstrap_token=ADMIN_TOKEN,
        run_scheduler=False, rate_limit=0.0, max_body_bytes=64 * 1024, body_timeout=1.0))
    control.start()
    sock = bound_socket()
    server = uvicorn.Server(uvicorn.Config(create_app(control=control), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=30, what="the server to start")
        yield Live(f"http://127.0.0.1:{port_of(sock)}", control)
    finally:
        server.should_exit = True
        thread.join(15)
        control.stop()
        sock.close()


def _refusals(live: Live) -> list[str]:
    """The status of each audited refusal (anonymous entries: read from the store)."""
    from sqlalchemy import select

    from apportion.store.models import AuditRow

    with live.control.db.read() as s:
        rows = s.scalars(select(AuditRow).where(AuditRow.action == "request.refused")
                         .order_by(AuditRow.id))
        return [str(r.message).split(":")[0] for r in rows]


def _stored(live: Live) -> int:
    with httpx.Client(base_url=live.url, headers=bearer(ADMIN_TOKEN), timeout=30) as c:
        return int(c.get("/v1/workloads").json()["metadata"]["total_count"] or 0)


def test_an_oversized_body_is_refused_and_nothing_is_stored(live: Live) -> None:
    big = {"name": "big", "team": "t", "gpus": 1, "env": {"X": "y" * 100_000}}
    with httpx.Client(base_url=live.url, headers=bearer(ADMIN_TOKEN), timeout=30) as c:
        c.post("/v1/teams", json={"slug": "t"}).raise_for_status()
        r = c.post("/v1/workloads", json=big)
        assert r.status_code == 413, r.text
        err = r.json()["error"]
        assert err["code"] == "PAYLOAD_TOO_LARGE" and "65536 bytes" in err["message"]
        # the same without a Content-Length (chunked): cut off once past the limit
        chunks = (b"x" * 8192 for _ in range(20))
        r = c.post("/v1/workloads", content=chunks,
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 413, r.text
    assert _refusals(live) == ["413", "413"]  # refused before authentication: no org
    assert _stored(live) == 0
    record("6. hostile input", "sqlite", "a body over the limit (declared, and chunked): 413 "
           "twice, audited; 0 stored", refused=2, stored=0)


def test_a_slow_client_is_cut_off_and_does_not_hold_up_others(live: Live) -> None:
    body = b'{"name": "slow", "team": "t", "gpus": 1}'
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as slow:
        started = time.monotonic()  # before the server can start its timer
        slow.sendall(b"POST /v1/workloads HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + ADMIN_TOKEN.encode() + b"\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:10])
        # meanwhile everyone else is served
        with httpx.Client(base_url=live.url, timeout=30) as c:
            assert c.get("/healthz").status_code == 200
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            data = slow.recv(4096)  # the server answers and closes (bounded by timeout=30)
            if not data:
                break
            answer += data
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"REQUEST_TIMEOUT" in answer
    assert waited >= 0.9  # the configured second without a byte, not an instant refusal
    assert _refusals(live) == ["408"]
    assert _stored(live) == 0
    record("6. hostile input", "sqlite", f"a slow-loris body: 408 after {waited:.1f} s, "
           "audited, other clients served meanwhile; 0 stored", refused=1, stored=0)
