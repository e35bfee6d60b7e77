"""What happens to the world outside the engine: scenario events (cancel,
complete, fail, node_down/up, cordon/uncordon) and submissions, including
workloads given a ``placement`` that start exactly there."""

from __future__ import annotations

from dataclasses import replace

from apportion.domain.cluster import NodeState
from apportion.domain.errors import ValidationError
from apportion.domain.lifecycle import (
    Status,
    WorkloadState,
    requeue_after_failure,
    submitted,
    transition,
)
from apportion.domain.quantities import format_gpus
from apportion.sim.scenario import ScenarioEvent, ScenarioWorkload
from apportion.sim.world import Note, World

# Where a workload event may take a workload, and from which statuses.
_MESSAGES = {"cancel": "cancelled by a user", "complete": "finished", "fail": "executor error"}
_WORKLOAD_MOVES = {
    "cancel": (Status.CANCELLED, (Status.PENDING, Status.QUEUED, Status.STARTING,
                                  Status.RUNNING)),
    "complete": (Status.COMPLETED, (Status.RUNNING,)),
    "fail": (Status.FAILED, (Status.STARTING, Status.RUNNING)),
}
# Node events: (new state, the states it applies to).
_NODE_MOVES = {
    "node_down": (NodeState.DOWN, (NodeState.READY, NodeState.CORDONED)),
    "node_up": (NodeState.READY, (NodeState.DOWN,)),
    "cordon": (NodeState.CORDONED, (NodeState.READY,)),
    "uncordon": (NodeState.READY, (NodeState.CORDONED,)),
}


def apply_event(world: World, ev: ScenarioEvent) -> None:
    """Apply one event at ``world.now``. One that cannot apply (a terminal
    workload, a node already in that state) is ignored and recorded."""
    if ev.kind in _WORKLOAD_MOVES or ev.kind in ("hold", "release"):
        _workload_event(world, ev)
    else:
        _node_event(world, ev)


def _workload_event(world: World, ev: ScenarioEvent) -> None:
    w = world.states[world.by_name[ev.target]]
    if ev.kind in ("hold", "release"):
        _hold_event(world, ev, w, ev.kind == "hold")
        return
    target, sources = _WORKLOAD_MOVES[ev.kind]
    if w.status not in sources:
        why = "it has ended" if w.status.is_terminal else "that needs " + " or ".join(
            s.value for s in sources
        )
        world.note(Note(world.now, ev.kind, ev.target, f"ignored: {ev.target} is "
                        f"{w.status.value}; {why}", ev.path, is_ignored=True))
        return
    world.put(transition(w, target, world.now, f"event {ev.path}",
                          f"{_MESSAGES[ev.kind]} (scenario {ev.path})"))


def _hold_event(world: World, ev: ScenarioEvent, w: WorkloadState, hold: bool) -> None:
    """Hold or release a waiting workload (issue 16); gating does the rest."""
    if not w.status.is_waiting or w.held == hold:
        why = f"it is {w.status.value}" if not w.status.is_waiting else (
            "it is already " + ("held" if hold else "not held"))
        world.note(Note(world.now, ev.kind, ev.target, f"ignored: {why}", ev.path,
                        is_ignored=True))
        return
    world.put(replace(w, held=hold))
    world.note(Note(world.now, ev.kind, ev.target,
                    f"{ev.target} {'held' if hold else 'released'}", ev.path))


def _node_event(world: World, ev: ScenarioEvent) -> None:
    node = world.nodes[ev.target]
    target, sources = _NODE_MOVES[ev.kind]
    if node.state not in sources:
        world.note(Note(world.now, ev.kind, ev.target,
                        f"ignored: node {ev.target} is {node.state.value}", ev.path, True))
        return
    world.set_node_state(ev.target, target)
    message = f"node {ev.target} is {target.value}"
    if target is NodeState.DOWN:
        message += _fail_workloads_on(world, ev.target, ev.path)
    world.note(Note(world.now, ev.kind, ev.target, message, ev.path))


def _fail_workloads_on(world: World, node: str, path: str) -> str:
    """Fail (or, with requeue_on_preemption, requeue) the work with pods on
    ``node``; drop nominations there (those devices are gone)."""
    failed: list[str] = []
    for w in list(world.active.values()):
        if w.status.is_placed and any(p.node == node for p in w.placement):
            world.put(_fail(w, world.now, f"event {path}", f"node {node} went down"))
            failed.append(w.name)
        elif any(p.node == node for p in w.nomination):
            world.put(replace(w, nomination=(), is_hold=False))
    return f"; failed: {', '.join(failed)}" if failed else ""


def _fail(w: WorkloadState, at: int, cause: str, message: str) -> WorkloadState:
    """The attempt fails; with requeue_on_preemption a new attempt starts in
    Pending, as after a preemption (original submission time, full duration)."""
    if w.spec.requeue_on_preemption:
        return requeue_after_failure(w, at, cause, message)
    return transition(w, Status.FAILED, at, cause, message)


def submit(world: World, sw: ScenarioWorkload) -> None:
    """Submit ``sw`` now: Pending, or with a given placement straight to Starting."""
    w = submitted(sw.id, sw.spec, world.now, "scenario", f"submitted ({sw.path})")
    if sw.held or sw.array_id is not None:
        w = replace(w, held=sw.held, array_id=sw.array_id, array_index=sw.array_index,
                    array_limit=sw.array_limit)
    if sw.placement is not None:
        _check_free(world, sw)
        pool = world.nodes[sw.placement[0].node].pool
        w = transition(w, Status.QUEUED, world.now, "scenario", f"pool {pool} given", pool=pool)
        w = transition(w, Status.STARTING, world.now, "scenario", "placement given in the file",
                       placement=sw.placement)
    world.put(w)


def _check_free(world: World, sw: ScenarioWorkload) -> None:
    """A given placement must fit on ready or cordoned nodes, on devices free now."""
    held = world.occupancy()
    assert sw.placement is not None
    for i, pod in enumerate(sw.placement):
        path = f"{sw.path}.placement[{i}]"
        if world.nodes[pod.node].state is NodeState.DOWN:
            raise ValidationError(f"{path}.node", f"node {pod.node!r} is down at {world.now}")
        for d in pod.devices:
            users = held.setdefault((pod.node, d.index), [])
            used = sum(m for _wid, m in users)
            if used + d.milli > 1000:
                who = ", ".join(sorted({world.names.get(wid, str(wid)) for wid, _m in users}))
                raise ValidationError(
                    f"{path}.devices",
                    f"device {d.index} of node {pod.node} has {format_gpus(1000 - used)} GPU "
                    f"free at time {world.now} (held by {who}); the pod needs "
                    f"{format_gpus(d.milli)}",
                    "devices free at the workload's `at`",
                )
            users.append((sw.id, d.milli))
