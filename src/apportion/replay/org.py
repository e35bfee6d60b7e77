"""ORG.yaml: the organization a trace is replayed for, and how rows map to it.

```yaml
description: A flat org of 8 teams
pool: {name: main, preemption_grace: 0, packing: fragmentation}   # scenario pool keys
cluster: {gpus: 64}      # the trace's nodes, spread evenly down its node list
teams:                   # the scenario ``teams`` syntax (tree, reservations)
  - {name: team-a, bursting_priority: 4, reservations: {main: 5}}
mapping:
  teams: {by: hash, buckets: {team-a: 1, team-b: 2}}   # or {by: field}
  classes:               # the trace's qos -> class and priority
    LS: {class: reserved, priority: 100}
    BE: {class: elastic, priority: 10}
  default_class: {class: elastic, priority: 50}
```

Teams by ``hash``: the SHA-1 of the job's name, read as a number in [0, 1),
falls into buckets laid end to end in the order written, each as wide as its
weight; ``field``: the trace's own team column (CSV, scenario). A row's own
class and priority (CSV, scenario) win over the mapping.

``cluster``: ``gpus: N`` takes nodes of the trace's node list in order,
keeping a node whenever the GPUs kept so far are behind N/total of the GPUs
seen so far (so the GPU models keep their mix); ``nodes:`` gives the nodes
in the scenario syntax instead (needed for a CSV trace). Absent: all of the
trace's nodes.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import yaml

from apportion.domain.errors import ValidationError
from apportion.domain.workload import WorkloadClass
from apportion.replay.trace import Trace, TraceJob, TraceNode
from apportion.sim import fields as f
from apportion.sim.scenario import POOL_KEYS

ORG_KEYS = ("description", "pool", "cluster", "teams", "mapping")
CLUSTER_KEYS = ("gpus", "nodes")
MAPPING_KEYS = ("teams", "classes", "default_class", "reserved_overflow")
CLASS_KEYS = ("class", "priority")
TEAM_RULES = ("hash", "field")


@dataclass(frozen=True, slots=True)
class ClassRule:
    wclass: str
    priority: int | None


@dataclass(frozen=True)
class Org:
    """A parsed ORG.yaml (teams still as raw scenario data: the policies
    rewrite them before the scenario validates them)."""

    description: str
    pool: dict[str, Any]
    teams: list[Any]
    team_rule: str
    buckets: tuple[tuple[str, int], ...]
    classes: dict[str, ClassRule]
    default_class: ClassRule
    reserved_overflow: ClassRule | None = None
    cluster_gpus: int | None = None
    cluster_nodes: list[Any] | None = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pool_name(self) -> str:
        return str(self.pool["name"])


def load_org(path: str) -> Org:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise ValidationError(path, f"cannot read the file: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValidationError(path, f"not valid YAML: {err}") from None
    return parse_org(data, source=path)


def parse_org(data: object, source: str = "") -> Org:
    top = f.mapping(data if data is not None else {}, "", ORG_KEYS, "an org file")
    pool = dict(f.mapping(top.get("pool") or {"name": "main"}, "pool", POOL_KEYS, "a pool"))
    if "nodes" in pool:
        raise ValidationError("pool.nodes", "give nodes under cluster.nodes")
    pool.setdefault("name", "main")
    teams = f.sequence(top.get("teams"), "teams", "teams")
    if not teams:
        raise ValidationError("teams", "at least one team is required")
    cluster = f.mapping(top.get("cluster") or {}, "cluster", CLUSTER_KEYS, "a cluster")
    gpus = cluster.get("gpus")
    if gpus is not None:
        gpus = f.integer(gpus, "cluster.gpus", 1, 1_000_000)
    nodes = cluster.get("nodes")
    if nodes is not None:
        nodes = list(f.sequence(nodes, "cluster.nodes", "nodes"))
        if gpus is not None:
            raise ValidationError("cluster", "give either gpus or nodes")
    mapping = f.mapping(top.get("mapping") or {}, "mapping", MAPPING_KEYS, "a mapping")
    rule = f.mapping(mapping.get("teams") or {"by": "field"}, "mapping.teams", ("by", "buckets"),
                     "a team rule")
    by = f.choice(rule.get("by", "field"), "mapping.teams.by", list(TEAM_RULES))
    buckets: list[tuple[str, int]] = []
    if by == "hash":
        raw = rule.get("buckets")
        if not isinstance(raw, Mapping) or not raw:
            raise ValidationError("mapping.teams.buckets",
                                  "must map leaf teams to weights, e.g. {team-a: 1}")
        for team, weight in raw.items():
            buckets.append((str(team), f.integer(weight, f"mapping.teams.buckets.{team}", 1,
                                                 1_000_000)))
    classes = {}
    raw_classes = mapping.get("classes") or {}
    if not isinstance(raw_classes, Mapping):
        raise ValidationError("mapping.classes", "must map the trace's qos values to class rules",
                              "e.g. {LS: {class: reserved, priority: 100}}")
    for qos, rule_raw in raw_classes.items():
        classes[str(qos)] = _class_rule(rule_raw, f"mapping.classes.{qos}")
    default = _class_rule(mapping.get("default_class") or {"class": "elastic"},
                          "mapping.default_class")
    overflow = mapping.get("reserved_overflow")
    overflow_rule = None if overflow is None else _class_rule(overflow,
                                                              "mapping.reserved_overflow")
    if overflow_rule is not None and overflow_rule.wclass != "elastic":
        raise ValidationError("mapping.reserved_overflow.class", "must be elastic", "elastic")
    description = top.get("description") or ""
    if not isinstance(description, str):
        raise ValidationError("description", "must be a string")
    return Org(description=description.strip(), pool=pool, teams=list(teams), team_rule=by,
               buckets=tuple(buckets), classes=classes, default_class=default,
               reserved_overflow=overflow_rule,
               cluster_gpus=gpus, cluster_nodes=nodes, source=source)


def _class_rule(raw: object, path: str) -> ClassRule:
    m = f.mapping(raw, path, CLASS_KEYS, "a class rule")
    wclass = f.choice(m.get("class", "elastic"), f"{path}.class",
                      [c.value for c in WorkloadClass])
    prio = m.get("priority")
    return ClassRule(wclass, None if prio is None else f.integer(prio, f"{path}.priority", 0,
                                                                   1000))


def leaf_slugs(teams: list[Any]) -> list[str]:
    """The leaf teams of raw scenario team data, in file order."""
    out: list[str] = []
    for t in teams:
        kids = t.get("children") if isinstance(t, Mapping) else None
        if kids:
            out.extend(leaf_slugs(list(kids)))
        elif isinstance(t, Mapping):
            out.append(str(t.get("name")))
    return out


def hash_point(name: str) -> float:
    """The job's place in [0, 1): SHA-1 of its name (stable across runs)."""
    digest = hashlib.sha1(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def team_of(org: Org, job: TraceJob) -> str:
    if org.team_rule == "field":
        if job.team is None:
            raise ValidationError("mapping.teams.by",
                                  f"job {job.name!r} has no team column to read",
                                  "hash (with buckets) for traces without teams")
        return job.team
    total = sum(w for _t, w in org.buckets)
    point = hash_point(job.name) * total
    edge = 0
    for team, weight in org.buckets:
        edge += weight
        if point < edge:
            return team
    return org.buckets[-1][0]


def class_of(org: Org, job: TraceJob) -> tuple[str, int | None]:
    """(class, priority) of a job: its own, else the mapping of its qos."""
    rule = org.classes.get(job.qos or "", org.default_class)
    wclass = job.wclass or rule.wclass
    priority = job.priority if job.priority is not None else (
        rule.priority if job.wclass is None or job.wclass == rule.wclass else None)
    return wclass, priority


def leaf_reservations(teams: list[Any], pool: str) -> dict[str, int]:
    """Milli-GPU each leaf team reserves in ``pool`` (raw team data)."""
    out: dict[str, int] = {}
    for t in teams:
        if not isinstance(t, Mapping):
            continue
        kids = t.get("children")
        if kids:
            out.update(leaf_reservations(list(kids), pool))
        else:
            raw = (t.get("reservations") or {}).get(pool, 0)
            out[str(t.get("name"))] = int(Decimal(str(raw)) * 1000)
    return out


def classify(org: Org, jobs: Sequence[TraceJob]) -> dict[str, tuple[str, str, int | None]]:
    """(team, class, priority) of every job. With ``reserved_overflow``, a job
    the mapping makes reserved becomes that elastic class when its team's
    reserved jobs running at its submission *in the trace* (submission to
    submission + duration), with it added, would pass the team's own
    reservation: the team submits as reserved what its reservation covers.
    Decided from the trace alone, the same for every policy."""
    out: dict[str, tuple[str, str, int | None]] = {}
    limit = leaf_reservations(org.teams, org.pool_name)
    running: dict[str, list[tuple[int, int]]] = {}
    used: dict[str, int] = {}
    for job in sorted(jobs, key=lambda j: j.submit):
        team = team_of(org, job)
        wclass, priority = class_of(org, job)
        rule = org.reserved_overflow
        if rule is not None and wclass == "reserved" and job.wclass is None:
            heap = running.setdefault(team, [])
            while heap and heap[0][0] <= job.submit:
                used[team] -= heapq.heappop(heap)[1]
            size = job.gpu_milli * (job.min_pods or job.pods)
            if used.get(team, 0) + size <= limit.get(team, 0):
                used[team] = used.get(team, 0) + size
                heapq.heappush(heap, (job.submit + job.duration, size))
            else:
                wclass, priority = rule.wclass, rule.priority
        out[job.name] = (team, wclass, priority)
    return out


def cluster_nodes(org: Org, trace: Trace) -> list[dict[str, Any]]:
    """The nodes as scenario node entries (see the module doc)."""
    if org.cluster_nodes is not None:
        return list(org.cluster_nodes)
    if not trace.nodes:
        raise ValidationError("cluster.nodes", "this trace has no nodes: the org must give them",
                              "cluster: {nodes: [{prefix: n, count: 8, gpus: 8}]}")
    chosen: list[TraceNode] = list(trace.nodes)
    if org.cluster_gpus is not None:
        total = sum(n.gpus for n in trace.nodes)
        if org.cluster_gpus > total:
            raise ValidationError("cluster.gpus", f"the trace has {total} GPUs",
                                  f"at most {total}")
        chosen, seen, kept = [], 0, 0
        for n in trace.nodes:
            seen += n.gpus
            if n.gpus and kept * total < seen * org.cluster_gpus and kept < org.cluster_gpus:
                chosen.append(n)
                kept += n.gpus
    return [node_entry(n) for n in chosen]


def node_entry(n: Any, **extra: Any) -> dict[str, Any]:
    """A scenario file's node entry for node ``n`` (a trace's or a scenario's
    node: name, gpus, gpu_type, cpu_milli, memory_mib), plus ``extra`` keys."""
    entry: dict[str, Any] = {"name": n.name, "gpus": n.gpus, **extra}
    if n.gpu_type:
        entry["gpu_type"] = n.gpu_type
    if n.cpu_milli is not None:
        entry["cpu"] = n.cpu_milli / 1000
    if n.memory_mib is not None:
        entry["memory_mib"] = n.memory_mib
    return entry
