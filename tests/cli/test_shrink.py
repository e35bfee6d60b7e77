"""What a user sees of a shrink (SPEC 6.5) in ``workloads list/get/why/events``.

The scheduler's plan is the real engine's plus one shrink decision
(tests/shrinkplan.py) until the engine's victim search produces shrinks."""

from __future__ import annotations

from typing import Any

from tests.cli.conftest import Org, seed_org, submit, wait_for


def test_list_get_why_and_events_show_a_shrink(org: Org, monkeypatch: Any) -> None:
    from apportion.service import scheduler
    from tests.shrinkplan import shrinking_run

    agent = seed_org(org)
    sweep = submit(org, "sweep", "vision", 1, pods=8, min_pods=4, priority=20)
    org.run(agent, sweep)
    # Same team, lower priority: the engine itself may not preempt sweep for it.
    urgent = submit(org, "urgent", "vision", 1, priority=10)
    row = org.ok("workloads", "list", "--no-headers").splitlines()[0].split()
    assert row[1] == "sweep" and row[8] == "8/8"
    monkeypatch.setattr(scheduler, "_run",
                        shrinking_run(scheduler._run, sweep, 2, lambda: urgent))
    wait_for(lambda: org.admin.get_workload(sweep)["pods_running"] == 6, 10, "the shrink")

    rows = {r.split()[1]: r.split() for r in org.ok("workloads", "list").splitlines()[1:]}
    assert rows["sweep"][6:9] == ["Running", "main", "6/8"]
    assert org.ok("workloads", "get", "sweep").splitlines()[1].split()[8] == "6/8"
    why = org.ok("workloads", "why", "sweep")
    assert "with 6 of 8 pods" in why and "pods: 6/8 running; preemptions:" in why
    assert f"attempt 1: shrunk: pods 6-7 preempted by workload {urgent} (2 GPUs)" in why
    events = org.ok("workloads", "events", "sweep", "-o", "wide")
    assert f"shrunk: pods 6-7 preempted by workload {urgent}" in events
    org.wait_status(urgent, "Starting", "Running")  # on the two GPUs the shrink freed
