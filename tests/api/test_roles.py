"""Role x endpoint matrix: who may do what (docs/api.md, "Authentication and roles").

One table; each row is (method, path, body, expected status per role). The test
runs every row for every role and reports every mismatch at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.api.conftest import Api, bearer

ROLES = ("admin", "lead", "member", "viewer", "agent")
Body = dict[str, Any] | Callable[[str], dict[str, Any]] | None


def _row(method: str, path: str, body: Body, *codes: int) -> tuple[str, str, Body, dict[str, int]]:
    return method, path, body, dict(zip(ROLES, codes, strict=True))


#                                                      admin lead member viewer agent
MATRIX = [
    _row("GET", "/v1/teams", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/pools", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/nodes", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/capacity/teams", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/capacity/pools", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/reservations", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/workloads", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/events", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/workloads/{prod}", None, 200, 200, 403, 200, 403),
    _row("GET", "/v1/workloads/{mine}", None, 200, 200, 200, 200, 403),
    _row("GET", "/v1/audit", None, 200, 403, 403, 403, 403),
    _row("GET", "/v1/tokens", None, 200, 403, 403, 403, 403),
    _row("GET", "/v1/tokens/self", None, 200, 200, 200, 200, 200),
    _row("GET", "/v1/organizations/current", None, 200, 200, 200, 200, 200),
    _row("POST", "/v1/teams", lambda r: {"slug": f"sub-{r}", "parent": "research"},
         201, 201, 403, 403, 403),
    _row("POST", "/v1/teams", lambda r: {"slug": f"top-{r}"}, 201, 403, 403, 403, 403),
    _row("PATCH", "/v1/teams/vision", {"bursting_priority": 2}, 200, 200, 403, 403, 403),
    _row("PATCH", "/v1/teams/research", {"name": "R"}, 200, 403, 403, 403, 403),
    _row("PUT", "/v1/reservations/vision/main", {"gpus": 1}, 200, 200, 403, 403, 403),
    _row("PUT", "/v1/reservations/research/main", {"gpus": 4}, 200, 403, 403, 403, 403),
    _row("POST", "/v1/workloads", {"name": "a", "team": "nlp", "gpus": 1},
         201, 201, 201, 403, 403),
    _row("POST", "/v1/workloads", {"name": "b", "team": "production", "gpus": 1},
         201, 403, 403, 403, 403),
    _row("POST", "/v1/workloads/dry-run", {"name": "b", "team": "nlp", "gpus": 1},
         200, 200, 200, 403, 403),
    _row("POST", "/v1/pools", lambda r: {"name": f"pool-{r}"}, 201, 403, 403, 403, 403),
    _row("POST", "/v1/nodes/n1/cordon", None, 200, 403, 403, 403, 403),
    _row("POST", "/v1/tokens", lambda r: {"name": f"t-{r}", "role": "viewer"},
         201, 403, 403, 403, 403),
    _row("POST", "/v1/agent/heartbeat", {"nodes": [{"name": "n1", "gpus": 8}]},
         403, 403, 403, 403, 200),
    _row("GET", "/v1/agent/decisions", None, 403, 403, 403, 403, 200),
    _row("POST", "/v1/organizations", lambda r: {"slug": f"org-{r}"}, 201, 403, 403, 403, 403),
]


def test_role_endpoint_matrix(api: Api) -> None:
    agent = api.org()
    api.ok("PUT", "/v1/reservations/research/main", json={"gpus": 4})
    heads = {
        "admin": api.admin,
        "lead": api.token("lead", "team_lead", ["research"]),
        "member": api.token("mem", "member", ["nlp"]),
        "viewer": api.token("view", "viewer"),
        "agent": agent,
    }
    ids = {"prod": api.submit(name="p", team="production", gpus=1)["id"],
           "mine": api.submit(heads["member"], name="m", team="nlp", gpus=1)["id"]}
    wrong = []
    for method, path, body, expected in MATRIX:
        for role in ROLES:
            payload = body(role) if callable(body) else body
            r = api.call(method, path.format(**ids), heads[role], json=payload)
            if r.status_code != expected[role]:
                wrong.append(f"{role:6} {method} {path}: {r.status_code} != {expected[role]} "
                             f"{r.text[:120]}")
    assert not wrong, "\n".join(wrong)
    denied = api.ok("GET", "/v1/audit", params={"outcome": "denied", "limit": 100})
    assert denied and all(a["actor"] and a["token_id"] and a["request_id"] for a in denied)


def test_members_list_only_their_teams(api: Api) -> None:
    api.org()
    member = api.token("mem", "member", ["nlp"])
    api.submit(name="n", team="nlp", gpus=1)
    api.submit(name="p", team="production", gpus=1)
    assert [w["team"] for w in api.ok("GET", "/v1/workloads", member)] == ["nlp"]
    assert api.ok("GET", "/v1/workloads", member, params={"team": "production"}) == []
    assert len(api.ok("GET", "/v1/workloads", api.token("v", "viewer"))) == 2


def test_cancel_rights(api: Api) -> None:
    api.org()
    member = api.token("mem", "member", ["nlp"])
    member2 = api.token("mem2", "member", ["nlp"])
    lead = api.token("lead", "team_lead", ["research"])
    viewer = api.token("view", "viewer")
    mine = api.submit(member, name="m", team="nlp", gpus=1)["id"]
    theirs = api.submit(member2, name="t", team="nlp", gpus=1)["id"]
    assert api.call("POST", f"/v1/workloads/{theirs}/cancel", member).status_code == 403
    assert api.call("POST", f"/v1/workloads/{mine}/cancel", viewer).status_code == 403
    assert api.call("POST", f"/v1/workloads/{mine}/cancel", member).status_code == 200
    assert api.call("POST", f"/v1/workloads/{theirs}/cancel", lead).status_code == 200


def test_other_orgs_objects_are_404_and_tokens_die(api: Api) -> None:
    api.org()
    wid = api.submit(name="x", team="nlp", gpus=1)["id"]
    created = api.ok("POST", "/v1/organizations", json={"slug": "acme"})
    other = bearer(created["admin_token"]["token"])
    assert api.call("GET", f"/v1/workloads/{wid}", other).status_code == 404
    assert api.call("GET", "/v1/teams/nlp", other).status_code == 404
    assert api.call("POST", f"/v1/workloads/{wid}/cancel", other).status_code == 404
    assert api.ok("GET", "/v1/workloads", other) == []
    tok = api.ok("POST", "/v1/tokens", json={"name": "tmp", "role": "viewer"})
    head = bearer(tok["token"])
    assert api.call("GET", "/v1/teams", head).status_code == 200
    api.ok("DELETE", f"/v1/tokens/{tok['id']}")
    r = api.call("GET", "/v1/teams", head)
    assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"
    assert api.call("GET", "/v1/teams", {}).status_code == 401
    assert api.call("GET", "/v1/teams", bearer("apt_nope")).status_code == 401
    tokens = api.ok("GET", "/v1/tokens")
    assert all("token" not in t for t in tokens)  # shown once only


def test_team_lead_stays_inside_its_subtree(api: Api) -> None:
    api.org()
    lead = api.token("lead", "team_lead", ["research"])
    assert api.call("PATCH", "/v1/teams/vision", lead, json={"parent": "production"}
                    ).status_code == 403
    assert api.call("PATCH", "/v1/teams/production", lead, json={"name": "x"}).status_code == 403
    assert api.call("PUT", "/v1/reservations/production/main", lead, json={"gpus": 1}
                    ).status_code == 403
    assert api.call("DELETE", "/v1/teams/research", lead).status_code == 403
    api.ok("POST", "/v1/teams", lead, json={"slug": "speech", "parent": "research"})
    api.ok("PATCH", "/v1/teams/speech", lead, json={"parent": "nlp"})  # within its subtree
    assert api.ok("GET", "/v1/teams/nlp")["children"] == ["speech"]
    assert api.call("DELETE", "/v1/teams/speech", lead).status_code == 200
