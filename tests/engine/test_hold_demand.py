"""A starvation hold (SPEC 6.7) claims devices as they free up, but the
held workload still wants all of its size: its demand, and so its team's
entitlement, is what it asked for, not the devices held so far."""

from __future__ import annotations

from tests.engine.test_starvation import scenario


def test_a_held_workload_still_demands_its_whole_size() -> None:
    w = scenario(100)
    w.advance(150)
    w.settle()
    big = w.w("big")
    assert big.is_hold and big.nomination  # held, not started
    assert w.code("big") == "FAIR_SHARE"
    assert big.reason is not None and big.reason.message == (
        "needs 8 GPUs on one node; 0 GPUs free; other teams' elastic work holds 8 GPUs"
        " in pool main, and the fair-share rules do not let this workload take enough"
        " of it to make room (entitlement of team t: 4, in use 0)")
    small = w.w("small8").reason
    assert small is not None and small.message == "needs 1 GPU; 0 GPUs free"
