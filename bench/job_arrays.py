"""Benchmark of job arrays (issue 16): a 10,000-member array, in process.

One control plane on SQLite (a temporary file), scheduler loop off, driven
through the REST app in process (FastAPI's TestClient) and the scheduler's own
``run_org``. Two organizations on identical pools (``--nodes`` x 8 GPUs):

- the *baseline*: ``--members`` plain 1-GPU workloads (the same rows an array
  makes, without an array id), submitted in one batch, then one scheduling
  cycle over them (``baseline_cycle_s``): what a cycle over that many
  waiting workloads costs in this process now;
- the *array*: one ``POST /v1/workloads`` with ``array: 0-N%10`` (``submit``),
  its first cycle (10 members start, the rest are gated with ``ARRAY_LIMIT``,
  a reason written to each), the second cycle (it decodes again the rows the
  first wrote), an idle cycle (nothing changed: the gate recomputes, nothing
  is written) and ``POST /v1/arrays/{id}/cancel``.

Each array figure is reported as a ratio to ``baseline_cycle_s`` (the
machine is shared and noisy; ratios in one process are what is comparable),
with the work counters: members made, started, gated, cancelled, rows
written. The last line printed is one JSON object.

    python bench/job_arrays.py [--members 10000] [--nodes 250] [--quick]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from apportion.api.app import create_app
from apportion.service.context import Actor, Ctx, Role
from apportion.service.control import ControlPlane
from apportion.service.jobcontrol import submit_array
from apportion.service.settings import Settings

TOKEN = "apt_benchbench01_" + "b" * 32


def _ok(client: TestClient, method: str, path: str, token: str, **kw: Any) -> Any:
    r = client.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)
    assert r.status_code < 300, r.text
    return r.json()["data"]


def _org(client: TestClient, control: ControlPlane, slug: str, nodes: int) -> tuple[int, str]:
    """A new organization with pool ``main`` (``nodes`` x 8 GPUs) and team ``t``."""
    made = _ok(client, "POST", "/v1/organizations", TOKEN, json={"slug": slug, "name": slug})
    admin = made["admin_token"]["token"]
    _ok(client, "POST", "/v1/pools", admin, json={"name": "main"})
    agent = _ok(client, "POST", "/v1/tokens", admin,
                json={"name": "agent", "role": "agent", "pool": "main"})["token"]
    _ok(client, "POST", "/v1/agent/heartbeat", agent,
        json={"nodes": [{"name": f"n{i}", "gpus": 8} for i in range(nodes)]})
    _ok(client, "POST", "/v1/teams", admin, json={"slug": "t"})
    from apportion.store.repos import orgs

    with control.db.read() as session:
        row = orgs.find_org(session, slug)
        assert row is not None
        return int(row.id), admin


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def run(members: int, nodes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        control = ControlPlane(Settings(database_url=url, bootstrap_token=TOKEN,
                                        run_scheduler=False, rate_limit=0.0))
        control.start()
        try:
            with TestClient(create_app(control=control)) as client:
                return _measure(client, control, members, nodes)
        finally:
            control.stop()


def _measure(client: TestClient, control: ControlPlane, members: int, nodes: int
             ) -> dict[str, Any]:
    from apportion.domain.jobcontrol import ArraySpec
    from apportion.domain.workload import make_spec
    from apportion.store.repos import workloads as wl_repo

    sched = control.loop.scheduler
    sched.acquire()
    base_org, _ = _org(client, control, "baseline", nodes)
    arr_org, admin = _org(client, control, "array", nodes)
    # the baseline: the rows of an array without the array (plain workloads)
    spec = make_spec(name="plain", team="t", gpus=1)
    ctx = Ctx(Actor(token_id="bench", name="bench", role=Role.ORG_ADMIN, org_id=base_org,
                    org_slug="baseline"))
    with control.db.write() as session:
        submit_array(session, ctx, spec, ArraySpec(tuple(range(members))))
    with control.db.write() as session:
        session.connection().exec_driver_sql(
            "UPDATE workloads SET array_id = NULL, array_index = NULL WHERE org_id = ?",
            (base_org,))
    baseline_s, base_out = _timed(lambda: sched.run_org(base_org))
    # the array
    body = {"name": "sweep", "team": "t", "gpus": 1, "array": f"0-{members - 1}%10"}
    submit_s, first = _timed(lambda: _ok(client, "POST", "/v1/workloads", admin, json=body))
    first_s, first_out = _timed(lambda: sched.run_org(arr_org))
    # the next cycle reads back the 10,000 rows the first one wrote (their
    # versions changed: the snapshot cache decodes them again); the one after
    # is idle: nothing changed since
    settle_s, _settle = _timed(lambda: sched.run_org(arr_org))
    idle_s, idle_out = _timed(lambda: sched.run_org(arr_org))
    with control.db.read() as session:
        rows = wl_repo.array_members(session, arr_org, int(first["array_id"]))
        started = sum(r.status == "Starting" for r in rows)
        gated = sum(r.reason_code == "ARRAY_LIMIT" for r in rows)
    cancel_s, cancelled = _timed(lambda: _ok(
        client, "POST", f"/v1/arrays/{first['array_id']}/cancel", admin))
    return {
        "members": members, "nodes": nodes, "gpus": nodes * 8,
        "baseline_cycle_s": round(baseline_s, 4),
        "baseline_started": base_out.changed,
        "array_submit_s": round(submit_s, 4),
        "array_first_cycle_s": round(first_s, 4),
        "array_second_cycle_s": round(settle_s, 4),
        "array_idle_cycle_s": round(idle_s, 4),
        "array_cancel_s": round(cancel_s, 4),
        "submit_over_baseline_cycle": round(submit_s / baseline_s, 3),
        "first_cycle_over_baseline_cycle": round(first_s / baseline_s, 3),
        "second_cycle_over_baseline_cycle": round(settle_s / baseline_s, 3),
        "idle_cycle_over_baseline_cycle": round(idle_s / baseline_s, 3),
        "cancel_over_baseline_cycle": round(cancel_s / baseline_s, 3),
        "array_size": first["array_size"],
        "first_cycle_rows_written": first_out.changed,
        "idle_cycle_committed": idle_out.committed,
        "members_started": started, "members_gated_array_limit": gated,
        "members_cancelled": len(cancelled["cancelled"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=250)
    ap.add_argument("--quick", action="store_true", help="500 members on 20 nodes")
    args = ap.parse_args()
    members, nodes = (500, 20) if args.quick else (args.members, args.nodes)
    out = run(members, nodes)
    for k, v in out.items():
        print(f"{k:34} {v}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
