"""Golden table layouts: the tour's organization in a state that no longer changes,
on its own server (so workload ids are fixed). Rewrite with UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import Org, live_server, new_org, seed_org, submit, wait_for

GOLDEN = Path(__file__).parent / "golden"
TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Org]:
    tmp = tmp_path_factory.mktemp("golden")
    # A fixed slug: the admin's name ("cli1-admin") sets a column's width, so a
    # number that depends on how many orgs other tests made first (random order)
    # would shift the tables.
    with live_server(tmp, agent_timeout=24 * 3600.0) as url, new_org(url, tmp, slug="cli1") as org:
        agent = seed_org(org)
        sweep = submit(org, "sweep", "vision", 0.5, pods=3, priority=40)
        org.run(agent, sweep)
        train = submit(org, "train", "nlp", 2, **{"class": "reserved"})
        org.run(agent, train)
        serve = submit(org, "serve", "production", 1, **{"class": "reserved"})
        org.run(agent, serve)
        submit(org, "huge", "production", 8, priority=20)
        wait_for(lambda: org.admin.list_workloads(name="huge").items[0]["reason"], 10,
                 "huge waits with a reason")
        wait_for(lambda: _settled(org), 60, "entitlements that no longer change")
        yield org


def _last_cycle(org: Org) -> str | None:
    health = httpx.get(f"{org.url}/healthz", timeout=10).json()
    return health["scheduler"]["last_cycle_at"]  # type: ignore[no-any-return]


def _settled(org: Org) -> bool:
    """The capacities did not change across two full scheduling cycles that ran
    after they were read (counted by the scheduler's own stamps, not by a sleep
    that a slow machine can outlast)."""
    before = org.admin.team_capacity()
    for _ in range(2):
        seen = _last_cycle(org)
        wait_for(lambda seen=seen: _last_cycle(org) != seen, 30, "a scheduling cycle")
    return before == org.admin.team_capacity() and all(
        r.get("entitlement") is not None for r in before)


@pytest.mark.parametrize(("name", "args"), [
    ("teams_tree", ["teams", "tree"]),
    ("teams_tree_wide", ["teams", "tree", "-o", "wide"]),
    ("workloads_list", ["workloads", "list"]),
    ("workloads_list_wide", ["workloads", "list", "-o", "wide"]),
    ("pools_show", ["pools", "show", "main"]),
    ("pools_list", ["pools", "list"]),
    ("nodes_list", ["nodes", "list", "-o", "wide"]),
    ("reservations_list", ["reservations", "list"]),
    ("top", ["top", "--once"]),
])
def test_table_layout(tour: Org, name: str, args: list[str]) -> None:
    result = tour.cli(*args)
    assert result.exit_code == 0, result.stderr
    text = TIMES.sub("<time>", result.stdout)
    text = text.replace(tour.admin.token_self()["name"], "<admin>")
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
