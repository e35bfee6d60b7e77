"""Memos kept on a pool's working state answer as if computed afresh: a new
attempt or a different spec under the same workload id is not served a stale
request or never-reason."""

from __future__ import annotations

from dataclasses import replace

from apportion.domain.lifecycle import submitted
from apportion.domain.reasons import ReasonCode
from apportion.domain.workload import make_spec
from apportion.engine import explain
from apportion.engine.working_state import WorkingState
from tests.engine.harness import World


def _state() -> WorkingState:
    w = World()
    w.pool("main", nodes=2, gpus=8).team("a", main=8)
    return WorkingState(w.snapshot())


def test_request_follows_attempt_and_spec() -> None:
    ps = _state().pools["main"]
    first = submitted(7, make_spec(name="x", team="a", wclass="elastic", gpus=2, pods=2), 0)
    req = ps.request(first)
    assert ps.request(first) is req  # kept
    assert (req.owner, req.pods, req.charge) == ((7, 1, 0), 2, 2000)
    assert ps.request(first, 1).pods == 1 and ps.request(first).pods == 2
    second = replace(first, attempt=2)
    assert ps.request(second).owner == (7, 2, 0)
    bigger = replace(first, spec=make_spec(name="x", team="a", wclass="elastic", gpus=4, pods=3))
    again = ps.request(bigger)
    assert (again.pods, again.charge) == (3, 4000)


def test_never_reason_follows_spec() -> None:
    ps = _state().pools["main"]
    fits = submitted(3, make_spec(name="y", team="a", wclass="reserved", gpus=8), 0)
    assert explain.never_reason(ps, fits) is None
    too_big = replace(fits, spec=make_spec(name="y", team="a", wclass="reserved", gpus=8,
                                           pods=2))
    reason = explain.never_reason(ps, too_big)
    assert reason is not None and reason.code is ReasonCode.RESERVATION_TOO_SMALL
    assert explain.never_reason(ps, fits) is None
