"""Virtual-time runner: a scenario through the real engine (SPEC section 8).

At each instant, in this order: Running workloads whose duration ends
complete; victims whose grace ends exit; Starting workloads whose start delay
ends become Running; the instant's events apply in file order; its workloads
are submitted in file order; then cycles run until a plan changes nothing (at
most 100). Then time advances to the earliest future instant.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction

from apportion.domain.cluster import Node
from apportion.domain.errors import ApportionError
from apportion.domain.lifecycle import Exiting, WorkloadState
from apportion.engine import kept_state as engine_cache
from apportion.engine.apply import Preemption, apply_plan
from apportion.engine.gating import Gated, gate, time_out
from apportion.engine.kept_state import CycleCache
from apportion.engine.plan import DecisionKind, Plan
from apportion.engine.policy import SPEC_POLICY, Policy
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.sim.events import apply_event, submit
from apportion.sim.scenario import Scenario
from apportion.sim.world import COMPLETE, RUNNING, TIMEOUT, Note, World

MAX_CYCLES_PER_INSTANT = 100
HORIZON = 864_000  # 10 days: a run without --until stops here at the latest
SETTLE_EVERY = 500  # instants between two gc.freeze() calls (see _settled_objects)

CycleFn = Callable[[Snapshot, CycleConfig], Plan]


@dataclass(frozen=True, slots=True)
class Hooks:
    """What a caller may watch in a run (``apportion replay``): ``instant(at)``
    after each instant, ``cycle(seconds)`` with each cycle's wall time."""

    instant: Callable[[int], None] | None = None
    cycle: Callable[[float], None] | None = None


class CycleLimitError(ApportionError):
    """Cycles at one instant kept changing things (exit code 3)."""

    def __init__(self, at: int, names: list[str]) -> None:
        self.at = at
        self.names = names
        shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
        super().__init__(
            f"at time {at}: still changing after {MAX_CYCLES_PER_INSTANT} scheduling cycles "
            f"in one instant; workloads still changing: {shown}"
        )


@dataclass
class SimResult:
    """The outcome of a run: the state at ``time`` and what led to it.

    ``states`` holds the submitted workloads by id; ``entitlements`` come from
    a cycle on the final state; ``horizon_reached`` tells a run cut at 10 days.
    """

    scenario: Scenario
    time: int
    states: dict[int, WorkloadState]
    nodes: tuple[Node, ...]
    exiting: tuple[Exiting, ...]
    preemptions: list[Preemption]
    notes: list[Note]
    entitlements: Mapping[str, Mapping[str, Fraction]]
    cycles: int = 0
    instants: int = 0
    horizon_reached: bool = False
    counters: dict[str, int] = field(default_factory=dict)

    def name(self, workload_id: int) -> str:
        return self.states[workload_id].name if workload_id in self.states else str(workload_id)


@contextmanager
def _settled_objects() -> Iterator[Callable[[], None]]:
    """Yields a function that moves every object alive now out of the cyclic
    garbage collector's sight (gc.freeze) until the block ends.

    A run keeps every state it ever made (they are its result) and the
    engine's kept state; without this, each full collection walks all of them
    again, about a tenth of a long run. They hold no reference cycles to
    collect. Does nothing when the caller froze objects itself (unfreezing
    would release theirs too) or disabled the collector.
    """
    if gc.get_freeze_count() or not gc.isenabled():
        yield lambda: None
        return
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def simulate(
    scenario: Scenario, until: int | None = None, cycle: CycleFn | None = None,
    policy: Policy = SPEC_POLICY, hooks: Hooks | None = None,
) -> SimResult:
    """Run ``scenario`` to its end (or to ``until``) and return the outcome.

    ``cycle`` is the engine's cycle unless given (tests pass others): a
    :class:`CycleCache`, which keeps the working state between cycles and makes
    the same plans as ``run_cycle``.

    ``policy`` is passed to every cycle (engine/policy.py; the SPEC's by
    default) and ``hooks`` are told of instants and cycle times.

    Raises CycleLimitError when one instant needs more than 100 cycles, and
    ValidationError when a given placement does not fit when it is submitted.
    """
    return _Runner(scenario, cycle, policy, hooks or Hooks()).run(until)


