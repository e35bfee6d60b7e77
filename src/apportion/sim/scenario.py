"""Scenario files (SPEC section 8): YAML in, validated domain objects out.

Every error is a :class:`ValidationError` whose ``field`` is the path of the bad
field in the file (``teams[0].children[1].reservations.main``), so the CLI can
print one clear line and exit 2. Unknown keys are errors with a "did you mean".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from apportion.domain import limits
from apportion.domain.cluster import (
    DEFAULT_GPU_MEMORY_MIB,
    Node,
    NodeState,
    Packing,
    Pool,
    pool_capacity,
)
from apportion.domain.errors import ValidationError
from apportion.domain.jobcontrol import parse_time_limit
from apportion.domain.org import OrgTree, build_tree, validate_reservations
from apportion.sim import fields as f
from apportion.sim.teams import parse_teams
from apportion.sim.workloads import ScenarioEvent, ScenarioWorkload, parse_events, parse_workloads

TOP_KEYS = ("description", "pools", "teams", "workloads", "events")
POOL_KEYS = (
    "name", "gpu_type", "gpu_memory_mib", "topology", "start_delay", "preemption_grace",
    "starvation_hold_after", "packing", "typical_pods", "nodes",
    "default_time_limit", "max_time_limit",
)
NODE_KEYS = ("name", "prefix", "count", "gpus", "gpu_type", "gpu_memory_mib", "cpu",
             "memory_mib", "labels", "state")


@dataclass(frozen=True, slots=True)
class Scenario:
    """A parsed, validated scenario. ``team_order`` lists teams as in the file
    (parents before children); ``workloads`` are in id order; ``events`` in
    file order."""

    description: str
    pools: Mapping[str, Pool]
    nodes: tuple[Node, ...]
    tree: OrgTree
    team_order: tuple[str, ...]
    workloads: tuple[ScenarioWorkload, ...]
    events: tuple[ScenarioEvent, ...]


def load_scenario(path: str) -> Scenario:
    """Read and parse the file at ``path`` (``-`` is not handled here)."""
    try:
        with open(path, encoding="utf-8") as fh:
            content = fh.read()
    except OSError as err:
        raise ValidationError("", f"cannot read the file: {err.strerror or err}") from None
    return parse_scenario(content)


def parse_scenario(content: str) -> Scenario:
    """Parse YAML text into a Scenario; raise ValidationError naming the field."""
    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError as err:
        raise ValidationError("", f"not valid YAML: {_yaml_problem(err)}") from None
    return scenario_from_data(data)


def scenario_from_data(data: object) -> Scenario:
    """Validate already-loaded YAML data (dicts and lists) into a Scenario."""
    if data is None:
        data = {}
    top = f.mapping(data, "", TOP_KEYS, "a scenario")
    pools, nodes = parse_pools(top.get("pools"))
    teams, reservations, team_paths = parse_teams(top.get("teams"), pools)
    tree = _build_tree(teams, reservations, team_paths, pools, nodes)
    workloads = parse_workloads(top.get("workloads"), tree, pools, nodes)
    events = parse_events(top.get("events"), workloads, nodes)
    description = top.get("description") or ""
    if not isinstance(description, str):
        raise ValidationError("description", "must be a string")
    return Scenario(
        description=description.strip(),
        pools=pools,
        nodes=nodes,
        tree=tree,
        team_order=tuple(team_paths),
        workloads=tuple(workloads),
        events=tuple(events),
    )


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return str(problem)


# -- pools and nodes ---------------------------------------------------------


def parse_pools(raw: object) -> tuple[dict[str, Pool], tuple[Node, ...]]:
    """Pools in file order, and every node of every pool (names unique)."""
    items = f.sequence(raw, "pools", "pools")
    if not items:
        raise ValidationError("pools", "at least one pool is required")
    pools: dict[str, Pool] = {}
    nodes: list[Node] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items):
        path = f.join("pools", i)
        pool = _parse_pool(item, path)
        if pool.name in pools:
            raise ValidationError(f.join(path, "name"), f"pool {pool.name!r} is defined twice")
        pools[pool.name] = pool
        raw_nodes = f.sequence(item.get("nodes"), f.join(path, "nodes"), "nodes")
        for j, raw_node in enumerate(raw_nodes):
            npath = f.join(f.join(path, "nodes"), j)
            entry = _parse_nodes(raw_node, npath, pool)
            _check_totals(nodes, entry, npath)
            for node in entry:
                if node.name in seen:
                    raise ValidationError(
                        npath, f"node {node.name!r} is already defined at {seen[node.name]}"
                    )
                seen[node.name] = npath
                nodes.append(node)
    return pools, tuple(nodes)


def _check_totals(nodes: Sequence[Node], entry: Sequence[Node], path: str) -> None:
    """The file's nodes and GPUs with ``entry`` stay within the limits (each
    device is simulated: 100,000 nodes of 1024 GPUs each would never finish)."""
    if len(nodes) + len(entry) > limits.MAX_NODES:
        raise ValidationError(
            path, f"brings the file to {len(nodes) + len(entry)} nodes",
            f"at most {limits.MAX_NODES} nodes in all")
    gpus = sum(n.gpus for n in nodes) + sum(n.gpus for n in entry)
    if gpus > limits.MAX_SCENARIO_GPUS:
        raise ValidationError(
            path, f"brings the file to {gpus} GPUs",
            f"at most {limits.MAX_SCENARIO_GPUS} GPUs on all nodes")


def _parse_pool(item: object, path: str) -> Pool:
    raw = f.mapping(item, path, POOL_KEYS, "a pool")
    name = f.text(raw.get("name"), f.join(path, "name"), "the pool's name")
    topology = f.sequence(raw.get("topology"), f.join(path, "topology"), "label keys")
    for k, level in enumerate(topology):
        f.text(level, f.join(f.join(path, "topology"), k), "a label key")
    gpu_type = raw.get("gpu_type")
    if gpu_type is not None:
        gpu_type = f.text(gpu_type, f.join(path, "gpu_type"))
    hold = raw.get("starvation_hold_after")
    settings = {
        "gpu_memory_mib": f.integer(raw.get("gpu_memory_mib", DEFAULT_GPU_MEMORY_MIB),
                                    f.join(path, "gpu_memory_mib"), 1,
                                    limits.MAX_GPU_MEMORY_MIB),
        "start_delay": f.integer(raw.get("start_delay", 0), f.join(path, "start_delay"), 0,
                                 limits.MAX_SECONDS),
        "preemption_grace": f.integer(raw.get("preemption_grace", 0),
                                      f.join(path, "preemption_grace"), 0, limits.MAX_SECONDS),
        "starvation_hold_after": None if hold is None else f.integer(
            hold, f.join(path, "starvation_hold_after"), 0, limits.MAX_SECONDS),
        "packing": f.choice(raw.get("packing", Packing.FRAGMENTATION.value),
                            f.join(path, "packing"), [p.value for p in Packing]),
        "typical_pods": raw.get("typical_pods"),
        **{k: parse_time_limit(raw[k], f.join(path, k)) for k in
           ("default_time_limit", "max_time_limit") if raw.get(k) is not None},
    }
    try:
        return Pool(name=name, gpu_type=gpu_type, topology=tuple(topology), **settings)
    except ValidationError as err:
        raise err.at(path) from None


def _parse_nodes(item: object, path: str, pool: Pool) -> list[Node]:
    """One node, or ``count`` nodes named ``prefix1..prefixN``."""
    raw = f.mapping(item, path, NODE_KEYS, "a node")
    if "prefix" in raw or "count" in raw:
        if "name" in raw:
            raise ValidationError(f.join(path, "name"), "give either name or prefix + count")
        prefix = f.text(raw.get("prefix"), f.join(path, "prefix"), "a name prefix")
        # checked before a single name is made: a typo of a few zeros must be an
        # error, not a process that grows until the kernel kills it
        count = f.integer(raw.get("count"), f.join(path, "count"), 1, limits.MAX_NODES)
        names = [f"{prefix}{k}" for k in range(1, count + 1)]
    else:
        names = [f.text(raw.get("name"), f.join(path, "name"), "the node's name")]
    state = raw.get("state", "ready")
    if state not in {s.value for s in NodeState}:
        raise ValidationError(f.join(path, "state"), f"{state!r} is not a node state",
                              "ready, cordoned, down")
    gpu_type = raw.get("gpu_type", pool.gpu_type)
    if gpu_type is not None:
        gpu_type = f.text(gpu_type, f.join(path, "gpu_type"))
    memory = f.integer(
        raw.get("gpu_memory_mib", pool.gpu_memory_mib), f.join(path, "gpu_memory_mib"), 1,
        limits.MAX_GPU_MEMORY_MIB)
    gpus = f.integer(raw.get("gpus"), f.join(path, "gpus"), 0, limits.MAX_NODE_GPUS)
    node_labels = f.labels(raw.get("labels"), f.join(path, "labels"))
    # absent = not limited (SPEC 5); parsed and kept, not used by placement yet
    cpu = None if raw.get("cpu") is None else f.cpu(raw["cpu"], f.join(path, "cpu"))
    host_memory = None if raw.get("memory_mib") is None else f.memory_mib(
        raw["memory_mib"], f.join(path, "memory_mib"))
    return [
        Node(name=name, pool=pool.name, gpus=gpus, gpu_type=gpu_type, gpu_memory_mib=memory,
             labels=node_labels, state=NodeState(state), cpu_milli=cpu,
             memory_mib=host_memory)
        for name in names
    ]


def _build_tree(
    teams: Sequence[Any],
    reservations: Mapping[tuple[str, str], int],
    team_paths: Mapping[str, str],
    pools: Mapping[str, Pool],
    nodes: Sequence[Node],
) -> OrgTree:
    """The org tree, with SPEC 2's reservation rules checked against capacity."""
    tree = build_tree(teams, reservations)
    capacities = {p: pool_capacity(n for n in nodes if n.pool == p) for p in pools}
    try:
        validate_reservations(tree, capacities, pools)
    except ValidationError as err:
        raise _reservation_error(err, team_paths) from None
    return tree


def _reservation_error(err: ValidationError, team_paths: Mapping[str, str]) -> ValidationError:
    """Re-point ``reservations.<team>.<pool>`` at the team's place in the file."""
    parts = err.field.split(".")
    if len(parts) == 3 and parts[1] in team_paths:
        field = f"{team_paths[parts[1]]}.reservations.{parts[2]}"
    else:
        field = "teams"
    return ValidationError(field, err.message, err.allowed)
