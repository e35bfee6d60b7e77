"""A tiny engine-level harness: build a snapshot, run cycles to a fixed point,
apply plans with the real ``apply_plan``. No simulator, no clock."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from apportion.domain.cluster import Node, NodeState, Pool
from apportion.domain.lifecycle import Exiting, Status, WorkloadState, submitted, transition
from apportion.domain.org import Team, build_tree
from apportion.domain.workload import make_spec
from apportion.engine.apply import Preemption, apply_plan
from apportion.engine.cycle import DryRun, dry_run, run_cycle
from apportion.engine.plan import Plan
from apportion.engine.snapshot import ALL_SHORTCUTS, CycleConfig, Shortcuts, Snapshot


class NoFixedPoint(AssertionError):
    """Cycles kept changing the state (SPEC 8 lets a simulation stop with exit
    code 3 then; see docs/scheduling.md, "Preemption cycles")."""


def G(n: float) -> int:
    """GPUs to milli."""
    return round(n * 1000)


class World:
    def __init__(self, cycle_fn: Any = None, shortcuts: Shortcuts = ALL_SHORTCUTS) -> None:
        self.cycle_fn = cycle_fn or run_cycle
        self.shortcuts = shortcuts
        self.pools: dict[str, Pool] = {}
        self.nodes: list[Node] = []
        self.teams: list[Team] = []
        self.reservations: dict[tuple[str, str], int] = {}
        self.states: dict[int, WorkloadState] = {}
        self.exiting: tuple[Exiting, ...] = ()
        self.names: dict[str, int] = {}
        self.now = 0
        self.cycle_id = 0
        self.preemptions: list[Preemption] = []
        self.plans: list[Plan] = []
        self.instant_running = True

    # -- building ---------------------------------------------------------------
    def pool(self, name: str = "main", *, nodes: int = 1, gpus: int = 8,
             racks: dict[str, int] | None = None, **kw: Any) -> World:
        self.pools[name] = Pool(name, **kw)
        if racks:
            for rack, count in racks.items():
                for i in range(count):
                    self.nodes.append(Node(f"{name}-{rack}-n{i}", name, gpus,
                                           labels={"rack": rack, "zone": "z"}))
        else:
            for i in range(nodes):
                self.nodes.append(Node(f"{name}-n{i:03d}", name, gpus))
        return self

    def team(self, slug: str, parent: str | None = None, *, weight: int = 1,
             limit: int | None = None, **res: float) -> World:
        self.teams.append(Team(slug, parent=parent, bursting_priority=weight,
                               burst_limit_percent=limit))
        for pool, gpus in res.items():
            self.reservations[(slug, pool)] = G(gpus)
        return self

    def submit(self, name: str, team: str, gpus: float = 1, *, running: bool = False,
               **kw: Any) -> int:
        wclass = kw.pop("wclass", "elastic")
        spec = make_spec(name=name, team=team, wclass=wclass, gpus=gpus, **kw)
        wid = len(self.states) + 1
        self.states[wid] = submitted(wid, spec, self.now)
        self.names[name] = wid
        if running:
            self.settle()
            assert self.status(name) == "Running", (name, self.w(name).reason)
        return wid

    def down(self, node: str) -> None:
        self.nodes = [replace(n, state=NodeState.DOWN) if n.name == node else n
                      for n in self.nodes]

    # -- running ----------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The current state; tree and node tuples are kept while unchanged, so a
        kept-state cycle runner can reuse its work."""
        key = (tuple(self.teams), tuple(sorted(self.reservations.items())), tuple(self.nodes))
        if getattr(self, "_snap_key", None) != key:
            self._snap_key = key
            self._tree = build_tree(self.teams, self.reservations)
            self._nodes = tuple(self.nodes)
        live = tuple(w for w in self.states.values() if not w.status.is_terminal)
        return Snapshot(self.now, self._tree, self.pools, self._nodes, live,
                        tuple(e for e in self.exiting if e.exits_at > self.now))

    def cycle(self) -> Plan:
        self.cycle_id += 1
        config = CycleConfig(cycle_id=self.cycle_id, shortcuts=self.shortcuts)
        plan = self.cycle_fn(self.snapshot(), config)
        applied = apply_plan(self.states, self.exiting, plan)
        self.states = applied.states
        self.exiting = tuple(e for e in applied.exiting if e.exits_at > self.now)
        self.preemptions.extend(applied.preemptions)
        self.plans.append(plan)
        # Starting -> Running at once (no start delay in engine tests).
        for wid, w in list(self.states.items()) if self.instant_running else ():
            if w.status is Status.STARTING:
                self.states[wid] = transition(w, Status.RUNNING, self.now)
        return plan

    def settle(self, limit: int = 50) -> int:
        """Cycles until a plan changes nothing; returns how many ran."""
        for i in range(limit):
            if not self.cycle().changes_anything:
                return i + 1
        raise NoFixedPoint(f"no fixed point after {limit} cycles")

    def advance(self, seconds: int) -> None:
        self.now += seconds
        self.exiting = tuple(e for e in self.exiting if e.exits_at > self.now)

    def dry_run(self, name: str, team: str, gpus: float = 1, **kw: Any) -> DryRun:
        wclass = kw.pop("wclass", "elastic")
        spec = make_spec(name=name, team=team, wclass=wclass, gpus=gpus, **kw)
        return dry_run(self.snapshot(), spec, CycleConfig(cycle_id=999))

    # -- reading ----------------------------------------------------------------
    def w(self, name: str) -> WorkloadState:
        return self.states[self.names[name]]

    def status(self, name: str) -> str:
        return self.w(name).status.value

    def code(self, name: str) -> str | None:
        r = self.w(name).reason
        return r.code.value if r else None

    def running(self, prefix: str = "") -> list[str]:
        return sorted(n for n, i in self.names.items() if n.startswith(prefix)
                      and self.states[i].status in (Status.RUNNING, Status.STARTING))

    def preempted(self, prefix: str = "") -> list[str]:
        by_id = {i: n for n, i in self.names.items()}
        return sorted(by_id[p.victim] for p in self.preemptions
                      if by_id[p.victim].startswith(prefix))

    def usage(self, team: str, pool: str = "main") -> float:
        total = 0
        for w in self.states.values():
            if w.team == team and w.status.is_placed and w.pool == pool:
                total += w.placed_milli
        return total / 1000
