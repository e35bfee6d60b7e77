"""SPEC 6.5's cost puts Starting work before Running work (less work lost),
also when the cycle runs on a kept working state (``CycleCache``) that
re-reads the workloads the last plan touched."""

from __future__ import annotations

import pytest

from apportion.domain.lifecycle import Status, transition
from apportion.engine.cycle import run_cycle
from apportion.engine.kept_state import CycleCache
from apportion.engine.snapshot import CycleConfig
from tests.engine.harness import World


@pytest.mark.parametrize("kept", [False, True], ids=["fresh", "kept"])
def test_a_starting_workload_is_preempted_before_a_running_one(kept: bool) -> None:
    """Team a runs "old" (priority 10) and, from the last cycle, is starting
    "new" (priority 50); b's reserved job reclaims b's 1 GPU. Both are 1 GPU
    of elastic work of the same team: the Starting one goes, although the
    Running one has the lower priority (Running milli come first in the cost)."""
    cache = CycleCache()
    w = World(cache if kept else None).pool(nodes=1, gpus=2).team("a").team("b", main=1)
    w.submit("old", "a", 1, priority=10, running=True)
    w.instant_running = False  # "new" stays Starting
    w.submit("new", "a", 1, priority=50)
    w.settle()
    assert (w.status("old"), w.status("new")) == ("Running", "Starting")

    w.submit("owner", "b", 1, wclass="reserved")
    w.settle()
    assert w.preempted() == ["new"]
    assert (w.status("old"), w.status("owner")) == ("Running", "Starting")
    (p,) = w.preemptions
    assert (p.by, p.milli) == (w.names["owner"], 1000)
    if kept:
        assert cache.rebuilds == 1 and cache.kept > 0  # the kept state decided it


class Hinted:
    """A kept-state runner told which workloads changed, as the simulator
    calls it (``CycleCache.run`` with ``by_id`` and ``changed``)."""

    def __init__(self) -> None:
        self.cache = CycleCache()
        self.seen: dict[int, object] = {}

    def __call__(self, snapshot, config):  # type: ignore[no-untyped-def]
        by_id = {w.id: w for w in snapshot.workloads}
        changed = {i for i in by_id.keys() | self.seen.keys()
                   if by_id.get(i) is not self.seen.get(i)}
        self.seen = by_id
        return self.cache.run(snapshot, config, by_id, changed)


def _nominations_taken_and_finished(cycle_fn: object) -> tuple[list, dict[str, str]]:
    """b's reserved job preempts a's 8-GPU sweep and waits out the grace on
    its devices; a higher-priority job of b's takes that nomination; work
    completes and the victim's devices come free."""
    w = World(cycle_fn)
    w.pool(nodes=2, gpus=8, preemption_grace=60).team("a").team("b", main=8)
    w.submit("x", "a", 8, running=True, requeue_on_preemption=True)
    w.submit("y", "a", 7, running=True)
    w.submit("r", "b", 8, wclass="reserved")  # preempts x, nominated for 60 s
    w.submit("c", "b", 1)
    w.settle()
    w.advance(10)
    w.submit("r2", "b", 8, wclass="reserved", priority=500)  # takes r's nomination
    w.settle()
    w.advance(10)
    w.states[w.names["y"]] = transition(w.w("y"), Status.COMPLETED, w.now)
    w.settle()
    w.advance(60)
    w.settle()
    return [(p.decisions, p.entitlements) for p in w.plans], {n: w.status(n) for n in w.names}


def test_a_runner_told_what_changed_decides_as_a_fresh_cycle() -> None:
    hinted = Hinted()
    got = _nominations_taken_and_finished(hinted)
    assert got == _nominations_taken_and_finished(None)
    statuses = got[1]
    # r2 holds all of b's 8 reserved GPUs: r waits in line for them
    assert (statuses["r2"], statuses["r"]) == ("Running", "Queued")
    assert hinted.cache.rebuilds == 1  # every later cycle ran on the kept state


