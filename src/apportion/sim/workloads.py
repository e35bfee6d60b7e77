"""The ``workloads`` and ``events`` sections of a scenario."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from apportion.domain import limits
from apportion.domain.cluster import Node, NodeState, Pool
from apportion.domain.errors import ValidationError
from apportion.domain.jobcontrol import ArraySpec, DepCondition, Dependency, parse_array
from apportion.domain.org import OrgTree
from apportion.domain.quantities import count_of
from apportion.domain.workload import DeviceShare, Placement, PodPlacement, WorkloadSpec, make_spec
from apportion.sim import fields as f

SPEC_KEYS = (
    "team", "class", "priority", "gpus", "gpu_memory_mib", "pods", "min_pods", "gang",
    "topology", "gpu_type", "pool", "node_selector", "requeue_on_preemption", "command",
    "image", "env", "labels", "duration", "cpu", "memory_mib", "time_limit",
    "requeue_on_timeout",
)
#: job control (issue 16): ``hold: true``; ``after: [NAME[:ok|:any|:notok], ...]``
#: (workloads submitted earlier); ``array: 0-9%2`` (members NAME[0]..NAME[9])
JOB_KEYS = ("hold", "after", "array")
WORKLOAD_KEYS = ("name", "prefix", "count", "at", "placement", *SPEC_KEYS, *JOB_KEYS)
EVENT_KINDS = ("cancel", "complete", "fail", "hold", "release", "node_down", "node_up",
               "cordon", "uncordon")
WORKLOAD_EVENTS = ("cancel", "complete", "fail", "hold", "release")
EVENT_KEYS = ("at", *EVENT_KINDS)


@dataclass(frozen=True, slots=True)
class ScenarioWorkload:
    id: int
    at: int
    path: str
    spec: WorkloadSpec
    placement: Placement | None
    held: bool = False
    array_id: int | None = None
    array_index: int | None = None
    array_limit: int | None = None


@dataclass(frozen=True, slots=True)
class _Job:
    """A workload's job control as the file gives it (names, not ids yet)."""

    held: bool = False
    after: tuple[tuple[str, str], ...] = ()
    array: ArraySpec | None = None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class ScenarioEvent:
    at: int
    path: str
    kind: str
    target: str


def parse_workloads(
    raw: object, tree: OrgTree, pools: Mapping[str, Pool], nodes: Sequence[Node]
) -> list[ScenarioWorkload]:
    """Workloads numbered in submission order: by ``at``, then file order."""
    by_name = {n.name: n for n in nodes}
    found: list[tuple[int, int, str, WorkloadSpec, Placement | None, _Job]] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(f.sequence(raw, "workloads", "workloads")):
        path = f.join("workloads", i)
        raw_item = f.mapping(item, path, WORKLOAD_KEYS, "a workload")
        at = f.integer(raw_item.get("at", 0), f.join(path, "at"), 0, limits.MAX_SECONDS)
        if len(found) >= limits.MAX_SCENARIO_WORKLOADS:
            raise ValidationError(path, f"more than {limits.MAX_SCENARIO_WORKLOADS} workloads "
                                  "in the file", f"at most {limits.MAX_SCENARIO_WORKLOADS}")
        job = _job(raw_item, path)
        for name, index in _member_names(raw_item, path, job):
            spec = _spec(raw_item, name, path, tree, pools)
            if name in seen:
                raise ValidationError(
                    path, f"workload {name!r} is already defined at {seen[name]}",
                    "unique workload names (events address workloads by name)",
                )
            seen[name] = path
            placement = None
            if raw_item.get("placement") is not None:
                placement = _placement(raw_item["placement"], f.join(path, "placement"), spec,
                                       by_name)
            found.append((at, len(found), path, spec, placement, replace(job, index=index)))
    found.sort(key=lambda t: (t[0], t[1]))
    ids = {t[3].name: k for k, t in enumerate(found, start=1)}
    out: list[ScenarioWorkload] = []
    first: dict[tuple[str, int], int] = {}  # (path, at) of an array -> its first member's id
    for k, (at, _order, path, spec, placement, job) in enumerate(found, start=1):
        if job.after:
            spec = replace(spec, after=_dependencies(job.after, ids, k, f.join(path, "after")))
        array_id = None
        if job.array is not None:
            array_id = first.setdefault((path, at), k)
        out.append(ScenarioWorkload(
            id=k, at=at, path=path, spec=spec, placement=placement, held=job.held,
            array_id=array_id, array_index=job.index,
            array_limit=job.array.limit if job.array is not None else None))
    return out


