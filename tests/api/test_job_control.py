"""Job control through the REST API (issue 16), on SQLite and PostgreSQL:
time limits, hold and release, dependencies, arrays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import Api, make_api
from tests.timing import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def capi(backend_url: str, clock: ManualClock) -> Iterator[Api]:
    yield from make_api(backend_url, clock)


def _run(api: Api, agent: dict[str, str], wid: int) -> dict[str, Any]:
    """The agent reports the workload's start decision running; its decision."""
    start = [d for d in api.ok("GET", "/v1/agent/decisions", agent)
             if d["workload_id"] == wid and d["kind"] == "start"][-1]
    api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": wid, "attempt": start["attempt"], "run_id": start["run_id"],
        "status": "running"})
    return dict(start)


def _reason(api: Api, wid: int) -> str | None:
    r = api.workload(wid)["reason"]
    return None if r is None else str(r["code"])


# -- time limits ------------------------------------------------------------------------
def test_a_run_past_its_time_limit_fails_with_reason_time_limit(
    capi: Api, clock: ManualClock
) -> None:
    api = capi
    agent = api.org()
    api.ok("PATCH", "/v1/pools/main", json={"preemption_grace": 30})
    w = api.submit(name="t", team="nlp", gpus=1, time_limit=3600)
    assert w["spec"]["time_limit"] == 3600
    api.cycle()
    start = _run(api, agent, w["id"])
    assert start["exec"]["time_limit"] == 3600  # the agent knows it (its own fallback)
    clock.advance(3000)
    api.cycle()
    assert api.workload(w["id"])["status"] == "Running"
    clock.advance(601)
    api.cycle()
    got = api.workload(w["id"])
    assert got["status"] == "Failed" and got["reason"]["code"] == "TIME_LIMIT"
    assert "1h" in got["reason"]["message"]
    stops = [d for d in api.ok("GET", "/v1/agent/decisions", agent)
             if d["workload_id"] == w["id"] and d["kind"] == "stop"]
    assert [(d["reason"], d["grace_seconds"]) for d in stops] == [("time_limit", 30)]


def test_requeue_on_timeout_starts_a_new_attempt(capi: Api, clock: ManualClock) -> None:
    api = capi
    agent = api.org()
    w = api.submit(name="t", team="nlp", gpus=1, time_limit=60, requeue_on_timeout=True)
    api.cycle()
    _run(api, agent, w["id"])
    clock.advance(61)
    api.cycle()
    got = api.workload(w["id"])
    assert got["attempt"] == 2 and got["status"] in ("Pending", "Queued", "Starting")
    assert got["attempts"][0]["status"] == "Failed"


def test_the_pool_default_applies_and_the_maximum_is_enforced(
    capi: Api, clock: ManualClock
) -> None:
    api = capi
    agent = api.org()
    pool = api.ok("PATCH", "/v1/pools/main",
                  json={"default_time_limit": 120, "max_time_limit": 600})
    assert (pool["default_time_limit"], pool["max_time_limit"]) == (120, 600)
    r = api.call("POST", "/v1/workloads", json={"name": "big", "team": "nlp", "gpus": 1,
                                                 "time_limit": 601})
    assert r.status_code == 422
    err = r.json()["error"]
    assert "time_limit" in r.text and "600" in err["message"]
    w = api.submit(name="d", team="nlp", gpus=1)
    api.cycle()
    assert _run(api, agent, w["id"])["exec"]["time_limit"] == 120
    clock.advance(121)
    api.cycle()
    assert api.workload(w["id"])["reason"]["code"] == "TIME_LIMIT"


@pytest.mark.parametrize("bad", [0, -5, "1h", 1.5, True])
def test_time_limit_must_be_integer_seconds(api: Api, bad: object) -> None:
    api.org()
    r = api.call("POST", "/v1/workloads", json={"name": "x", "team": "nlp", "gpus": 1,
                                                 "time_limit": bad})
    assert r.status_code == 422 and "time_limit" in r.text
    assert api.ok("GET", "/v1/workloads") == []


# -- hold and release -------------------------------------------------------------------
def test_hold_and_release(api: Api) -> None:
    api.org()
    w = api.submit(name="h", team="nlp", gpus=1, hold=True)
    assert w["held"] is True and w["reason"]["code"] == "HELD"
    api.cycle()
    got = api.workload(w["id"])
    assert got["status"] == "Pending" and got["reason"]["code"] == "HELD"
    rel = api.ok("POST", f"/v1/workloads/{w['id']}/release")
    assert rel["held"] is False
    api.cycle()
    assert api.workload(w["id"])["status"] == "Starting"
    r = api.call("POST", f"/v1/workloads/{w['id']}/hold")  # no longer waiting
    assert r.status_code == 409 and "Starting" in r.text


