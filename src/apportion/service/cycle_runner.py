"""The cycle runner: per organization, a snapshot -> the engine's plan -> the
states it makes, handed to the plan committer.

A cycle is optimistic: the snapshot is read in a read transaction, the engine
and ``apply_plan`` (pure) run outside any transaction, and the plan is
committed in a write transaction of its own, which refuses it if the snapshot
is no longer current (:class:`StaleSnapshot`). After two refusals the third
attempt reads, plans and commits under the organization's row lock, which no
other commit can overtake.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from apportion.engine.apply import Applied, apply_plan
from apportion.engine.plan import Plan
from apportion.engine.snapshot import CycleConfig
from apportion.service.errors import StaleSnapshot
from apportion.service.gcpause import paused_gc
from apportion.service.plan_committer import CycleOutcome
from apportion.service.snapshots import Loaded, StateCache, load_snapshot
from apportion.store.db import Database, Session
from apportion.store.repos import orgs as repo

#: commits one plan: (session, org id, snapshot, plan, start time, its states)
Commit = Callable[[Session, int, Loaded, Plan, float, Applied], CycleOutcome]
#: the engine: a snapshot's plan
EngineRun = Callable[[Loaded], Plan]


def run_engine(loaded: Loaded) -> Plan:
    """The engine's plan for ``loaded`` (with the cyclic collector paused)."""
    from apportion.engine.cycle import run_cycle

    with paused_gc():
        return run_cycle(loaded.snapshot, CycleConfig(cycle_id=loaded.cycle_id))


def apply_loaded(loaded: Loaded, plan: Plan) -> Applied:
    """The states ``plan`` makes of ``loaded``'s workloads and exiting victims."""
    snap = loaded.snapshot
    applied = apply_plan({w.id: w for w in snap.workloads}, snap.exiting, plan)
    if not loaded.gated:
        return applied
    # job control's changes (engine/gating.py) join the plan's: the plan never
    # names a workload gating changed, except a requeued attempt it then routed
    states = {**loaded.gated, **applied.states}
    changed = tuple(dict.fromkeys((*loaded.gated, *applied.changed)))
    return Applied(states, applied.exiting, changed, applied.preemptions)


class CycleRunner:
    """Reads snapshots (kept decoded between cycles in ``cache``) and runs the
    engine on them."""

    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        self.cache = StateCache()

    def orgs(self) -> list[int]:
        with self.db.read() as session:
            return [o.id for o in repo.list_orgs(session)]

    def run_org(self, org_id: int, commit: Commit, run: EngineRun = run_engine) -> CycleOutcome:
        """One cycle for ``org_id``: optimistic twice, then under the org's lock;
        ``commit`` writes the plan (in the write transaction given to it)."""
        for _attempt in range(2):
            started = time.perf_counter()
            with self.db.read() as session:
                loaded = load_snapshot(session, org_id, self.clock(), self.cache)
            plan = run(loaded)
            applied = apply_loaded(loaded, plan)  # pure: outside the write transaction
            try:
                with self.db.write() as session:
                    return commit(session, org_id, loaded, plan, started, applied)
            except StaleSnapshot:
                continue
        started = time.perf_counter()
        with self.db.write() as session:
            repo.lock_org(session, org_id)
            loaded = load_snapshot(session, org_id, self.clock(), self.cache)
            plan = run(loaded)
            return commit(session, org_id, loaded, plan, started, apply_loaded(loaded, plan))
