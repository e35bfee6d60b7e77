"""engine/gating.py: job control before the engine (issue 16), on hand-made
snapshots: time limits, dependency conditions, holds and array limits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apportion.domain.cluster import Node, Pool
from apportion.domain.jobcontrol import DepCondition, Dependency
from apportion.domain.lifecycle import Status, WorkloadState, submitted, transition
from apportion.domain.org import Team, build_tree
from apportion.domain.workload import DeviceShare, PodPlacement, make_spec
from apportion.engine.gating import (
    MET,
    NEVER,
    WAIT,
    dependency_state,
    effective_time_limit,
    gate,
)
from apportion.engine.snapshot import Snapshot

POOL = Pool("main", preemption_grace=30, default_time_limit=100, max_time_limit=500)
PLACE = (PodPlacement("n1", (DeviceShare(0, 1000),)),)


def _snap(*workloads: WorkloadState, now: int = 0, pool: Pool = POOL) -> Snapshot:
    tree = build_tree([Team("t")], {})
    return Snapshot(now=now, tree=tree, pools={"main": pool},
                    nodes=(Node("n1", "main", 8),), workloads=workloads)


def _waiting(wid: int, **spec: object) -> WorkloadState:
    return submitted(wid, make_spec(name=f"w{wid}", team="t", gpus=1, **spec), 0)


def _running(wid: int, at: int = 0, **spec: object) -> WorkloadState:
    w = _waiting(wid, **spec)
    w = transition(w, Status.QUEUED, at, pool="main")
    w = transition(w, Status.STARTING, at, placement=PLACE)
    return transition(w, Status.RUNNING, at)


@pytest.mark.parametrize(("cond", "status", "want"), [
    (DepCondition.OK, Status.COMPLETED, MET), (DepCondition.OK, Status.FAILED, NEVER),
    (DepCondition.OK, Status.CANCELLED, NEVER), (DepCondition.OK, Status.RUNNING, WAIT),
    (DepCondition.ANY, Status.FAILED, MET), (DepCondition.ANY, Status.COMPLETED, MET),
    (DepCondition.ANY, Status.PENDING, WAIT), (DepCondition.NOTOK, Status.COMPLETED, NEVER),
    (DepCondition.NOTOK, Status.PREEMPTED, MET), (DepCondition.NOTOK, None, NEVER),
])
def test_dependency_conditions(cond: DepCondition, status: Status | None, want: str) -> None:
    assert dependency_state(Dependency(1, cond), status) == want


def test_effective_time_limit_uses_the_default_and_caps_at_the_maximum() -> None:
    assert effective_time_limit(make_spec(name="a", team="t", gpus=1), POOL) == 100
    assert effective_time_limit(make_spec(name="a", team="t", gpus=1, time_limit=50), POOL) == 50
    assert effective_time_limit(make_spec(name="a", team="t", gpus=1, time_limit=900),
                                POOL) == 500
    assert effective_time_limit(make_spec(name="a", team="t", gpus=1), Pool("p")) is None


def test_a_run_at_its_limit_fails_and_holds_its_devices_for_the_grace() -> None:
    w = _running(1, time_limit=60)
    assert gate(_snap(w, now=59)).is_identity
    out = gate(_snap(w, now=60))
    new = out.changed[1]
    assert new.status is Status.FAILED and new.reason is not None
    assert new.reason.code.value == "TIME_LIMIT" and new.ended_at == 60
    assert [e.exits_at for e in out.snapshot.exiting] == [90]
    assert [(s.workload_id, s.grace) for s in out.stops] == [(1, 30)]
    assert out.snapshot.workloads == ()


def test_requeue_on_timeout_gives_the_engine_a_new_attempt() -> None:
    out = gate(_snap(_running(1, time_limit=60, requeue_on_timeout=True), now=61))
    (w,) = out.snapshot.workloads
    assert (w.status, w.attempt, w.attempts[0].status) == (Status.PENDING, 2, Status.FAILED)


def test_held_and_dependent_work_is_left_out_with_a_reason() -> None:
    dep = _running(1)
    held = replace(_waiting(2), held=True)
    after = _waiting(3, after=[{"id": 1}])
    free = _waiting(4)
    out = gate(_snap(dep, held, after, free))
    assert [w.id for w in out.snapshot.workloads] == [1, 4]
    assert out.changed[2].reason is not None and out.changed[2].reason.code.value == "HELD"
    reason = out.changed[3].reason
    assert reason is not None and reason.code.value == "DEPENDENCY" and "1 (ok)" in reason.message
    # the same reasons again are no news: nothing changes, the engine still sees two
    again = gate(_snap(dep, out.changed[2], out.changed[3], free))
    assert again.changed == {} and [w.id for w in again.snapshot.workloads] == [1, 4]


def test_a_dependency_never_met_cancels_and_one_met_lets_it_through() -> None:
    never = _waiting(3, after=[{"id": 1}, {"id": 2, "condition": "any"}])
    out = gate(_snap(never), {1: Status.FAILED, 2: Status.COMPLETED})
    assert out.changed[3].status is Status.CANCELLED
    reason = out.changed[3].reason
    assert reason is not None and reason.code.value == "DEPENDENCY_NEVER_SATISFIED"
    assert "workload 1 ended Failed (after ok)" in reason.message
    ok = gate(_snap(never), {1: Status.COMPLETED, 2: Status.FAILED})
    assert [w.id for w in ok.snapshot.workloads] == [3] and ok.changed == {}


def test_an_array_runs_at_most_its_limit_lowest_index_first() -> None:
    members = [replace(_waiting(10 + i), array_id=10, array_index=9 - i, array_limit=3)
               for i in range(6)]
    members[0] = replace(_running(10), array_id=10, array_index=9, array_limit=3)
    out = gate(_snap(*members))
    through = sorted(w.array_index or 0 for w in out.snapshot.workloads)
    assert through == [4, 5, 9]  # one running (index 9) + the two lowest waiting
    assert {w.reason.code.value for w in out.changed.values() if w.reason} == {"ARRAY_LIMIT"}
    assert sorted(w.array_index or 0 for w in out.changed.values()) == [6, 7, 8]