def test_hold_a_waiting_workload_and_releasing_twice_is_a_conflict(api: Api) -> None:
    api.org(gpus_per_node=1)
    api.submit(name="big", team="nlp", gpus=1)
    w = api.submit(name="w", team="nlp", gpus=1)
    api.cycle()
    assert api.workload(w["id"])["status"] == "Queued"
    api.ok("POST", f"/v1/workloads/{w['id']}/hold")
    api.cycle()
    assert _reason(api, w["id"]) == "HELD"
    api.ok("POST", f"/v1/workloads/{w['id']}/release")
    r = api.call("POST", f"/v1/workloads/{w['id']}/release")
    assert r.status_code == 409 and "not held" in r.text
    events = [e["type"] for e in api.ok("GET", f"/v1/workloads/{w['id']}/events")]
    assert "workload.held" in events and "workload.released" in events


def test_only_the_owner_or_a_team_lead_may_hold(api: Api) -> None:
    api.org()
    alice = api.token("alice", "member", ["nlp"])
    bob = api.token("bob", "member", ["nlp"])
    lead = api.token("lead", "team_lead", ["research"])
    w = api.submit(alice, name="a", team="nlp", gpus=1)
    assert api.call("POST", f"/v1/workloads/{w['id']}/hold", bob).status_code == 403
    assert api.ok("POST", f"/v1/workloads/{w['id']}/hold", lead)["held"] is True
    assert api.ok("POST", f"/v1/workloads/{w['id']}/release", alice)["held"] is False


# -- dependencies -----------------------------------------------------------------------
def test_a_dependent_waits_then_runs_after_its_dependency_completes(api: Api) -> None:
    agent = api.org()
    a = api.submit(name="a", team="nlp", gpus=1)
    b = api.submit(name="b", team="nlp", gpus=1, after=[{"id": a["id"], "condition": "ok"}])
    assert b["spec"]["after"] == [{"id": a["id"], "condition": "ok"}]
    api.cycle()
    got = api.workload(b["id"])
    assert got["status"] == "Pending" and got["reason"]["code"] == "DEPENDENCY"
    assert str(a["id"]) in got["reason"]["message"]
    start = _run(api, agent, a["id"])
    api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": a["id"], "attempt": 1, "run_id": start["run_id"], "status": "completed"})
    api.cycle()
    assert api.workload(b["id"])["status"] == "Starting"


def test_a_dependency_that_can_never_be_met_cancels_with_a_reason(api: Api) -> None:
    api.org()
    a = api.submit(name="a", team="nlp", gpus=1)
    ok = api.submit(name="ok", team="nlp", gpus=1, after=[{"id": a["id"]}])
    notok = api.submit(name="notok", team="nlp", gpus=1,
                       after=[{"id": a["id"], "condition": "notok"}])
    anyc = api.submit(name="any", team="nlp", gpus=1,
                      after=[{"id": a["id"], "condition": "any"}])
    api.ok("POST", f"/v1/workloads/{a['id']}/cancel")
    api.cycle()
    got = api.workload(ok["id"])
    assert got["status"] == "Cancelled"
    assert got["reason"]["code"] == "DEPENDENCY_NEVER_SATISFIED"
    assert f"workload {a['id']} ended Cancelled" in got["reason"]["message"]
    events = api.ok("GET", f"/v1/workloads/{ok['id']}/events")
    assert "DependencyNeverSatisfied" in events[-1]["message"]
    assert api.workload(notok["id"])["status"] == "Starting"
    assert api.workload(anyc["id"])["status"] == "Starting"


@pytest.mark.parametrize("after", [[{"id": 999999}], [{"id": 1, "condition": "maybe"}],
                                   [{"id": 0}], [{"id": 1}, {"id": 1}]])
def test_bad_dependencies_are_refused_and_nothing_is_stored(api: Api, after: Any) -> None:
    api.org()
    before = api.ok("GET", "/v1/workloads")
    r = api.call("POST", "/v1/workloads", json={"name": "d", "team": "nlp", "gpus": 1,
                                                 "after": after})
    assert r.status_code == 422 and "after" in r.text, r.text
    assert api.ok("GET", "/v1/workloads") == before


