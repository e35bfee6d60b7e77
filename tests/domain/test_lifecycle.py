import dataclasses

import pytest

from apportion.domain.errors import IllegalTransition
from apportion.domain.lifecycle import (
    ALLOWED,
    TERMINAL,
    Status,
    evolve,
    requeue,
    submitted,
    transition,
)
from apportion.domain.workload import make_spec


def spec(**kw):
    base = {"name": "w", "team": "t", "gpus": 1}
    base.update(kw)
    return make_spec(**base)


def test_happy_path_records_every_event() -> None:
    w = submitted(1, spec(), at=0)
    w = transition(w, Status.QUEUED, 0, pool="main")
    w = transition(w, Status.STARTING, 1)
    w = transition(w, Status.RUNNING, 2)
    w = transition(w, Status.COMPLETED, 10)
    assert [e.status for e in w.events] == [
        Status.PENDING, Status.QUEUED, Status.STARTING, Status.RUNNING, Status.COMPLETED
    ]
    assert (w.started_at, w.running_at, w.ended_at) == (1, 2, 10)


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_terminal_states_are_final(terminal: Status) -> None:
    for target in Status:
        assert (terminal, target) not in ALLOWED


def test_illegal_transition_carries_history() -> None:
    w = submitted(1, spec(), at=0)
    with pytest.raises(IllegalTransition) as err:
        transition(w, Status.RUNNING, 5)
    assert err.value.history == ("Pending@0",)
    assert "Pending" in str(err.value) and "Running" in str(err.value)


def test_pending_cannot_be_preempted() -> None:
    with pytest.raises(IllegalTransition):
        transition(submitted(1, spec(), 0), Status.PREEMPTED, 1)


def test_requeue_starts_new_attempt_keeping_submission_time() -> None:
    w = submitted(7, spec(requeue_on_preemption=True), at=3)
    w = transition(w, Status.QUEUED, 3, pool="main")
    w = transition(w, Status.STARTING, 4)
    w = transition(w, Status.PREEMPTED, 9, preempted_by=8)
    w2 = requeue(w, 9)
    assert w2.status is Status.PENDING and w2.attempt == 2
    assert w2.submitted_at == 3
    assert w2.attempts[0].status is Status.PREEMPTED and w2.attempts[0].preempted_by == 8
    with pytest.raises(IllegalTransition):
        requeue(w2, 10)


def test_evolve_is_replace_and_refuses_unknown_fields() -> None:
    w = submitted(7, make_spec(name="x", team="t", gpus=1), 3)
    changed = evolve(w, pool="p", head_since=5)
    assert changed == dataclasses.replace(w, pool="p", head_since=5)
    assert (w.pool, w.head_since) == (None, None)  # the original is untouched
    with pytest.raises(TypeError, match="poool"):
        evolve(w, poool="p")


def test_starting_clears_the_nomination_and_the_hold() -> None:
    """SPEC 6.6/6.7: a nominated (or held) workload starts on its devices and
    then holds no nomination: the devices are its placement now."""
    from apportion.domain.workload import DeviceShare, PodPlacement

    devices = (PodPlacement("n0", (DeviceShare(0, 1000),)),)
    for is_hold in (False, True):
        w = transition(submitted(1, spec(), at=0), Status.QUEUED, 0, pool="main")
        w = evolve(w, nomination=devices, is_hold=is_hold)
        w = transition(w, Status.STARTING, 5, placement=devices)
        assert (w.nomination, w.is_hold, w.placement) == ((), False, devices)
        assert w.nominated_milli == 0