def _job(raw: Mapping[str, Any], path: str) -> _Job:
    held = raw.get("hold", False)
    if not isinstance(held, bool):
        raise ValidationError(f.join(path, "hold"), f"must be true or false, got {held!r}")
    after: list[tuple[str, str]] = []
    items = raw.get("after") or []
    for k, item in enumerate(items if isinstance(items, list) else [items]):
        if not isinstance(item, str) or not item:
            raise ValidationError(f.join(f.join(path, "after"), k), f"{item!r} does not name "
                                  "a workload", "NAME[:ok|:any|:notok]")
        name, sep, cond = item.rpartition(":")
        if not sep or cond not in ("ok", "any", "notok"):
            name, cond = item, "ok"
        after.append((name, cond))
    array = None
    if raw.get("array") is not None:
        array = parse_array(str(raw["array"]), f.join(path, "array"))
    return _Job(held, tuple(after), array)


def _member_names(raw: Mapping[str, Any], path: str, job: _Job) -> list[tuple[str, int | None]]:
    """The workload's names, with each array member's index (``NAME[INDEX]``)."""
    names = _names(raw, path)
    if job.array is None:
        return [(n, None) for n in names]
    if len(names) > 1:
        raise ValidationError(f.join(path, "array"), "an array needs a name, not prefix + count")
    return [(f"{names[0]}[{i}]", i) for i in job.array.indexes]


def _dependencies(
    after: tuple[tuple[str, str], ...], ids: Mapping[str, int], own: int, path: str
) -> tuple[Dependency, ...]:
    """Names -> ids; each must be submitted before this workload (so no cycle
    can form)."""
    deps = []
    for k, (name, cond) in enumerate(after):
        wid = ids.get(name)
        if wid is None or wid >= own:
            why = "no such workload" if wid is None else "it is not submitted before this one"
            raise ValidationError(f.join(path, k), f"{name!r}: {why}",
                                  "a workload submitted earlier (at an earlier time, or "
                                  "earlier in the file)")
        deps.append(Dependency(wid, DepCondition(cond)))
    if len({d.workload_id for d in deps}) != len(deps):
        raise ValidationError(path, "a workload is named twice", "each workload once")
    return tuple(sorted(deps))


def _names(raw: Mapping[str, Any], path: str) -> list[str]:
    """``name``, or ``count`` names ``prefix1..prefixN`` (like nodes)."""
    if "prefix" in raw or "count" in raw:
        if "name" in raw:
            raise ValidationError(f.join(path, "name"), "give either name or prefix + count")
        prefix = f.text(raw.get("prefix"), f.join(path, "prefix"), "a name prefix")
        count = f.integer(raw.get("count"), f.join(path, "count"), 1,
                          limits.MAX_SCENARIO_WORKLOADS)
        return [f"{prefix}{k}" for k in range(1, count + 1)]
    return [f.text(raw.get("name"), f.join(path, "name"), "the workload's name")]


def _spec(
    raw: Mapping[str, Any], name: str, path: str, tree: OrgTree, pools: Mapping[str, Pool]
) -> WorkloadSpec:
    team = f.one_of(raw.get("team"), f.join(path, "team"), tree.teams, "team")
    if not tree.is_leaf(team):
        raise ValidationError(
            f.join(path, "team"),
            f"team {team!r} has children; workloads belong to leaf teams",
            ", ".join(tree.leaves()),
        )
    if raw.get("pool") is not None:
        f.one_of(raw["pool"], f.join(path, "pool"), pools, "pool")
    kwargs = {k: raw[k] for k in SPEC_KEYS if k in raw and k != "class"}
    if "class" in raw:
        kwargs["wclass"] = raw["class"]
    try:
        return make_spec(name=name, **kwargs)
    except ValidationError as err:
        raise err.at(path) from None


