"""The typed client against a fake transport (httpx.MockTransport): envelopes, errors,
pages, SSE, the newest-event search. The real server is exercised by the other files."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from apportion.client import ApiError, ApportionClient, ServerUnreachable, paginate, parse_sse


def fake(handler: Callable[[httpx.Request], httpx.Response]) -> ApportionClient:
    return ApportionClient("http://fake", "apt_x_y", transport=httpx.MockTransport(handler))


def ok(data: object, **metadata: object) -> httpx.Response:
    return httpx.Response(200, json={"data": data, "metadata": metadata, "request_id": "r1"})


def test_success_is_unwrapped_and_sends_auth_and_request_id() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return ok({"slug": "nlp"})

    assert fake(handler).get_team("nlp") == {"slug": "nlp"}
    assert seen[0].headers["Authorization"] == "Bearer apt_x_y"
    assert seen[0].headers["X-Request-Id"]
    assert seen[0].url.path == "/v1/teams/nlp"


def test_error_body_becomes_api_error() -> None:
    body = {"error": {"code": "NOT_FOUND", "message": "team 'x' not found",
                      "details": {"kind": "team", "name": "x"}}, "request_id": "abc"}
    client = fake(lambda r: httpx.Response(404, json=body))
    with pytest.raises(ApiError) as info:
        client.get_team("x")
    err = info.value
    assert (err.status, err.code, err.message, err.request_id) == (404, "NOT_FOUND",
                                                                  "team 'x' not found", "abc")
    assert err.details == {"kind": "team", "name": "x"}


def test_non_json_error_still_an_api_error() -> None:
    client = fake(lambda r: httpx.Response(502, text="Bad Gateway"))
    with pytest.raises(ApiError) as info:
        client.list_pools()
    assert info.value.status == 502 and info.value.code == "HTTP_502"


def test_connection_refused_is_server_unreachable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with pytest.raises(ServerUnreachable, match="connection refused"):
        fake(handler).token_self()


def test_paginate_follows_next_token_and_filters_are_sent() -> None:
    pages = {None: ([{"id": 1}, {"id": 2}], "2"), "2": ([{"id": 3}], None)}
    queries: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        query = dict(request.url.params)
        queries.append(query)
        items, nxt = pages[query.get("next_token")]
        return ok(items, next_token=nxt, total_count=3)

    client = fake(handler)
    ids = [w["id"] for w in paginate(client.list_workloads, status=["Pending", "Queued"],
                                     class_="elastic")]
    assert ids == [1, 2, 3]
    assert queries[0]["status"] == "Pending,Queued" and queries[0]["class"] == "elastic"
    assert queries[0]["limit"] == "100"


def test_idempotency_key_and_if_match_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return ok({})

    client = fake(handler)
    client.submit_workload({"name": "a"}, idempotency_key="k1")
    client.update_team("nlp", {"burst_limit_percent": None}, version=3)
    assert seen[0].headers["Idempotency-Key"] == "k1"
    assert seen[1].headers["If-Match"] == "3"
    assert json.loads(seen[1].content) == {"burst_limit_percent": None}


def test_parse_sse_blocks_comments_and_multiline_data() -> None:
    lines = ["retry: 2000", "", ": keep-alive", "", "id: 7", "event: workload.status",
             'data: {"id": 7,', 'data: "type": "workload.status"}', "", "data: plain", ""]
    events = list(parse_sse(lines))
    assert [(e.id, e.type) for e in events] == [("7", "workload.status"), ("7", "message")]
    assert events[0].data == {"id": 7, "type": "workload.status"}
    assert events[1].data == "plain"


def test_stream_events_sends_last_event_id() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        text = 'id: 5\nevent: workload.status\ndata: {"id": 5}\n\n'
        return httpx.Response(200, text=text, headers={"Content-Type": "text/event-stream"})

    events = list(fake(handler).stream_events(last_event_id=4, follow=False))
    assert [e.data for e in events] == [{"id": 5}]
    assert seen[0].headers["Last-Event-ID"] == "4"
    assert seen[0].url.params["follow"] == "false"


@pytest.mark.parametrize("ids", [[], [1], [1, 2, 3], [4, 9, 10, 300], list(range(1, 70))])
def test_latest_event_id_searches_with_after(ids: list[int]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        after = int(request.url.params.get("after", 0))
        return ok([{"id": i} for i in ids if i > after][:1])

    assert fake(handler).latest_event_id() == max(ids, default=0)


def test_agent_decisions_cursor_is_next_token() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.params["cursor"] == "4" and request.url.params["wait"] == "1"
        return ok([{"id": 5, "kind": "start"}], next_token=5)

    page = fake(handler).agent_decisions(4, wait=1)
    assert page.items[0]["kind"] == "start" and page.next_token == 5
