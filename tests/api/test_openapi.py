"""The OpenAPI document is the contract (issue 20): every operation declares what
it answers, with the content type it is served with (JSON, the SSE stream, the
plain-text logs and metrics), and the error envelope for its 4xx; and every
4xx a client can provoke is that envelope."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apportion.api.schemas import ErrorBody
from tests.api.conftest import Api, bearer, make_api

ERRORS = ("400", "401", "403", "404", "409", "422", "429")
TEXT = {("get", "/v1/events/stream"): "text/event-stream",
        ("get", "/v1/workloads/{workload_id}/logs"): "text/plain",
        ("get", "/metrics"): "text/plain"}


def _operations(api: Api) -> Iterator[tuple[str, str, dict[str, Any]]]:
    spec = api.client.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            yield method, path, op


def test_every_operation_declares_its_body_and_content_type(api: Api) -> None:
    seen = 0
    for method, path, op in _operations(api):
        ok = [code for code in op["responses"] if code.startswith("2")]
        assert len(ok) == 1, (method, path, ok)
        content = op["responses"][ok[0]].get("content", {})
        want = TEXT.get((method, path), "application/json")
        assert list(content) == [want], (method, path, list(content))
        schema = content[want].get("schema", {})
        assert schema.get("$ref") or schema.get("type"), (method, path, schema)
        seen += 1
    assert seen >= 46


def test_every_v1_operation_declares_the_error_envelope(api: Api) -> None:
    for method, path, op in _operations(api):
        if not path.startswith("/v1/"):
            continue
        for code in ERRORS:
            schema = op["responses"][code]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, code)


def test_health_metrics_stream_and_logs_are_served_as_documented(api: Api) -> None:
    spec = api.client.get("/openapi.json").json()
    health = spec["paths"]["/healthz"]["get"]["responses"]
    assert health["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/HealthRead")
    assert health["503"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/HealthRead")
    stream = spec["paths"]["/v1/events/stream"]["get"]["responses"]["200"]
    event = stream["content"]["text/event-stream"]["schema"]
    assert event["properties"]["data"]["contentSchema"] == {
        "$ref": "#/components/schemas/EventRead"}
    logs = spec["paths"]["/v1/workloads/{workload_id}/logs"]["get"]["responses"]["200"]
    assert set(logs["headers"]) == {"X-Log-Attempt", "X-Log-Next-Offset"}

    r = api.client.get("/healthz")
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert (body["status"], body["database"]) == ("ok", "ok")
    assert set(body) == {"status", "database", "scheduler", "process"}
    assert set(body["scheduler"]) == {"leader", "last_cycle_at"}
    r = api.client.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    agent = api.org()
    wid = api.submit(team="nlp", gpus=1)["id"]
    r = api.call("GET", "/v1/events/stream", params={"follow": "false"})
    assert r.headers["content-type"].startswith("text/event-stream")
    assert f'"workload_id": {wid}' in r.text
    api.cycle()
    api.ok("POST", "/v1/agent/logs", agent, json={
        "workload_id": wid, "attempt": 1, "offset": 0, "data": "aGkK"})
    r = api.call("GET", f"/v1/workloads/{wid}/logs")
    assert r.headers["content-type"].startswith("text/plain")
    assert (r.text, r.headers["X-Log-Attempt"], r.headers["X-Log-Next-Offset"]) == (
        "hi\n", "1", "3")


def _envelope(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, (status, r.text)
    assert r.headers["content-type"] == "application/json", r.headers
    body: dict[str, Any] = r.json()
    assert set(body) == {"error", "request_id"}, body
    ErrorBody.model_validate(body)
    assert body["request_id"] == r.headers["x-request-id"]
    assert "Traceback" not in r.text
    return body["error"]


def test_every_4xx_from_a_sample_of_bad_requests_is_the_envelope(api: Api) -> None:
    api.org()
    viewer = api.token("v", "viewer")
    version = api.ok("GET", "/v1/teams/nlp")["version"]
    sample: list[tuple[int, str, str, dict[str, str] | None, dict[str, Any], str]] = [
        (400, "GET", "/v1/nodes?state=bogus", None, {}, "BAD_REQUEST"),
        (400, "GET", "/v1/workloads?next_token=zzz", None, {}, "BAD_REQUEST"),
        (401, "GET", "/v1/workloads", {}, {}, "UNAUTHENTICATED"),
        (401, "GET", "/v1/workloads", bearer("apt_nobodynobody_" + "x" * 32), {},
         "UNAUTHENTICATED"),
        (403, "POST", "/v1/teams", viewer, {"json": {"slug": "x"}}, "FORBIDDEN"),
        (404, "GET", "/v1/workloads/999", None, {}, "NOT_FOUND"),
        (404, "GET", "/v1/teams/nobody", None, {}, "NOT_FOUND"),
        (404, "GET", "/v1/no-such-route", None, {}, "NOT_FOUND"),
        (405, "DELETE", "/v1/workloads", None, {}, "METHOD_NOT_ALLOWED"),
        (409, "PATCH", "/v1/teams/nlp", None, {"json": {"name": "n", "version": version + 5}},
         "VERSION_CONFLICT"),
        (409, "POST", "/v1/teams", None, {"json": {"slug": "nlp"}}, "CONFLICT"),
        (422, "POST", "/v1/workloads", None, {"json": {}}, "VALIDATION_ERROR"),
        (400, "POST", "/v1/teams", None, {"content": b"{not json",
                                          "headers": {**api.admin,
                                                      "content-type": "application/json"}},
         "BAD_REQUEST"),
    ]
    for status, method, path, headers, kw, code in sample:
        if "headers" in kw:
            r = api.client.request(method, path, **kw)
        else:
            r = api.call(method, path, headers, **kw)
        err = _envelope(r, status)
        assert err["message"], (method, path)
        if code:
            assert err["code"] == code, (method, path, err)


@pytest.fixture
def limited(backend_url: str) -> Iterator[Api]:
    yield from make_api(backend_url, rate_limit=0.01, rate_burst=3, max_body_bytes=1024)


def test_too_large_and_rate_limited_requests_are_the_envelope(limited: Api) -> None:
    r = limited.client.post("/v1/teams", content=b"x" * 4096,
                            headers={**limited.admin, "content-type": "application/json"})
    assert _envelope(r, 413)["code"] == "PAYLOAD_TOO_LARGE"
    assert limited.ok("GET", "/v1/teams") == []
    for _ in range(3):
        r = limited.call("GET", "/v1/teams")
    err = _envelope(r, 429)
    assert err["code"] == "RATE_LIMITED"
    assert int(r.headers["retry-after"]) >= 1
