"""Every write route hands the service a typed input (``service/inputs.py``),
built from a strict request model (issue 20). Seen from outside: on every route
family a boolean or a string where a number belongs, and an unknown field, are
a 422 naming the field (an unknown one with a did-you-mean), and nothing is
stored; and a PATCH changes only the fields it sends."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from tests.api.conftest import Api

#: (family, method, path, a valid body, the field made bad, the bad value)
ROUTES: list[tuple[str, str, str, dict[str, Any], str, object]] = [
    ("organization", "PATCH", "/v1/organizations/current", {"name": "Acme"}, "version", True),
    ("token", "POST", "/v1/tokens", {"name": "t", "role": "viewer"}, "expires_in_days", "3"),
    ("team", "POST", "/v1/teams", {"slug": "x"}, "bursting_priority", True),
    ("team", "PATCH", "/v1/teams/nlp", {"name": "NLP"}, "burst_limit_percent", "50"),
    ("reservation", "PUT", "/v1/reservations/nlp/main", {"gpus": 1}, "gpus", "1"),
    ("pool", "POST", "/v1/pools", {"name": "p2"}, "start_delay", True),
    ("pool", "PATCH", "/v1/pools/main", {"start_delay": 1}, "gpu_memory_mib", "81920"),
    ("heartbeat", "POST", "/v1/agent/heartbeat", {"nodes": [{"name": "n1", "gpus": 8}]},
     "nodes.0.gpus", True),
    ("report", "POST", "/v1/agent/reports",
     {"workload_id": 1, "attempt": 1, "status": "running"}, "attempt", "1"),
    ("log chunk", "POST", "/v1/agent/logs",
     {"workload_id": 1, "attempt": 1, "offset": 0, "data": ""}, "offset", False),
]

#: (family, method, path, a valid body, a misspelt key, the key meant)
TYPOS: list[tuple[str, str, str, dict[str, Any], str, str]] = [
    ("organization", "PATCH", "/v1/organizations/current", {}, "nme", "name"),
    ("organization", "POST", "/v1/organizations", {"slug": "o2"}, "nam", "name"),
    ("token", "POST", "/v1/tokens", {"name": "t", "role": "viewer"}, "expires_in_day",
     "expires_in_days"),
    ("team", "PATCH", "/v1/teams/nlp", {}, "parnt", "parent"),
    ("reservation", "PUT", "/v1/reservations/nlp/main", {"gpus": 1}, "versoin", "version"),
    ("pool", "POST", "/v1/pools", {"name": "p2"}, "packng", "packing"),
    ("pool", "PATCH", "/v1/pools/main", {}, "preemption_grce", "preemption_grace"),
    ("heartbeat", "POST", "/v1/agent/heartbeat", {}, "node", "nodes"),
    ("report", "POST", "/v1/agent/reports",
     {"workload_id": 1, "attempt": 1, "status": "running"}, "pods_runing", "pods_running"),
    ("log chunk", "POST", "/v1/agent/logs",
     {"workload_id": 1, "attempt": 1, "offset": 0, "data": ""}, "run", "run_id"),
]

AGENT_PATHS = ("/v1/agent/heartbeat", "/v1/agent/reports", "/v1/agent/logs")


def _set(body: dict[str, Any], dotted: str, value: object) -> dict[str, Any]:
    """A copy of ``body`` with the field at ``dotted`` (``nodes.0.gpus``) set to ``value``."""
    out = copy.deepcopy(body)
    here: Any = out
    keys: list[Any] = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    for key in keys[:-1]:
        here = here[key]
    here[keys[-1]] = value
    return out


def _state(api: Api) -> list[Any]:
    """What the routes above could change, as a reader sees it."""
    return [api.ok("GET", path) for path in (
        "/v1/organizations/current", "/v1/teams", "/v1/reservations", "/v1/pools",
        "/v1/nodes", "/v1/workloads")] + [
        [{k: v for k, v in t.items() if k != "last_used_at"} for t in api.ok("GET", "/v1/tokens")]]


def _error(r: Any) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    assert set(r.json()) == {"error", "request_id"}
    err: dict[str, Any] = r.json()["error"]
    assert err["code"] == "VALIDATION_ERROR"
    return err


def test_a_flag_or_a_string_for_a_number_is_refused_on_every_route_family(api: Api) -> None:
    agent = api.org()
    families = set()
    for family, method, path, body, field, bad in ROUTES:
        headers = agent if path in AGENT_PATHS else None
        before = _state(api)
        err = _error(api.call(method, path, headers, json=_set(body, field, bad)))
        shown = field.replace(".0.", "[0].")
        assert err["details"]["field"] == shown, (family, err)
        assert err["message"].startswith(f"{shown}: must be "), (family, err)
        assert repr(bad) in err["message"], (family, err)
        assert _state(api) == before, family
        families.add(family)
    assert len(families) == 8


def test_an_unknown_field_is_refused_with_a_did_you_mean_on_every_route_family(api: Api
                                                                            ) -> None:
    agent = api.org()
    for family, method, path, body, typo, meant in TYPOS:
        headers = agent if path in AGENT_PATHS else None
        before = _state(api)
        err = _error(api.call(method, path, headers, json={**body, typo: 1}))
        assert err["details"]["field"] == typo, (family, err)
        assert err["message"].startswith(f"{typo}: unknown key; did you mean {meant!r}?"), (
            family, err)
        assert meant in err["details"]["allowed"], (family, err)
        assert _state(api) == before, family


def test_a_team_patch_changes_only_the_fields_it_sends(api: Api) -> None:
    api.org()
    api.ok("PATCH", "/v1/teams/nlp", json={"name": "NLP", "burst_limit_percent": 50})
    team = api.ok("PATCH", "/v1/teams/nlp", json={"bursting_priority": 4})
    assert (team["name"], team["parent"], team["bursting_priority"],
            team["burst_limit_percent"]) == ("NLP", "research", 4, 50)
    # a field sent as null is a change: unlimited bursting, then the top level
    team = api.ok("PATCH", "/v1/teams/nlp", json={"burst_limit_percent": None})
    assert (team["burst_limit_percent"], team["parent"]) == (None, "research")
    team = api.ok("PATCH", "/v1/teams/nlp", json={"parent": None})
    assert (team["parent"], team["name"], team["bursting_priority"]) == (None, "NLP", 4)
    # a null where a value is needed is refused, naming the field; nothing changes
    err = _error(api.call("PATCH", "/v1/teams/nlp", json={"bursting_priority": None}))
    assert err["details"]["field"] == "bursting_priority"
    assert api.ok("GET", "/v1/teams/nlp")["bursting_priority"] == 4


def test_a_pool_patch_changes_only_the_fields_it_sends(api: Api) -> None:
    api.ok("POST", "/v1/pools", json={"name": "p", "topology": ["zone", "rack"],
                                      "preemption_grace": 30, "packing": "best_fit",
                                      "typical_pods": [{"gpus": 2, "count": 3}]})
    pool = api.ok("PATCH", "/v1/pools/p", json={"start_delay": 5})
    assert (pool["start_delay"], pool["preemption_grace"], pool["topology"],
            pool["packing"], pool["gpu_memory_mib"]) == (5, 30, ["zone", "rack"],
                                                         "best_fit", 81920)
    assert pool["typical_pods"] == [{"gpus": 2, "count": 3, "cpu": 0, "memory_mib": 0}]
    # typical_pods sent as null: back to the default prior (a whole node of each size)
    pool = api.ok("PATCH", "/v1/pools/p", json={"typical_pods": None})
    assert pool["typical_pods"] is None and pool["start_delay"] == 5
    err = _error(api.call("PATCH", "/v1/pools/p", json={"packing": None}))
    assert err["details"]["field"] == "packing"
    assert api.ok("GET", "/v1/pools/p")["packing"] == "best_fit"


def test_an_organization_patch_without_a_name_keeps_it(api: Api) -> None:
    api.ok("PATCH", "/v1/organizations/current", json={"name": "Acme"})
    org = api.ok("PATCH", "/v1/organizations/current", json={})
    assert org["name"] == "Acme"
    err = _error(api.call("PATCH", "/v1/organizations/current", json={"name": None}))
    assert err["details"]["field"] == "name"
    assert api.ok("GET", "/v1/organizations/current")["name"] == "Acme"


def test_a_heartbeat_without_nodes_keeps_the_inventory_and_with_an_empty_list_ends_it(
        api: Api) -> None:
    agent = api.org(nodes=2)
    api.ok("POST", "/v1/agent/heartbeat", agent, json={})
    assert {n["name"]: n["state"] for n in api.ok("GET", "/v1/nodes")} == {
        "n1": "ready", "n2": "ready"}
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": [{"name": "n1", "gpus": 8}]})
    assert {n["name"]: n["state"] for n in api.ok("GET", "/v1/nodes")} == {
        "n1": "ready", "n2": "down"}
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": []})
    assert {n["state"] for n in api.ok("GET", "/v1/nodes")} == {"down"}


def test_typed_agent_inputs_reach_the_service_whole(api: Api) -> None:
    """A report's fields and a log chunk's bytes arrive as sent (typed, not a dict)."""
    agent = api.org()
    wid = api.submit(team="nlp", gpus=1)["id"]
    api.cycle()
    run_id = f"w{wid}-a1"
    report = api.ok("POST", "/v1/agent/reports", agent, json={
        "workload_id": wid, "attempt": 1, "run_id": run_id, "status": "running"})
    assert report["accepted"] and report["status"] == "Running"
    chunk = api.ok("POST", "/v1/agent/logs", agent, json={
        "workload_id": wid, "attempt": 1, "run_id": run_id, "pod": 0, "offset": 0,
        "data": base64.b64encode(b"hello\n").decode()})
    assert chunk["accepted"] and chunk["next_offset"] == 6
    r = api.call("GET", f"/v1/workloads/{wid}/logs")
    assert r.text == "hello\n"
    # a wrong run id is refused, naming it, and the log is unchanged
    err = _error(api.call("POST", "/v1/agent/logs", agent, json={
        "workload_id": wid, "attempt": 1, "run_id": "w0-a9", "offset": 6,
        "data": base64.b64encode(b"x").decode()}))
    assert err["details"]["field"] == "run_id"
    assert api.call("GET", f"/v1/workloads/{wid}/logs").text == "hello\n"


@pytest.mark.parametrize("role", ["viewer", "org_admin"])
def test_a_pool_body_is_checked_before_permissions_like_every_body(api: Api, role: str
                                                                   ) -> None:
    """The prior's domain rules (0.25 GPU steps) are now checked where the body
    is read, with the strict types, so a viewer's bad body is a 422 as for an
    admin (it was a 403 for a viewer: the service checked the role first)."""
    headers = api.admin if role == "org_admin" else api.token("v", "viewer")
    r = api.call("POST", "/v1/pools", headers,
                 json={"name": "p", "typical_pods": [{"gpus": 0.3}]})
    err = _error(r)
    assert err["details"]["field"] == "typical_pods[0].gpus"
    assert api.ok("GET", "/v1/pools") == []