def test_a_workload_cannot_depend_on_itself_its_id_does_not_exist_yet(api: Api) -> None:
    api.org()
    a = api.submit(name="a", team="nlp", gpus=1)
    r = api.call("POST", "/v1/workloads", json={"name": "self", "team": "nlp", "gpus": 1,
                                                 "after": [{"id": a["id"] + 1}]})
    assert r.status_code == 422 and f"workload {a['id'] + 1} does not exist" in r.text


# -- arrays -----------------------------------------------------------------------------
def test_an_array_makes_members_with_index_and_limit(api: Api) -> None:
    agent = api.org()
    first = api.submit(name="sweep", team="nlp", gpus=1, array="0-9%3")
    aid = first["array_id"]
    assert first["id"] == aid and first["array_index"] == 0 and first["array_size"] == 10
    members = api.ok("GET", "/v1/workloads", params={"array": aid, "limit": 100})
    assert [m["array_index"] for m in members] == list(range(10))
    assert [m["name"] for m in members][:2] == ["sweep[0]", "sweep[1]"]
    api.cycle()
    members = api.ok("GET", "/v1/workloads", params={"array": aid, "limit": 100})
    assert [m["status"] for m in members].count("Starting") == 3
    assert {m["reason"]["code"] for m in members if m["status"] == "Pending"} == {"ARRAY_LIMIT"}
    start = _run(api, agent, members[0]["id"])
    env = start["exec"]["env"]
    assert (env["APPORTION_ARRAY_ID"], env["APPORTION_ARRAY_INDEX"]) == (str(aid), "0")


def test_cancel_by_array(api: Api) -> None:
    api.org()
    first = api.submit(name="s", team="nlp", gpus=1, array="1,3,5-7")
    api.cycle()
    out = api.ok("POST", f"/v1/arrays/{first['array_id']}/cancel")
    assert out["members"] == 5 and len(out["cancelled"]) == 5
    members = api.ok("GET", "/v1/workloads", params={"array": first["array_id"]})
    assert {m["status"] for m in members} == {"Cancelled"}
    assert api.call("POST", "/v1/arrays/999999/cancel").status_code == 404


def test_an_array_cancel_with_a_version_is_refused_and_cancels_nothing(api: Api) -> None:
    """An array has no version: a ``version`` was accepted and never checked, so a
    client that sent one believed it guarded the cancel. Now a 422 naming it."""
    api.org()
    first = api.submit(name="s", team="nlp", gpus=1, array="0-2")
    r = api.call("POST", f"/v1/arrays/{first['array_id']}/cancel",
                 json={"version": first["version"], "message": "stale view"})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert "version" in str(error) and "message" in str(error), error
    members = api.ok("GET", "/v1/workloads", params={"array": first["array_id"]})
    assert len(members) == 3 and "Cancelled" not in {m["status"] for m in members}
    out = api.ok("POST", f"/v1/arrays/{first['array_id']}/cancel", json={"message": "done"})
    assert len(out["cancelled"]) == 3


@pytest.mark.parametrize(("array", "text"), [("0-10000", "10000"), ("5-1", "not a valid"),
                                             ("x", "not an index"), ("0-3%0", "limit")])
def test_bad_arrays_are_refused(api: Api, array: str, text: str) -> None:
    api.org()
    r = api.call("POST", "/v1/workloads", json={"name": "a", "team": "nlp", "gpus": 1,
                                                 "array": array})
    assert r.status_code == 422 and "array" in r.text and text in r.text, r.text
    assert api.ok("GET", "/v1/workloads") == []


def test_dry_run_says_a_held_or_dependent_submission_would_wait(api: Api) -> None:
    api.org()
    a = api.submit(name="a", team="nlp", gpus=1)
    held = api.ok("POST", "/v1/workloads/dry-run",
                  json={"name": "h", "team": "nlp", "gpus": 1, "hold": True})
    assert held["starts_now"] is False and held["reason"]["code"] == "HELD"
    dep = api.ok("POST", "/v1/workloads/dry-run",
                 json={"name": "d", "team": "nlp", "gpus": 1, "after": [{"id": a["id"]}]})
    assert dep["starts_now"] is False and dep["reason"]["code"] == "DEPENDENCY"
    free = api.ok("POST", "/v1/workloads/dry-run", json={"name": "f", "team": "nlp", "gpus": 1})
    assert free["starts_now"] is True
    r = api.call("POST", "/v1/workloads/dry-run",
                 json={"name": "d", "team": "nlp", "gpus": 1, "after": [{"id": 999}]})
    assert r.status_code == 422 and "after[0].id" in r.text
