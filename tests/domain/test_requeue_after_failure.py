"""requeue_after_failure: a node went down under a requeue_on_preemption workload."""

import pytest

from apportion.domain.errors import IllegalTransition
from apportion.domain.lifecycle import (
    Status,
    WorkloadState,
    all_attempts,
    requeue_after_failure,
    submitted,
    transition,
)
from apportion.domain.workload import make_spec


def _placed(status: Status) -> WorkloadState:
    w = submitted(7, make_spec(name="w", team="t", gpus=1, requeue_on_preemption=True), at=3)
    w = transition(w, Status.QUEUED, 3, pool="main")
    w = transition(w, Status.STARTING, 4)
    if status is Status.RUNNING:
        w = transition(w, Status.RUNNING, 5)
    return w


@pytest.mark.parametrize("status", [Status.STARTING, Status.RUNNING], ids=["starting",
                                                                           "running"])
def test_the_attempt_fails_and_a_new_one_waits_in_pending(status: Status) -> None:
    w = requeue_after_failure(_placed(status), 9, "agent heartbeat", "node a1 is down")
    assert w.status is Status.PENDING and w.attempt == 2
    assert w.submitted_at == 3  # keeps its place in line
    assert (w.pool, w.placement, w.started_at, w.running_at, w.ended_at) == ((None, (), None,
                                                                              None, None))
    failed = w.attempts[-1]
    assert failed.status is Status.FAILED and failed.attempt == 1 and failed.ended_at == 9
    assert failed.pool == "main" and failed.preempted_by is None
    assert [(e.attempt, e.status, e.message) for e in w.events[-2:]] == [
        (1, Status.FAILED, "node a1 is down"),
        (2, Status.PENDING, "requeued after a failure: node a1 is down")]
    assert all(e.cause == "agent heartbeat" for e in w.events[-2:])
    assert [a.attempt for a in all_attempts(w)] == [1, 2]


@pytest.mark.parametrize("status", [Status.PENDING, Status.QUEUED, Status.COMPLETED],
                         ids=["pending", "queued", "completed"])
def test_only_a_placed_attempt_can_fail_and_requeue(status: Status) -> None:
    w = submitted(1, make_spec(name="w", team="t", gpus=1), at=0)
    if status is not Status.PENDING:
        w = transition(w, Status.QUEUED, 0, pool="main")
    if status is Status.COMPLETED:
        w = transition(transition(transition(w, Status.STARTING, 1), Status.RUNNING, 2),
                       Status.COMPLETED, 3)
    with pytest.raises(IllegalTransition):
        requeue_after_failure(w, 5)


def test_the_new_attempt_can_run_again() -> None:
    w = requeue_after_failure(_placed(Status.RUNNING), 9)
    w = transition(transition(w, Status.QUEUED, 10, pool="main"), Status.STARTING, 11)
    assert w.attempt == 2 and w.started_at == 11
