"""``apportion workloads eta``, the ETA column of ``workloads list -o wide``,
the ETA line of ``describe`` and of ``submit --dry-run``, and ``apportion
usage``, against a live server."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

from tests.cli.conftest import Org, submit, wait_for


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _one_busy_node(org: Org) -> tuple[int, int, str]:
    """One 4-GPU node: ``a`` runs on it (no history: the default runtime, 1 h),
    ``b`` waits for the whole node. Returns their ids and b's expected start."""
    agent = org.add_pool("main", nodes=1, gpus=4)
    org.admin.create_team("t")
    a = submit(org, "a", "t", 4)
    org.run(agent, a)
    b = submit(org, "b", "t", 4)
    wait_for(lambda: org.admin.get_workload(b)["reason"], 10, "b waits with a reason")
    started = _t(org.admin.get_workload(a)["started_at"])
    return a, b, _iso(started + 3600)


def test_eta_names_the_start_what_it_waits_for_and_the_assumption(org: Org) -> None:
    a, b, start = _one_busy_node(org)
    out = org.ok("workloads", "eta", "b")
    assert out.startswith(f"eta: {start} in pool main, after #{a} (a) ends at {start} "
                          "[default]"), out
    assert "running work ends after the default runtime" in out
    data = json.loads(org.ok("workloads", "eta", str(b), "-o", "json"))
    assert data["start"] == start and data["basis"] == "default"
    assert data["waits_for"] == [{"workload_id": a, "name": "a", "ends_at": start,
                                  "basis": "default"}]
    running = org.ok("workloads", "eta", "a")
    assert running.startswith("eta: started (Running)")

    wide = org.ok("workloads", "list", "-o", "wide").splitlines()
    head = wide[0].split()
    assert "ETA" in head
    row_b = next(line.split() for line in wide[1:] if line.split()[1] == "b")
    assert row_b[head.index("ETA")] == start
    assert "ETA" not in org.ok("workloads", "list").splitlines()[0]  # wide only

    described = org.ok("workloads", "describe", "b")
    assert f"eta: {start} in pool main" in described
    dry = org.ok("submit", "c", "--team", "t", "--gpus", "4", "--dry-run")
    # c queues behind b, which runs its default hour after a's
    assert f"eta:        {_iso(_t(start) + 3600)} in pool main, after #{b} (b)" in dry


def test_usage_as_table_csv_and_json_and_a_bad_grouping(org: Org) -> None:
    agent = org.add_pool("main", nodes=1, gpus=4)
    org.admin.create_team("t")
    a = submit(org, "a", "t", 2)
    org.run(agent, a)
    agent.agent_report(a, 1, f"w{a}-a1", "completed")
    org.wait_status(a, "Completed")
    w = org.admin.get_workload(a)
    ran = _t(w["ended_at"]) - _t(w["started_at"])
    data = json.loads(org.ok("usage", "-o", "json", "--group-by", "team,user"))
    (row,) = data["rows"]
    assert (row["team"], row["user"]) == ("t", w["submitted_by"])
    assert row["elastic_gpu_hours"] == round(2 * ran / 3600, 6) and row["started"] == 1
    rows = list(csv.DictReader(io.StringIO(org.ok("usage", "-o", "csv", "--since", "1d"))))
    assert [(r["team"], r["started"]) for r in rows] == [("t", "1")]
    table = org.ok("usage").splitlines()
    assert table[0].split()[:3] == ["TEAM", "RESERVED-GPU-H", "ELASTIC-GPU-H"]
    assert table[-1].split()[0] == "TOTAL"
    bad = org.cli("usage", "--group-by", "project")
    assert bad.exit_code == 1
    assert "group_by" in bad.stderr and "team, user, pool" in bad.stderr
