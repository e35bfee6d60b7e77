"""``apportion workloads describe``: one workload's spec, attempts, reason,
preemptions both ways, last events and log lines on one screen, against a live
server; and ``GET /v1/workloads/{id}/victims`` behind it."""

from __future__ import annotations

import json

from tests.cli.conftest import Org, seed_org, submit, wait_for


def test_describe_shows_both_sides_of_a_preemption(org: Org) -> None:
    agent = seed_org(org)  # 2 nodes x 4 GPUs; nlp reserves 3
    jobs = [submit(org, f"batch{i}", "vision", 4, priority=20) for i in range(2)]
    for wid in jobs:
        org.run(agent, wid)
    urgent = submit(org, "urgent", "nlp", 1, pods=3, **{"class": "reserved"})
    victim = wait_for(lambda: [w for w in jobs
                               if org.admin.get_workload(w)["status"] == "Preempted"],
                      10, "a batch job preempted")[0]

    mine = org.ok("workloads", "describe", "urgent")
    assert mine.splitlines()[0].startswith(f"workload {urgent} 'urgent':")
    assert "it preempted:" in mine
    assert f"  workload {victim} (batch{jobs.index(victim)}, vision), attempt 1" in mine
    assert "events (all; `workloads events` prints all):" in mine
    assert "logs: no output shipped yet" in mine  # nothing shipped by this stand-in agent

    theirs = org.ok("workloads", "describe", str(victim))
    assert f"explanation: Preempted (attempt 1), preempted by workload {urgent}" in theirs
    assert "attempts:" in theirs and f"preempted by workload {urgent}" in theirs
    assert "it preempted:" not in theirs
    data = json.loads(org.ok("workloads", "describe", "urgent", "-o", "json"))
    assert data["victims"] == [{"workload_id": victim, "name": f"batch{jobs.index(victim)}",
                                "team": "vision", "attempt": 1}]


def test_a_member_sees_victims_of_other_teams_without_their_names(org: Org) -> None:
    agent = seed_org(org)
    jobs = [submit(org, f"batch{i}", "vision", 4, priority=20) for i in range(2)]
    for wid in jobs:
        org.run(agent, wid)
    urgent = submit(org, "urgent", "nlp", 1, pods=3, **{"class": "reserved"})
    wait_for(lambda: org.admin.workload_victims(urgent), 10, "the preemption")
    member = org.token("nlp-dev", "member", ["nlp"])
    out = org.ok("workloads", "describe", "urgent", token=member)
    victim_line = next(line for line in out.splitlines() if line.startswith("  workload "))
    assert "(vision), attempt 1" in victim_line and "batch" not in victim_line
