"""The five policies: each the same engine and placement, seeing the org in
its own way and cycling with its own :class:`~apportion.engine.policy.Policy`.

- ``apportion``: the org as written, the SPEC's cycle.
- ``fifo``: one queue for everybody (one team reserving the whole pool),
  arrival order, no preemption.
- ``strict-priority``: one queue for everybody, class then priority then
  arrival; higher priority preempts lower (SPEC 6.4's same-team rule); no
  fair share.
- ``flat-fair-share``: no tree: every leaf a top-level team with its own
  bursting priority; a parent's reservation not handed to its children
  (its own bucket) is split evenly among the leaves below it; a parent's
  burst limit is dropped (leaves keep their own).
- ``reclaim-to-quota``: the org as written; entitlements capped at the
  reservations (no weighted split of the surplus: it is borrowed first come,
  first served) and elastic work preempts only to get its team back up to
  its reservation (Kueue's and KAI's reclaim).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from apportion.engine.policy import Policy
from apportion.replay.org import Org, classify, cluster_nodes
from apportion.replay.trace import Trace
from apportion.sim.scenario import Scenario, scenario_from_data

POLICIES: dict[str, Policy] = {
    "apportion": Policy(name="apportion"),
    "fifo": Policy(name="fifo", preemption=False, order="arrival"),
    "strict-priority": Policy(name="strict-priority", order="priority"),
    "flat-fair-share": Policy(name="flat-fair-share"),
    "reclaim-to-quota": Policy(name="reclaim-to-quota", quota_only=True),
}
ONE_QUEUE = "everyone"


def teams_for(policy: str, org: Org, capacity_gpus: Decimal) -> list[Any]:
    """The scenario ``teams`` data the policy runs with."""
    if policy in ("fifo", "strict-priority"):
        return [{"name": ONE_QUEUE, "reservations": {org.pool_name: str(capacity_gpus)}}]
    if policy == "flat-fair-share":
        return flatten(org.teams, org.pool_name)
    return copy.deepcopy(org.teams)


def flatten(teams: list[Any], pool: str) -> list[Any]:
    """Leaves as top-level teams (see the module doc). Reservations in GPUs,
    exact to 0.001 (the milli split of a bucket gives any remainder to the
    first leaves)."""
    out: list[Any] = []

    def walk(t: Mapping[str, Any], inherited: int) -> None:
        res = _milli((t.get("reservations") or {}).get(pool, 0))
        kids = list(t.get("children") or [])
        if not kids:
            leaf = {k: v for k, v in t.items() if k != "children"}
            leaf["reservations"] = {pool: str(Decimal(res + inherited) / 1000)}
            out.append(leaf)
            return
        own = res - sum(_milli((k.get("reservations") or {}).get(pool, 0)) for k in kids)
        base, extra = divmod(max(0, own) + inherited, _count_leaves(kids))
        first = 0  # index of the child's first leaf below ``t``
        for k in kids:
            n = _count_leaves([k])
            walk(k, base * n + max(0, min(extra, first + n) - first))
            first += n

    for t in teams:
        walk(t, 0)
    return out


def _count_leaves(teams: list[Any]) -> int:
    return sum(_count_leaves(list(t["children"])) if t.get("children") else 1 for t in teams)


def _milli(value: object) -> int:
    return int(Decimal(str(value)) * 1000)


def build(policy: str, org: Org, trace: Trace, until: int | None = None
          ) -> tuple[Scenario, dict[str, str]]:
    """The scenario ``policy`` replays, and each job's team in the org.

    Every job is requeued when preempted (``requeue_on_preemption``): the
    trace's work still has to be done, from the start, as a preempted pod is
    recreated by its controller."""
    nodes = cluster_nodes(org, trace)
    capacity = Decimal(0)
    for n in nodes:
        capacity += Decimal(str(n.get("gpus", 0))) * int(n.get("count", 1))
    pool = dict(org.pool)
    pool["nodes"] = nodes
    workloads = []
    team_by_name: dict[str, str] = {}
    jobs = [j for j in trace.jobs if until is None or j.submit < until]
    mapped = classify(org, jobs)
    for job in jobs:
        team, wclass, priority = mapped[job.name]
        team_by_name[job.name] = team
        item: dict[str, Any] = {
            "name": job.name, "team": ONE_QUEUE if policy in ("fifo", "strict-priority")
            else team,
            "class": wclass, "gpus": _gpus(job.gpu_milli), "pods": job.pods, "at": job.submit,
            "duration": job.duration, "pool": org.pool_name, "requeue_on_preemption": True,
        }
        if priority is not None:
            item["priority"] = priority
        if job.min_pods is not None:
            item["min_pods"] = job.min_pods
        if job.cpu_milli:
            item["cpu"] = job.cpu_milli / 1000
        if job.memory_mib:
            item["memory_mib"] = job.memory_mib
        if job.gpu_types:
            item["gpu_type"] = list(job.gpu_types)
        workloads.append(item)
    data = {
        "description": org.description,
        "pools": [pool],
        "teams": teams_for(policy, org, capacity),
        "workloads": workloads,
    }
    return scenario_from_data(data), team_by_name


def _gpus(milli: int) -> float | int:
    return milli // 1000 if milli % 1000 == 0 else milli / 1000
