"""API conventions: envelope, request ids, idempotency, pagination, optimistic
concurrency, validation errors (field-named, nothing stored), rate limits."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.conftest import Api, make_api
from tests.timing import ManualClock


def _count(api: Api) -> int:
    r = api.call("GET", "/v1/workloads", params={"limit": 1})
    return int(r.json()["metadata"]["total_count"])


def test_envelope_and_request_id(api: Api) -> None:
    r = api.call("GET", "/v1/teams", headers={**api.admin, "X-Request-Id": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    body = r.json()
    assert body["request_id"] == "abc-123" and body["data"] == []
    assert body["metadata"] == {"next_token": None, "total_count": 0}
    r = api.call("GET", "/v1/workloads/999")
    assert r.status_code == 404 and r.headers["x-request-id"] == r.json()["request_id"]
    assert r.json()["error"] == {"code": "NOT_FOUND", "message": "workload '999' not found",
                                 "details": {"kind": "workload", "name": "999"}}
    assert api.call("GET", "/v1/nothing-here").json()["error"]["code"] == "NOT_FOUND"


def test_openapi_and_docs(api: Api) -> None:
    spec = api.client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert "/v1/workloads" in spec["paths"] and "/v1/agent/decisions" in spec["paths"]
    assert api.client.get("/docs").status_code == 200
    assert api.client.get("/healthz").json()["status"] == "ok"


def test_idempotency_key(api: Api) -> None:
    api.org()
    body = {"name": "once", "team": "nlp", "gpus": 1}
    h = {**api.admin, "Idempotency-Key": "k-1"}
    first = api.call("POST", "/v1/workloads", h, json=body)
    again = api.call("POST", "/v1/workloads", h, json=body)
    assert first.status_code == again.status_code == 201
    assert first.json()["data"] == again.json()["data"]
    assert again.headers.get("idempotent-replayed") == "true"
    assert _count(api) == 1
    other = api.call("POST", "/v1/workloads", h, json={**body, "gpus": 2})
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert _count(api) == 1
    api.call("POST", "/v1/workloads", {**api.admin, "Idempotency-Key": "k-2"}, json=body)
    assert _count(api) == 2


def test_pagination_and_filters(api: Api) -> None:
    api.org()
    member = api.token("alice", "member", ["nlp"])
    ids = [api.submit(member, name=f"w{i}", team="nlp", gpus=1)["id"] for i in range(5)]
    ids += [api.submit(name="p", team="production", gpus=1, **{"class": "reserved"})["id"]]
    seen, token = [], None
    while True:
        params = {"limit": 2, **({"next_token": token} if token else {})}
        body = api.call("GET", "/v1/workloads", params=params).json()
        assert body["metadata"]["total_count"] == 6
        seen += [w["id"] for w in body["data"]]
        token = body["metadata"]["next_token"]
        if token is None:
            break
    assert seen == ids
    assert len(api.ok("GET", "/v1/workloads", params={"team": "research"})) == 5
    assert len(api.ok("GET", "/v1/workloads", params={"submitted_by": "alice"})) == 5
    assert len(api.ok("GET", "/v1/workloads", params={"class": "reserved"})) == 1
    assert len(api.ok("GET", "/v1/workloads", params={"status": "Pending,Queued"})) == 6
    assert api.ok("GET", "/v1/workloads", params={"submitted_after": "2999-01-01T00:00:00Z"}
                  ) == []
    for bad in ({"limit": 0}, {"limit": 101}, {"next_token": "zzz"}, {"status": "Sleeping"}):
        r = api.call("GET", "/v1/workloads", params=bad)
        assert r.status_code == 400, bad
        assert r.json()["error"]["details"]["field"]


def test_optimistic_concurrency(api: Api) -> None:
    api.org()
    team = api.ok("GET", "/v1/teams/nlp")
    v = team["version"]
    updated = api.ok("PATCH", "/v1/teams/nlp", json={"bursting_priority": 3, "version": v})
    assert updated["version"] == v + 1
    stale = api.call("PATCH", "/v1/teams/nlp", json={"bursting_priority": 5, "version": v})
    assert stale.status_code == 409
    err = stale.json()["error"]
    assert err["code"] == "VERSION_CONFLICT" and err["details"]["current_version"] == v + 1
    assert api.ok("GET", "/v1/teams/nlp")["bursting_priority"] == 3
    stale_hdr = api.call("PATCH", "/v1/teams/nlp", {**api.admin, "If-Match": str(v)},
                         json={"name": "x"})
    assert stale_hdr.status_code == 409
    w = api.submit(name="x", team="nlp", gpus=1)
    r = api.call("POST", f"/v1/workloads/{w['id']}/cancel", json={"version": w["version"] + 7})
    assert r.status_code == 409
    assert api.workload(w["id"])["status"] == "Pending"


@pytest.mark.parametrize(
    ("body", "field", "allowed_part"),
    [
        pytest.param({"gpus": 0.3}, "gpus", "0.25", id="fraction"),
        pytest.param({"gpus": 1.5}, "gpus", "whole number", id="one-and-a-half"),
        pytest.param({"gpus": 1, "gpu_memory_mib": 100}, "gpus", "exactly one", id="both"),
        pytest.param({"gpus": -1}, "gpus", "0.25", id="negative"),
        pytest.param({"gpus": 1, "class": "gold"}, "class", "reserved", id="class"),
        pytest.param({"gpus": 1, "priority": 150}, "priority", "0-99", id="elastic-priority"),
        pytest.param({"gpus": 1, "pods": 2, "min_pods": 3}, "min_pods", "1..pods", id="min"),
        pytest.param({"gpus": 1, "team": "research"}, "team", "leaf", id="not-leaf"),
        pytest.param({"gpus": 1, "team": "ghost"}, "team", "existing", id="no-team"),
        pytest.param({"gpus": 1, "colour": "red"}, "colour", None, id="unknown-field"),
        pytest.param({"gpus": 1, "topology": {"level": "rack", "mode": "maybe"}},
                     "topology.mode", None, id="topology-mode"),
        pytest.param({"gpus": 1, "pods": "many"}, "pods", None, id="pods-type"),
    ],
)
def test_validation_errors_name_the_field_and_store_nothing(
    validation_api: Api, body: dict[str, object], field: str, allowed_part: str | None
) -> None:
    api = validation_api
    before = _count(api)
    r = api.call("POST", "/v1/workloads", json={"name": "bad", "team": "nlp", **body})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "VALIDATION_ERROR"
    assert err["details"]["field"] == field
    assert field in err["message"]
    if allowed_part:
        assert allowed_part in (err["details"]["allowed"] or "")
    assert _count(api) == before


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def validation_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    """One server per backend for the whole table of validation cases."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('val')}/a.db"
    else:
        url = request.getfixturevalue("pg_server").create_database()
    for api in make_api(url):
        api.org()
        yield api


