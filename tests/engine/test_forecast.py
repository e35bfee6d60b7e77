"""Start-time estimates: the snapshot run forward by the engine's own cycle."""

from __future__ import annotations

from dataclasses import replace

from apportion.engine.forecast import (
    History,
    expected_end,
    forecast,
    median_after,
)
from tests.engine.harness import World

HOUR = 3600


def _limit(w: World, name: str, seconds: int) -> None:
    wid = w.names[name]
    st = w.states[wid]
    w.states[wid] = replace(st, spec=replace(st.spec, time_limit=seconds))


def _busy(time_limit: int | None = 2 * HOUR) -> World:
    """One 8-GPU node: ``big`` (8 GPUs, team t) runs since t=0; ``next`` (team
    u) waits for all 8 GPUs; 600 s have passed."""
    w = World().pool(nodes=1).team("t").team("u")
    w.submit("big", "t", 8, running=True)
    if time_limit is not None:
        _limit(w, "big", time_limit)
    w.submit("next", "u", 8)
    w.settle()
    w.advance(600)
    return w


def test_a_job_waiting_for_a_time_limited_job_starts_exactly_at_its_limit() -> None:
    w = _busy()
    f = forecast(w.snapshot(), History())
    est = f.estimates[w.names["next"]]
    assert est.start == 2 * HOUR  # big started at 0 with a 2 h limit
    assert est.pool == "main"
    assert [(e.workload_id, e.at, e.basis) for e in est.waits_for] == [
        (w.names["big"], 2 * HOUR, "time_limit")]
    assert est.basis == "time_limit"
    assert "time limit" in est.note
    # the live states are untouched: it is a forecast
    assert w.status("big") == "Running" and w.status("next") == "Queued"


def test_team_median_of_runs_longer_than_the_elapsed_time() -> None:
    w = _busy(time_limit=None)
    # team t's finished runs: those above the 600 s already run are 1000, 5000, 9000
    hist = History(by_team={"t": (100, 500, 1000, 5000, 9000)}, by_pool={"main": (50,)})
    est = forecast(w.snapshot(), hist).estimates[w.names["next"]]
    assert est.start == 5000
    assert est.basis == "team_median"


def test_pool_median_then_default_when_the_team_has_no_longer_run() -> None:
    w = _busy(time_limit=None)
    hist = History(by_team={"t": (100, 200)}, by_pool={"main": (700, 800, 900)})
    est = forecast(w.snapshot(), hist).estimates[w.names["next"]]
    assert (est.start, est.basis) == (800, "pool_median")
    est = forecast(w.snapshot(), History(by_team={"t": (100,)})).estimates[w.names["next"]]
    assert (est.start, est.basis) == (HOUR, "default")
    assert "default runtime" in est.note


def test_default_after_the_default_has_passed_counts_from_now() -> None:
    w = _busy(time_limit=None)
    w.advance(2 * HOUR)
    big = w.w("big")
    assert expected_end(big, w.now, History()).at == w.now + HOUR


def test_median_after_takes_the_lower_middle_of_longer_runs() -> None:
    assert median_after((1, 2, 3, 4), 0) == 2
    assert median_after((1, 2, 3, 4), 1) == 3
    assert median_after((1, 2, 3, 4), 4) is None
    assert median_after((), 0) is None


def test_work_that_fits_now_starts_at_the_next_cycle() -> None:
    w = World().pool(nodes=1).team("t")
    w.submit("a", "t", 4, running=True)
    w.submit("b", "t", 2)
    est = forecast(w.snapshot(), History()).estimates[w.names["b"]]
    assert est.start == 0 and est.waits_for == () and est.note == "starts at the next cycle"


def test_a_queue_behind_several_jobs_is_estimated_in_one_run() -> None:
    """Two 4-GPU jobs end at 1 h and 3 h (time limits); three 4-GPU jobs wait.
    The first waiter takes the GPUs freed at 1 h, the second those freed at
    3 h, the third those the first frees (it starts at 1 h, runs 1 h: 2 h)."""
    w = World().pool(nodes=1).team("t")
    w.submit("r1", "t", 4, running=True)
    w.submit("r2", "t", 4, running=True)
    _limit(w, "r1", HOUR)
    _limit(w, "r2", 3 * HOUR)
    for name in ("q1", "q2", "q3"):
        w.submit(name, "t", 4)
        _limit(w, name, HOUR)
    w.settle()
    f = forecast(w.snapshot(), History())
    starts = {name: f.estimates[w.names[name]].start for name in ("q1", "q2", "q3")}
    assert starts == {"q1": HOUR, "q2": 2 * HOUR, "q3": 3 * HOUR}
    assert [e.workload_id for e in f.estimates[w.names["q2"]].waits_for] == [w.names["q1"]]
    assert f.cycles >= 3 and f.instants >= 3


def test_beyond_the_horizon_is_unknown() -> None:
    w = _busy(time_limit=30 * 86400)
    est = forecast(w.snapshot(), History()).estimates[w.names["next"]]
    assert est.start is None and est.note.startswith("unknown (beyond horizon)")


def test_work_that_never_fits_is_unknown_not_guessed() -> None:
    w = World().pool(nodes=1).team("t")
    w.submit("huge", "t", 16)
    w.settle()
    est = forecast(w.snapshot(), History()).estimates[w.names["huge"]]
    assert est.start is None and "nothing left to end" in est.note
