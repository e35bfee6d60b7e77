"""teams, reservations, pools, nodes, tokens, top against the live server."""

from __future__ import annotations

import json

import yaml

from tests.cli.conftest import Org, seed_org


def test_teams_create_set_move_delete(org: Org) -> None:
    assert "team a created" in org.ok("teams", "create", "a", "--weight", "3")
    org.ok("teams", "create", "b", "--parent", "a", "--burst-limit", "50")
    org.ok("teams", "set", "b", "--name", "Bee", "--weight", "2", "--burst-limit", "none")
    team = org.admin.get_team("b")
    assert (team["name"], team["bursting_priority"], team["burst_limit_percent"]) == \
        ("Bee", 2, None)
    assert "moved under the top level" in org.ok("teams", "move", "b", "--top")
    assert org.admin.get_team("b")["parent"] is None
    org.ok("teams", "move", "b", "--parent", "a")
    refused = org.cli("teams", "delete", "a")
    assert refused.exit_code == 1 and "child" in refused.stderr
    org.ok("teams", "delete", "b")
    assert [t["slug"] for t in json.loads(org.ok("teams", "list", "-o", "json"))] == ["a"]
    assert yaml.safe_load(org.ok("teams", "get", "a", "-o", "yaml")) == org.admin.get_team("a")


def test_reservations_set_list_remove_and_refusal(org: Org) -> None:
    seed_org(org)
    assert "reservation of vision in main: 1 GPU\n" in org.ok("reservations", "set", "vision",
                                                              "main", "1")
    rows = org.ok("reservations", "list", "--pool", "main").splitlines()
    assert rows[0].split() == ["TEAM", "POOL", "GPUS"]
    assert ["vision", "main", "1"] in [r.split() for r in rows]
    too_much = org.cli("reservations", "set", "nlp", "main", "6")
    assert too_much.exit_code == 1
    assert "research" in too_much.stderr and len(too_much.stderr.strip().splitlines()) == 1
    org.ok("reservations", "remove", "vision", "main")
    assert "vision" not in org.ok("reservations", "list")


def test_pools_nodes_cordon(org: Org) -> None:
    seed_org(org)
    pools = org.ok("pools", "list").splitlines()
    assert pools[0].split() == ["NAME", "GPU-TYPE", "CAPACITY", "NODES", "AGENT", "PACKING"]
    # the pool names no GPU type: the list shows what its nodes report
    assert pools[1].split() == ["main", "h100", "8", "2", "connected", "fragmentation"]
    assert "node m1 cordoned" in org.ok("nodes", "cordon", "m1")
    nodes = [r.split() for r in org.ok("nodes", "list", "--no-headers").splitlines()]
    assert nodes[0][:5] == ["m1", "main", "4", "h100", "cordoned"]
    assert "m1" not in org.ok("nodes", "list", "--state", "ready")
    org.ok("nodes", "uncordon", "m1")
    assert json.loads(org.ok("nodes", "list", "-o", "json"))[0]["state"] == "ready"
    missing = org.cli("pools", "show", "nope")
    assert missing.exit_code == 1 and "nope" in missing.stderr


def test_tokens_create_list_revoke_and_roles(org: Org) -> None:
    seed_org(org)
    out = org.ok("tokens", "create", "dana", "--role", "member", "--team", "nlp")
    secret = out.splitlines()[-1].strip()
    assert secret.startswith("apt_")
    token_id = secret.split("_")[1]
    listed = [r.split() for r in org.ok("tokens", "list").splitlines()]
    assert next(r[1:4] for r in listed if r[0] == token_id) == ["dana", "member", "nlp"]
    denied = org.cli("teams", "create", "x", token=secret)
    assert denied.exit_code == 1 and "member" in denied.stderr
    assert "revoked" in org.ok("tokens", "revoke", token_id)
    gone = org.cli("whoami", token=secret)
    assert gone.exit_code == 1 and "apportion login" in gone.stderr
    needs_team = org.cli("tokens", "create", "x", "--role", "member")
    assert needs_team.exit_code == 1
