"""The event feed: list, filters, and the SSE stream resumed with Last-Event-ID."""

from __future__ import annotations

import json

from tests.api.conftest import Api


def _sse(text: str) -> list[dict[str, object]]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(":"))
        if "data" in fields:
            out.append({"id": int(fields["id"]), "event": fields["event"],
                        "data": json.loads(fields["data"])})
    return out


def test_events_stream_resumes_from_last_event_id(api: Api) -> None:
    api.org()
    w = api.submit(name="a", team="nlp", gpus=1)
    api.cycle()
    r = api.client.get("/v1/events/stream", headers=api.admin, params={"follow": "false"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    first = _sse(r.text)
    assert [e["data"]["status"] for e in first if e["data"]["workload_id"] == w["id"]] == [
        "Pending", "Queued", "Starting"]
    # every status event names its workload (submit, cycle and cancel alike)
    assert {e["data"]["data"]["name"] for e in first if e["event"] == "workload.status"} == {"a"}
    last = first[-1]["id"]
    api.ok("POST", f"/v1/workloads/{w['id']}/cancel")
    r = api.client.get("/v1/events/stream", headers={**api.admin, "Last-Event-ID": str(last)},
                       params={"follow": "false"})
    resumed = _sse(r.text)
    assert resumed and all(e["id"] > last for e in resumed)
    assert [(e["data"]["status"], e["data"]["data"]["name"]) for e in resumed
            if e["event"] == "workload.status"] == [("Cancelled", "a")]
    listed = api.ok("GET", "/v1/events", params={"after": last})
    assert [e["id"] for e in listed] == [e["id"] for e in resumed]


def test_members_see_only_their_teams_events(api: Api) -> None:
    api.org()
    member = api.token("m", "member", ["nlp"])
    api.submit(name="a", team="nlp", gpus=1)
    api.submit(name="b", team="production", gpus=1)
    mine = api.ok("GET", "/v1/events", member, params={"type": "workload.status"})
    everything = api.ok("GET", "/v1/events", params={"type": "workload.status"})
    assert len(everything) == 2 and len(mine) == 1
    r = api.client.get("/v1/events/stream", headers=member, params={"follow": "false"})
    assert len([e for e in _sse(r.text) if e["event"] == "workload.status"]) == 1