def _placement(
    raw: object, path: str, spec: WorkloadSpec, nodes: Mapping[str, Node]
) -> Placement:
    """One ``{node, devices}`` entry per pod, checked against the nodes.

    Whether the devices are free is checked when the workload is submitted.
    """
    items = f.sequence(raw, path, "pods ({node: NAME, devices: [INDEX, ...]})")
    if not spec.min_pods <= len(items) <= spec.pods:
        wanted = spec.pods if spec.min_pods == spec.pods else f"{spec.min_pods}..{spec.pods}"
        raise ValidationError(path, f"has {len(items)} entries; needs one per pod ({wanted})")
    pods: list[PodPlacement] = []
    for i, item in enumerate(items):
        pods.append(_pod_placement(item, f.join(path, i), spec, nodes))
    pool_names = {nodes[p.node].pool for p in pods}
    if len(pool_names) > 1:
        raise ValidationError(path, f"pods are in several pools ({', '.join(sorted(pool_names))})",
                              "all pods of a workload in one pool")
    pool = pool_names.pop()
    if spec.pool is not None and spec.pool != pool:
        raise ValidationError(path, f"the nodes are in pool {pool!r}, the workload asks for "
                                    f"pool {spec.pool!r}")
    return tuple(pods)


def _pod_placement(
    item: object, path: str, spec: WorkloadSpec, nodes: Mapping[str, Node]
) -> PodPlacement:
    raw = f.mapping(item, path, ("node", "devices"), "a pod's place")
    node = nodes[f.one_of(raw.get("node"), f.join(path, "node"), nodes, "node")]
    if node.state is NodeState.DOWN:
        raise ValidationError(f.join(path, "node"), f"node {node.name!r} is down")
    if spec.gpu_types and node.gpu_type not in spec.gpu_types:
        wanted = " or ".join(spec.gpu_types)
        raise ValidationError(f.join(path, "node"), f"node {node.name!r} has gpu_type "
                              f"{node.gpu_type!r}; the workload asks for {wanted}")
    dpath = f.join(path, "devices")
    devices = f.sequence(raw.get("devices"), dpath, "device indexes")
    if node.gpus == 0:
        raise ValidationError(dpath, f"node {node.name!r} has no GPUs")
    indexes = [f.integer(d, f.join(dpath, k), 0, node.gpus - 1) for k, d in enumerate(devices)]
    if len(set(indexes)) != len(indexes):
        raise ValidationError(dpath, "a device is listed twice")
    wanted = spec.request.whole_devices or 1
    if len(indexes) != wanted:
        raise ValidationError(
            dpath, f"lists {count_of(len(indexes), 'device')}; a pod of "
                   f"{spec.request.describe()} needs "
                   f"{wanted}", f"{wanted} device index(es) 0..{node.gpus - 1}",
        )
    milli = 1000 if spec.request.is_whole else spec.charge(node.gpu_memory_mib)
    return PodPlacement(node.name, tuple(DeviceShare(i, milli) for i in indexes))


def parse_events(
    raw: object, workloads: Sequence[ScenarioWorkload], nodes: Sequence[Node]
) -> list[ScenarioEvent]:
    """Events in file order; each addresses a workload submitted before it, or a node."""
    submitted = {w.spec.name: w.at for w in workloads}
    node_names = [n.name for n in nodes]
    events: list[ScenarioEvent] = []
    for i, item in enumerate(f.sequence(raw, "events", "events")):
        path = f.join("events", i)
        ev = f.mapping(item, path, EVENT_KEYS, "an event: {at: T, cancel: NAME} or similar")
        at = f.integer(ev.get("at", 0), f.join(path, "at"), 0, limits.MAX_SECONDS)
        kinds = [k for k in EVENT_KINDS if k in ev]
        if len(kinds) != 1:
            raise ValidationError(path, "an event needs exactly one action",
                                  ", ".join(EVENT_KINDS))
        kind = kinds[0]
        kpath = f.join(path, kind)
        if kind in WORKLOAD_EVENTS:
            target = f.one_of(ev[kind], kpath, submitted, "workload")
            if submitted[target] >= at:
                raise ValidationError(
                    kpath, f"workload {target!r} is submitted at {submitted[target]}, not "
                           f"before this event at {at} (the events of an instant apply "
                           "before its submissions)",
                )
        else:
            target = f.one_of(ev[kind], kpath, node_names, "node")
        events.append(ScenarioEvent(at, path, kind, target))
    return events
