"""Accounting (``GET /v1/usage``) reconciled with the event log, and start-time
estimates (``GET /v1/workloads/{id}/eta``, ``GET /v1/eta``, the dry run), on
SQLite and PostgreSQL.

Time is a frozen ManualClock on whole seconds, so the scheduler's and the
agent's times are exactly the times of the events they write."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from apportion.service import eta as eta_service
from tests.api.conftest import Api, make_api
from tests.timing import ManualClock

START = float(int(time.time()))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def capi(backend_url: str, clock: ManualClock) -> Iterator[Api]:
    yield from make_api(backend_url, clock, agent_timeout=10 * 86400.0)  # time jumps here


def _t(stamp: str) -> float:
    """An API time (RFC 3339, whole seconds) as epoch seconds."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _report(api: Api, agent: dict[str, str], wid: int, status: str, attempt: int = 1) -> None:
    api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": wid, "attempt": attempt, "run_id": f"w{wid}-a{attempt}",
        "status": status})


def _events(api: Api) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = None
    while True:
        params: dict[str, Any] = {"type": "workload.status", "limit": 100}
        if token:
            params["next_token"] = token
        r = api.call("GET", "/v1/events", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        out += body["data"]
        token = body["metadata"].get("next_token")
        if not token:
            return out


def _recompute(api: Api, since: float, until: float) -> dict[tuple[str, str, str], dict[str, Any]]:
    """GPU-hours, preemptions, lost GPU-hours and wait percentiles per (team,
    user, pool), from the event log alone (plus each workload's size and
    submitter): an attempt holds its GPUs from its Starting event to its
    terminal event; a wait is a workload's first Starting event minus its
    Pending (submission) event."""
    spans: dict[tuple[int, int], dict[str, Any]] = {}
    submitted: dict[int, float] = {}
    for ev in sorted(_events(api), key=lambda e: e["id"]):
        key = (ev["workload_id"], ev["attempt"])
        at = _t(ev["at"])
        if ev["status"] == "Pending" and ev["attempt"] == 1:
            submitted[ev["workload_id"]] = at
        elif ev["status"] == "Starting":
            spans[key] = {"start": at, "end": None, "status": "Starting",
                          "pool": ev["data"]["pool"]}
        elif key in spans and ev["status"] != "Running":
            spans[key].update(end=at, status=ev["status"])
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (wid, attempt), sp in spans.items():
        w = api.workload(wid)
        row = out.setdefault((w["team"], w["submitted_by"], sp["pool"]), {
            "ms": {"reserved": 0.0, "elastic": 0.0}, "lost": 0.0, "preemptions": 0,
            "waits": []})
        milli = round(w["gpus"] * 1000)
        lo, hi = max(sp["start"], since), min(until if sp["end"] is None else sp["end"], until)
        row["ms"][w["class"]] += milli * max(0.0, hi - lo)
        if sp["status"] == "Preempted" and since <= sp["end"] < until:
            row["preemptions"] += 1
            row["lost"] += milli * (sp["end"] - sp["start"])
        if attempt == 1 and since <= sp["start"] < until:
            row["waits"].append(sp["start"] - submitted[wid])
    return out


def _nearest_rank(values: list[float], p: int) -> float | None:
    values = sorted(values)
    return values[math.ceil(p / 100 * len(values)) - 1] if values else None


def test_usage_reconciles_exactly_with_the_event_log(capi: Api, clock: ManualClock) -> None:
    api = capi
    agent = api.org()  # one 8-GPU node, grace 0
    member = api.token("vic", "member", teams=["vision"])
    api.ok("PUT", "/v1/reservations/production/main", json={"gpus": 8})
    a = api.submit(name="a", team="nlp", gpus=4)["id"]
    b = api.submit(member, name="b", team="vision", gpus=4, priority=10)["id"]
    clock.advance(100)
    api.cycle()
    _report(api, agent, a, "running")
    _report(api, agent, b, "running")
    clock.advance(600)
    _report(api, agent, a, "completed")
    c = api.submit(name="c", team="production", gpus=8, **{"class": "reserved"})["id"]
    clock.advance(50)
    api.cycle()
    api.cycle()
    assert api.workload(b)["status"] == "Preempted"
    assert api.workload(c)["status"] == "Starting"
    clock.advance(1000)
    since, until = START - 10, clock.now() + 10
    got = api.ok("GET", "/v1/usage", params={"since": _iso(since), "until": str(until),
                                             "group_by": "team,user,pool"})
    want = _recompute(api, since, until)
    assert {(r["team"], r["user"], r["pool"]) for r in got["rows"]} == set(want)
    for r in got["rows"]:
        w = want[(r["team"], r["user"], r["pool"])]
        assert r["reserved_gpu_hours"] == round(w["ms"]["reserved"] / 3_600_000, 6)
        assert r["elastic_gpu_hours"] == round(w["ms"]["elastic"] / 3_600_000, 6)
        assert r["lost_gpu_hours"] == round(w["lost"] / 3_600_000, 6)
        assert r["preemptions"] == w["preemptions"] and r["started"] == len(w["waits"])
        for p in (50, 95, 99):
            assert r[f"wait_p{p}_s"] == _nearest_rank(w["waits"], p)
    by_team = {r["team"]: r for r in got["rows"]}
    # the figures themselves, by hand: a ran 4 GPUs x 600 s; b 4 GPUs x 650 s, lost
    assert by_team["nlp"]["elastic_gpu_hours"] == round(4 * 600 / 3600, 6)
    assert by_team["vision"]["user"] == "vic" and by_team["vision"]["preemptions"] == 1
    assert by_team["vision"]["lost_gpu_hours"] == round(4 * 650 / 3600, 6)
    assert by_team["production"]["reserved_gpu_hours"] == round(8 * 1010 / 3600, 6)
    assert got["total"]["preemptions"] == 1 and got["total"]["started"] == 3
    # filters narrow the same numbers
    only = api.ok("GET", "/v1/usage", params={"since": since, "until": until, "user": "vic"})
    assert [(r["team"], r["lost_gpu_hours"]) for r in only["rows"]] == [
        ("vision", by_team["vision"]["lost_gpu_hours"])]


def test_usage_refuses_bad_input_naming_the_field(capi: Api) -> None:
    api = capi
    api.org()
    r = api.call("GET", "/v1/usage", params={"group_by": "team,project"})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"]["field"] == "group_by" and "team, user, pool" in err["message"]
    r = api.call("GET", "/v1/usage", params={"since": 200, "until": 100})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "since"
    r = api.call("GET", "/v1/usage", params={"until": "yesterday"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "until"
    r = api.call("GET", "/v1/usage", params={"pool": "mian"})
    assert r.status_code == 404 and "main" in r.text
    assert api.ok("GET", "/v1/usage")["rows"] == []


def _with_history(api: Api, clock: ManualClock) -> dict[str, str]:
    """The org, with one nlp workload that ran 8 GPUs for 1000 s and completed
    (the team's and the pool's finished runtime); returns the agent's headers."""
    agent = api.org()
    h = api.submit(name="history", team="nlp", gpus=8)["id"]
    api.cycle()
    _report(api, agent, h, "running")
    clock.advance(1000)
    _report(api, agent, h, "completed")
    return agent


def test_eta_of_a_waiting_workload_and_of_its_pool(capi: Api, clock: ManualClock) -> None:
    api = capi
    agent = _with_history(api, clock)  # nlp's (and the pool's) finished runtime: 1000 s
    a = api.submit(name="a", team="nlp", gpus=8)["id"]
    api.cycle()
    started = _t(api.workload(a)["started_at"])
    _report(api, agent, a, "running")
    clock.advance(100)
    b = api.submit(name="b", team="vision", gpus=8)["id"]
    api.cycle()
    assert api.workload(b)["status"] == "Queued"
    est = api.ok("GET", f"/v1/workloads/{b}/eta")
    assert est["start"] == _iso(started + 1000) and est["pool"] == "main"
    assert est["basis"] == "team_median" and "team's median" in est["assumption"]
    assert [(w["workload_id"], w["name"], w["ends_at"]) for w in est["waits_for"]] == [
        (a, "a", _iso(started + 1000))]
    runs = eta_service.CACHE.runs
    listed = api.ok("GET", "/v1/eta", params={"pool": "main"})
    assert eta_service.CACHE.runs == runs  # the pool's kept run answered
    assert [(e["workload_id"], e["start"]) for e in listed["estimates"]] == [
        (b, _iso(started + 1000))]
    assert listed["cycles"] >= 1
    running = api.ok("GET", f"/v1/workloads/{a}/eta")
    assert running["basis"] == "started" and running["start"] == _iso(started)
    # not submitted yet: behind b, which runs for the pool's median (vision has none)
    dry = api.ok("POST", "/v1/workloads/dry-run", json={"name": "d", "team": "vision",
                                                         "gpus": 8})
    assert dry["starts_now"] is False
    assert dry["eta"]["start"] == _iso(started + 2000) and dry["eta"]["basis"] == "pool_median"
    assert [w["workload_id"] for w in dry["eta"]["waits_for"]] == [b]
    r = api.call("GET", "/v1/eta", params={"pool": "mian"})
    assert r.status_code == 404 and "main" in r.text
    assert api.call("GET", "/v1/workloads/999999/eta").status_code == 404
    api.submit(name="later", team="vision", gpus=1)  # the snapshot changed: a new run
    api.ok("GET", "/v1/eta", params={"pool": "main"})
    assert eta_service.CACHE.runs == runs + 1


def test_eta_ends_running_work_at_its_time_limit(capi: Api, clock: ManualClock) -> None:
    """A running workload with a time limit ends, in the estimate, at its start
    plus its limit, ahead of any median (issue 16: "running work ends at its
    time limit"), and the estimate says so."""
    api = capi
    agent = _with_history(api, clock)  # a median of 1000 s that the limit must beat
    a = api.submit(name="a", team="nlp", gpus=8, time_limit=7200)["id"]
    api.cycle()
    started = _t(api.workload(a)["started_at"])
    _report(api, agent, a, "running")
    clock.advance(60)
    b = api.submit(name="b", team="vision", gpus=8)["id"]
    api.cycle()
    est = api.ok("GET", f"/v1/workloads/{b}/eta")
    assert est["start"] == _iso(started + 7200)
    assert est["basis"] == "time_limit" and "time limit" in est["assumption"]
    assert [(w["workload_id"], w["ends_at"]) for w in est["waits_for"]] == [
        (a, _iso(started + 7200))]