def test_bad_json_is_400(api: Api) -> None:
    r = api.call("POST", "/v1/workloads", {**api.admin, "Content-Type": "application/json"},
                 content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "BAD_REQUEST"


def test_reservation_rules_are_enforced_with_numbers(api: Api) -> None:
    api.org(gpus_per_node=8)
    r = api.call("PUT", "/v1/reservations/research/main", json={"gpus": 9})
    assert r.status_code == 422 and r.json()["error"]["code"] == "RESERVATION_INVALID"
    assert "capacity of 8" in r.json()["error"]["message"]
    api.ok("PUT", "/v1/reservations/research/main", json={"gpus": 6})
    r = api.call("PUT", "/v1/reservations/nlp/main", json={"gpus": 7})
    assert r.status_code == 422 and "reserves only 6" in r.json()["error"]["message"]
    assert api.ok("GET", "/v1/reservations", params={"team": "nlp"}) == []


def test_team_tree_operations(api: Api) -> None:
    api.org()
    api.ok("PATCH", "/v1/teams/vision", json={"parent": "production", "name": "Vision"})
    assert api.ok("GET", "/v1/teams/production")["children"] == ["vision"]
    r = api.call("PATCH", "/v1/teams/research", json={"parent": "nlp"})
    assert r.status_code == 422  # a cycle
    api.submit(name="x", team="nlp", gpus=1)
    r = api.call("POST", "/v1/teams", json={"slug": "sub", "parent": "nlp"})
    assert r.status_code == 409  # nlp holds workloads
    assert api.call("DELETE", "/v1/teams/research").status_code == 409  # has children
    assert api.call("DELETE", "/v1/teams/vision").status_code == 200
    assert api.call("GET", "/v1/teams/vision").status_code == 404


def test_rate_limit_429(backend_url: str) -> None:
    clock = ManualClock()  # the bucket refills only when the test lets time pass
    for api in make_api(backend_url, clock, rate_limit=1.0, rate_burst=3.0):
        codes = [api.call("GET", "/v1/teams").status_code for _ in range(5)]
        assert codes == [200, 200, 200, 429, 429]
        r = api.call("GET", "/v1/teams")
        assert r.json()["error"]["code"] == "RATE_LIMITED" and int(r.headers["retry-after"]) >= 1
        clock.advance(1.0)  # one token back at 1 request/s
        assert [api.call("GET", "/v1/teams").status_code for _ in range(2)] == [200, 429]


def test_idempotency_key_under_concurrent_retries(api: Api) -> None:
    import threading

    api.org()
    h = {**api.admin, "Idempotency-Key": "race"}
    body = {"name": "raced", "team": "nlp", "gpus": 1}
    results: list[tuple[int, int]] = []

    def post() -> None:
        r = api.call("POST", "/v1/workloads", h, json=body)
        results.append((r.status_code, r.json()["data"]["id"]))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {code for code, _ in results} == {201}
    assert len({wid for _, wid in results}) == 1
    assert _count(api) == 1


def test_short_lists_paginate_too(api: Api) -> None:
    api.org()
    for i in range(5):
        api.ok("POST", "/v1/teams", json={"slug": f"extra-{i}"})
    seen, token = [], None
    while True:
        params = {"limit": 3, **({"next_token": token} if token else {})}
        body = api.call("GET", "/v1/teams", params=params).json()
        assert body["metadata"]["total_count"] == 9
        seen += [t["slug"] for t in body["data"]]
        token = body["metadata"]["next_token"]
        if token is None:
            break
    assert len(seen) == 9 == len(set(seen))
