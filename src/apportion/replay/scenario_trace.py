"""Importer of apportion's scenario files (docs/simulate.md): the workloads
become jobs with their own team, class and priority, the nodes the cluster,
and the file's teams the org (unless an ORG.yaml is given). A workload
without ``duration`` runs to the end of the replay; one given a
``placement`` is replayed as submitted at its ``at`` and placed by the
policy; events (cancel, node down, ...) are not replayed, and counted."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from apportion.domain.cluster import DEFAULT_GPU_MEMORY_MIB
from apportion.domain.errors import ValidationError
from apportion.replay.org import ClassRule, Org, node_entry
from apportion.replay.trace import UNTIL_END, Trace, TraceJob, TraceNode
from apportion.sim.scenario import Scenario, load_scenario


def load_scenario_trace(path: str) -> tuple[Trace, Scenario]:
    """The trace, and the scenario itself (for its org and pool settings)."""
    scenario = load_scenario(path)
    jobs = []
    for sw in scenario.workloads:
        spec = sw.spec
        pool = scenario.pools[spec.pool] if spec.pool else next(iter(scenario.pools.values()))
        jobs.append(TraceJob(
            name=spec.name, submit=sw.at,
            duration=spec.duration if spec.duration is not None else UNTIL_END,
            gpu_milli=spec.request.charge(pool.gpu_memory_mib or DEFAULT_GPU_MEMORY_MIB),
            pods=spec.pods, min_pods=spec.min_pods, cpu_milli=spec.cpu_milli,
            memory_mib=spec.memory_mib, gpu_types=spec.gpu_types, team=spec.team,
            wclass=spec.wclass.value, priority=spec.priority,
        ))
    nodes = tuple(TraceNode(n.name, n.gpus, n.gpu_type, n.cpu_milli, n.memory_mib)
                  for n in scenario.nodes)
    notes = (f"{len(scenario.events)} events of the scenario not replayed",)
    trace = Trace(source=path, jobs=tuple(jobs), nodes=nodes, notes=notes,
                  counts={"rows": len(jobs), "events_skipped": len(scenario.events)})
    return trace, scenario


def org_from_scenario(scenario: Scenario, source: str) -> Org:
    """The scenario's own org: its teams, its one pool, its nodes; teams by
    the workloads' own team field."""
    if len(scenario.pools) != 1:
        raise ValidationError("pools", f"the scenario has {len(scenario.pools)} pools",
                              "exactly one pool for a replay")
    pool = next(iter(scenario.pools.values()))
    tree = scenario.tree

    def team(slug: str) -> dict[str, Any]:
        t = tree.team(slug)
        out: dict[str, Any] = {"name": slug, "bursting_priority": t.bursting_priority}
        if t.burst_limit_percent is not None:
            out["burst_limit_percent"] = t.burst_limit_percent
        milli = tree.reservation(slug, pool.name)
        if milli:
            out["reservations"] = {pool.name: str(Decimal(milli) / 1000)}
        if tree.children(slug):
            out["children"] = [team(c) for c in tree.children(slug)]
        return out

    settings: dict[str, Any] = {
        "name": pool.name, "gpu_memory_mib": pool.gpu_memory_mib, "start_delay": pool.start_delay,
        "preemption_grace": pool.preemption_grace, "packing": pool.packing.value,
    }
    if pool.gpu_type is not None:
        settings["gpu_type"] = pool.gpu_type
    if pool.starvation_hold_after is not None:
        settings["starvation_hold_after"] = pool.starvation_hold_after
    nodes = [node_entry(n, labels=dict(n.labels)) for n in scenario.nodes]
    return Org(description=scenario.description.splitlines()[0] if scenario.description else "",
               pool=settings, teams=[team(t) for t in tree.top_level()], team_rule="field",
               buckets=(), classes={}, default_class=ClassRule("elastic", None),
               cluster_nodes=nodes, source=source)