@pytest.mark.parametrize("runner", ["fresh", "kept", "hinted"])
def test_finished_work_leaves_its_teams_fair_share(runner: str) -> None:
    """SPEC 4: demand is the work a team has placed or waiting. When a's job
    completes, a is entitled to nothing and b's waiting job to the whole pool,
    also on a kept state that unloaded the finished job."""
    cycle_fn = {"fresh": None, "kept": CycleCache(), "hinted": Hinted()}[runner]
    w = World(cycle_fn).pool(nodes=1, gpus=8).team("a").team("b")
    w.submit("ya", "a", 4, running=True)
    w.submit("yb", "b", 4, running=True)
    w.settle()
    assert w.plans[-1].entitlements["main"]["a"] == 4000
    w.states[w.names["ya"]] = transition(w.w("ya"), Status.COMPLETED, w.now)
    w.submit("more", "b", 4)
    w.settle()
    shares = w.plans[-1].entitlements["main"]
    assert (shares["a"], shares["b"]) == (0, 8000)
    assert w.status("more") == "Running"


@pytest.mark.parametrize("runner", ["fresh", "kept", "hinted"])
def test_a_plan_never_applied_changes_nothing(runner: str) -> None:
    """A plan that is not applied (a stale snapshot) preempted the sweep for
    b's reserved job; the next cycle, on the same snapshot, decides the same:
    the sweep is still there to preempt, the owner still holds its place."""
    cycle_fn = {"fresh": run_cycle, "kept": CycleCache(), "hinted": Hinted()}[runner]
    w = World(cycle_fn).pool(nodes=1, gpus=8, preemption_grace=30).team("a").team("b", main=8)
    w.submit("sweep", "a", 8, running=True)
    w.submit("owner", "b", 8, wclass="reserved")
    unapplied = cycle_fn(w.snapshot(), CycleConfig(cycle_id=999))
    assert [d.kind.value for d in unapplied.decisions] == ["route", "preempt", "nominate"]
    first = len(w.plans)
    w.settle()
    assert w.plans[first].decisions == unapplied.decisions
    assert w.preempted() == ["sweep"]
    assert (w.status("owner"), w.code("owner")) == ("Queued", "PREEMPTING")
    w.advance(30)
    w.settle()
    assert w.status("owner") == "Running"


@pytest.mark.parametrize("runner", ["fresh", "kept", "hinted"])
def test_a_rack_s_victims_include_work_started_in_earlier_cycles(runner: str) -> None:
    """b's reserved 8-GPU gang must run in one rack (required topology); the
    only rack's node runs two of a's 4-GPU jobs, started one cycle apart:
    both are preempted (SPEC 6.5, per domain), also when the kept state
    indexed the second one after the first."""
    cycle_fn = {"fresh": None, "kept": CycleCache(), "hinted": Hinted()}[runner]
    w = World(cycle_fn).pool(racks={"r1": 1}, topology=("zone", "rack"))
    w.team("a").team("b", main=8)
    w.submit("old", "a", 4, running=True)
    w.submit("new", "a", 4, running=True)
    w.submit("owner", "b", 8, wclass="reserved", topology={"level": "rack", "mode": "required"})
    w.settle()
    assert w.preempted() == ["new", "old"]
    assert w.status("owner") == "Running"


@pytest.mark.parametrize("runner", ["fresh", "kept", "hinted"])
def test_work_routed_by_a_plan_never_applied_then_cancelled_leaves_no_demand(
    runner: str,
) -> None:
    """A cycle routed b's job (its demand counted in the pool from then on),
    but the plan was never applied (a stale snapshot), and the job was
    cancelled before the next cycle. SPEC 4's demand is the work placed or
    waiting: b has none, so a's two jobs are entitled to the whole pool."""
    cycle_fn = {"fresh": run_cycle, "kept": CycleCache(), "hinted": Hinted()}[runner]
    w = World(cycle_fn).pool(nodes=1, gpus=8).team("a").team("b")
    w.submit("ya", "a", 4, running=True)
    w.submit("ghost", "b", 8)
    unapplied = cycle_fn(w.snapshot(), CycleConfig(cycle_id=999))
    assert [d.kind.value for d in unapplied.decisions][:1] == ["route"]
    assert unapplied.entitlements["main"]["b"] > 0
    w.states[w.names["ghost"]] = transition(w.w("ghost"), Status.CANCELLED, w.now)
    w.submit("more", "a", 4)
    w.settle()
    shares = w.plans[-1].entitlements["main"]
    assert (shares["a"], shares["b"]) == (8000, 0)
    assert w.status("more") == "Running"