class _Runner:
    def __init__(
        self, scenario: Scenario, cycle: CycleFn | None, policy: Policy = SPEC_POLICY,
        hooks: Hooks | None = None,
    ) -> None:
        self.world = World(scenario)
        self.policy = policy
        self.hooks = hooks or Hooks()
        made = CycleCache() if cycle is None else None
        #: Our own kept-state runner is told what changed (the world knows).
        self.cache = made if isinstance(made, engine_cache.CycleCache) else None
        self.cycle: CycleFn = cycle or made or CycleCache()
        self.cycle_id = 0
        self.instants = 0
        self.counters: dict[str, int] = {}
        self.events = sorted(scenario.events, key=lambda e: e.at)  # stable: file order
        self.submissions = list(scenario.workloads)  # id order is time order
        self.next_event = 0
        self.next_submission = 0
        self.has_holds = any(p.starvation_hold_after is not None for p in scenario.pools.values())
        self.ticks: set[tuple[int, int]] = set()  # (id, head_since) already woken for

    def run(self, until: int | None) -> SimResult:
        last = 0
        is_cut = False
        with _settled_objects() as settle:
            while (at := self._next_instant()) is not None:
                if until is not None and at > until:
                    break
                if until is None and at > HORIZON:
                    is_cut = True
                    break
                self._instant(at)
                if self.hooks.instant is not None:
                    self.hooks.instant(at)
                last = at
                if self.instants % SETTLE_EVERY == 0:
                    settle()
            self.world.now = last if until is None else until
            plan = self._plan()
        w = self.world
        return SimResult(
            scenario=w.scenario, time=w.now, states=dict(w.states),
            nodes=tuple(w.nodes.values()), exiting=w.exiting, preemptions=list(w.preemptions),
            notes=list(w.notes), entitlements=plan.entitlements, cycles=self.cycle_id,
            instants=self.instants, horizon_reached=is_cut, counters=dict(self.counters),
        )

    def _next_instant(self) -> int | None:
        """The earliest future instant: a duration ending, an exit, a start
        delay ending, an event, a submission (or a starvation hold due)."""
        times = [self.world.next_timer()]
        times += [e.exits_at for e in self.world.exiting]
        if self.next_event < len(self.events):
            times.append(self.events[self.next_event].at)
        if self.next_submission < len(self.submissions):
            times.append(self.submissions[self.next_submission].at)
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def _instant(self, at: int) -> None:
        """Process one instant in SPEC 8's order."""
        w = self.world
        w.now = at
        self.instants += 1
        due = w.due(at)
        for kind, wid in due:  # 1. durations end
            if kind == COMPLETE:
                w.complete(w.active[wid])
        for kind, wid in due:  # 1b. runs reach their time limit (issue 16)
            if kind == TIMEOUT and wid in w.active:
                self._time_out(w.active[wid])
        w.exiting = tuple(e for e in w.exiting if e.exits_at > at)  # 2. victims exit
        for kind, wid in due:  # 3. start delays end
            if kind == RUNNING and wid in w.active:
                w.make_running(w.active[wid])
        while self.next_event < len(self.events) and self.events[self.next_event].at == at:
            apply_event(w, self.events[self.next_event])  # 4. events, file order
            self.next_event += 1
        while (self.next_submission < len(self.submissions)
               and self.submissions[self.next_submission].at == at):
            submit(w, self.submissions[self.next_submission])  # 5. submissions
            self.next_submission += 1
        self._converge(at)  # 6. cycles until nothing changes
        if self.has_holds:
            self._schedule_holds()

    def _time_out(self, state: WorkloadState) -> None:
        """End a run at its time limit, as the service does (engine/gating.py)."""
        new, leaving, _stop = time_out(state, self.world.scenario.pools[state.pool or ""],
                                       self.world.now)
        self.world.put(new)
        if leaving is not None:
            self.world.exiting = (*self.world.exiting, leaving)

    def _gate(self) -> Gated:
        """Job control's changes (held, dependencies, array limits), put into
        the world; returns the snapshot the engine sees."""
        w = self.world
        outside = {i: s.status for i, s in w.states.items() if s.status.is_terminal}
        gated = gate(w.snapshot(self.cycle_id + 1), outside)
        for state in gated.changed.values():
            w.put(state)
        w.exiting = gated.snapshot.exiting
        return gated

    def _converge(self, at: int) -> None:
        """Run cycles until a plan changes nothing. A cycle is skipped when no
        workload waits: every decision is about waiting work, so it could
        change nothing."""
        plan: Plan | None = None
        for _ in range(MAX_CYCLES_PER_INSTANT):
            if not self.world.has_waiting():
                return
            gated = self._gate() if self.world.job_control else None
            plan = self._plan(gated.snapshot if gated is not None else None)
            applied = apply_plan(self.world.active, self.world.exiting, plan)
            self.world.exiting = applied.exiting
            self.world.preemptions.extend(applied.preemptions)
            for wid in applied.changed:
                self.world.put(applied.states[wid])
            if not plan.changes_anything and (gated is None or not gated.changed):
                return
        assert plan is not None
        moving = sorted({d.workload_id for d in plan.decisions if d.kind is not DecisionKind.WAIT})
        raise CycleLimitError(at, [self.world.names.get(i, str(i)) for i in moving])

    def _plan(self, gated: Snapshot | None = None) -> Plan:
        """One cycle of the real engine on the current state (not applied);
        ``gated``: the snapshot job control left for the engine."""
        self.cycle_id += 1
        snapshot = self.world.snapshot(self.cycle_id) if gated is None else gated
        config = CycleConfig(cycle_id=self.cycle_id, policy=self.policy)
        began = time.perf_counter() if self.hooks.cycle is not None else 0.0
        if gated is not None:
            self.world.take_changed()
            plan = self.cycle(snapshot, config)  # the cache works out what changed
        elif self.cache is not None:
            plan = self.cache.run(snapshot, config, self.world.active, self.world.take_changed())
        else:
            plan = self.cycle(snapshot, config)
        if self.hooks.cycle is not None:
            self.hooks.cycle(time.perf_counter() - began)
        for key, value in plan.counters.items():
            self.counters[key] = self.counters.get(key, 0) + value
        return plan

    def _schedule_holds(self) -> None:
        """Wake up when a waiting workload's starvation hold falls due."""
        for w in self.world.active.values():
            if not w.status.is_waiting or w.is_hold or w.head_since is None or w.pool is None:
                continue
            hold = self.world.scenario.pools[w.pool].starvation_hold_after
            key = (w.id, w.head_since)
            if hold is not None and w.head_since + hold > self.world.now and key not in self.ticks:
                self.ticks.add(key)
                self.world.push_tick(w.head_since + hold, w)
