"""The simulated world: workload states, nodes, exiting victims and timers.

The runner (runner.py) drives it through time; the engine never sees it, only
the Snapshots it builds. Every status change goes through the domain's
``transition``/``requeue`` and then :meth:`World.put`, which keeps the active
set and the timers (start delay, duration) in step.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

from apportion.domain.cluster import Node, NodeState
from apportion.domain.lifecycle import Exiting, Status, WorkloadState, transition
from apportion.engine.apply import Preemption
from apportion.engine.gating import timeout_at
from apportion.engine.snapshot import Snapshot
from apportion.sim.scenario import Scenario

# Timer kinds, in the order SPEC 8 handles them within one instant; a run
# reaching its time limit (issue 16) is handled right after the completions.
COMPLETE, RUNNING, TICK, TIMEOUT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Note:
    """Something that happened outside the engine: a node event, or an event
    that was ignored (it addressed a terminal workload, for instance)."""

    at: int
    kind: str
    target: str
    message: str
    path: str = ""
    is_ignored: bool = False


class World:
    """Mutable state of one simulation run. Not shared between threads."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.now = 0
        self.nodes: dict[str, Node] = {n.name: n for n in scenario.nodes}
        self._node_tuple: tuple[Node, ...] = tuple(self.nodes.values())
        self.states: dict[int, WorkloadState] = {}  # every submitted workload
        self.active: dict[int, WorkloadState] = {}  # the non-terminal ones, by id
        self._waiting: set[int] = set()  # ids of the Pending and Queued ones
        self.exiting: tuple[Exiting, ...] = ()
        self.preemptions: list[Preemption] = []
        self.notes: list[Note] = []
        self.by_name = {w.spec.name: w.id for w in scenario.workloads}
        self.names = {w.id: w.spec.name for w in scenario.workloads}
        self._timers: list[tuple[int, int, int, int]] = []  # (at, kind, id, attempt)
        self._changed: set[int] = set()  # ids put since take_changed
        #: job control (issue 16) is used: cycles go through engine/gating.py
        self.job_control = any(
            w.held or w.array_id is not None or w.spec.after for w in scenario.workloads)

    # -- state changes -------------------------------------------------------
    def put(self, new: WorkloadState) -> None:
        """Store ``new``; start its start-delay or duration clock when it has
        just become Starting (with no start delay it runs at once)."""
        old = self.states.get(new.id)
        self.states[new.id] = new
        self._changed.add(new.id)
        if new.status.is_terminal:
            self.active.pop(new.id, None)
        else:
            self.active[new.id] = new
        if new.status.is_waiting:
            self._waiting.add(new.id)
        else:
            self._waiting.discard(new.id)
        is_new_start = new.status is Status.STARTING and (
            old is None or old.status is not Status.STARTING or old.attempt != new.attempt
        )
        if is_new_start:
            delay = self.scenario.pools[new.pool or ""].start_delay
            if delay == 0:
                self.make_running(new)
            else:
                self._push(self.now + delay, RUNNING, new)

    def make_running(self, w: WorkloadState) -> None:
        """Starting -> Running now; its duration counts from here."""
        running = transition(w, Status.RUNNING, self.now, "executor", "all pods run")
        duration = w.spec.duration
        if duration == 0:
            running = transition(running, Status.COMPLETED, self.now, "executor",
                                 "finished (duration 0)")
        elif duration is not None:
            self._push(self.now + duration, COMPLETE, running)
        ends = timeout_at(running, self.scenario.pools.get(w.pool or ""))
        if ends is not None and running.status is Status.RUNNING and (
                duration is None or self.now + duration > ends):
            self._push(ends, TIMEOUT, running)  # time_limit bounds duration
        self.put(running)

    def complete(self, w: WorkloadState) -> None:
        done = transition(w, Status.COMPLETED, self.now, "executor",
                          f"finished after {w.spec.duration} s of running")
        self.put(done)

    def set_node_state(self, name: str, state: NodeState) -> None:
        self.nodes[name] = replace(self.nodes[name], state=state)
        self._node_tuple = tuple(self.nodes.values())

    def note(self, note: Note) -> None:
        self.notes.append(note)

    # -- timers --------------------------------------------------------------
    def _push(self, at: int, kind: int, w: WorkloadState) -> None:
        heapq.heappush(self._timers, (at, kind, w.id, w.attempt))

    def push_tick(self, at: int, w: WorkloadState) -> None:
        """Wake the scheduler at ``at`` (a starvation hold falls due)."""
        self._push(at, TICK, w)

    def _is_live(self, timer: tuple[int, int, int, int]) -> bool:
        """A timer still means something (its workload did not move on)."""
        at, kind, wid, attempt = timer
        w = self.active.get(wid)
        if w is None or w.attempt != attempt:
            return False
        if kind == COMPLETE:
            return w.status is Status.RUNNING and w.running_at is not None and (
                w.running_at + (w.spec.duration or 0) == at
            )
        if kind == TIMEOUT:
            return timeout_at(w, self.scenario.pools.get(w.pool or "")) == at
        if kind == RUNNING:
            pool = self.scenario.pools[w.pool or ""]
            return w.status is Status.STARTING and w.started_at == at - pool.start_delay
        return w.status.is_waiting and not w.is_hold

    def next_timer(self) -> int | None:
        """When the earliest live timer falls due (stale ones are dropped)."""
        while self._timers and not self._is_live(self._timers[0]):
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def due(self, at: int) -> list[tuple[int, int]]:
        """Pop the live timers due at ``at``: (kind, id), in kind then id order."""
        out: list[tuple[int, int]] = []
        while self._timers and self._timers[0][0] <= at:
            timer = heapq.heappop(self._timers)
            if self._is_live(timer):
                out.append((timer[1], timer[2]))
        return sorted(out)

    # -- views ---------------------------------------------------------------
    def snapshot(self, version: int) -> Snapshot:
        return Snapshot(
            now=self.now,
            tree=self.scenario.tree,
            pools=self.scenario.pools,
            nodes=self._node_tuple,
            workloads=tuple(self.active.values()),
            exiting=self.exiting,
            version=version,
        )

    def take_changed(self) -> set[int]:
        """Ids of the workloads stored (changed, arrived or ended) since the last call."""
        changed, self._changed = self._changed, set()
        return changed

    def has_waiting(self) -> bool:
        return bool(self._waiting)

    def occupancy(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """(node, device) -> [(workload id, milli)] for placed work, nominations
        and exiting victims: what a given placement must not collide with."""
        held: dict[tuple[str, int], list[tuple[int, int]]] = {}
        pods = [(w.id, p) for w in self.active.values() for p in (*w.placement, *w.nomination)]
        pods += [(e.workload_id, p) for e in self.exiting for p in e.placement]
        for wid, pod in pods:
            for d in pod.devices:
                held.setdefault((pod.node, d.index), []).append((wid, d.milli))
        return held
