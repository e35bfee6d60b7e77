"""The dashboard's read models over attempt intervals: allocation per time
slice, GPU-hours per team, preemptions and lost work (pure functions)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from apportion.domain.errors import ValidationError
from apportion.service.insights import allocation_series
from apportion.service.spans import Interval, decode
from apportion.service.usage import Filters, parse_group_by
from apportion.service.usage import report as usage_report

H = 3600.0


def span(team: str, milli: int, start: float, end: float | None, status: str = "Running",
         *, is_reserved: bool = False, pool: str = "main", wid: int = 1) -> Interval:
    return Interval(wid, 1, team, pool, is_reserved, milli, start, end, status)


def test_usage_splits_reserved_and_elastic_and_counts_lost_work() -> None:
    spans = [
        span("prod", 4000, 0, None, is_reserved=True),           # 4 GPUs for the 2 h window
        span("nlp", 500, H, None),                               # 1/2 GPU for the last hour
        span("nlp", 2000, -H, 1.5 * H, "Preempted", wid=2),      # ran 2.5 h, stopped in window
        span("vision", 1000, -3 * H, -H, "Preempted", wid=3),    # ended before the window
    ]
    rows = {r["team"]: r for r in usage_report(spans, 0, 2 * H)}
    assert set(rows) == {"prod", "nlp"}
    assert rows["prod"]["reserved_gpu_hours"] == 8 and rows["prod"]["elastic_gpu_hours"] == 0
    assert rows["nlp"]["elastic_gpu_hours"] == pytest.approx(0.5 + 3.0)
    assert rows["nlp"]["preemptions"] == 1 and rows["nlp"]["lost_gpu_hours"] == 5.0
    assert [r["team"] for r in usage_report(spans, 0, 2 * H)] == ["prod", "nlp"]


def test_allocation_series_means_per_slice_top_teams_and_other() -> None:
    spans = [span("a", 1000, 0, None), span("b", 3000, 0, 50),
             *(span(f"t{i}", 10, 0, None, wid=10 + i) for i in range(9))]
    out = allocation_series(spans, 0, 100, 2, top=2, is_clipped=False)
    assert out["t"] == [0, 50]
    series = {s["team"]: s["values"] for s in out["series"]}
    assert list(series) == ["b", "a", "other"]
    assert series["b"] == [3.0, 0.0] and series["a"] == [1.0, 1.0]
    assert series["other"] == [0.09, 0.09]
    assert allocation_series(spans, 0, 100, 2, pool="other-pool")["series"] == []


def test_allocation_series_starts_at_the_first_allocation_when_clipped() -> None:
    out = allocation_series([span("a", 1000, 900, None)], 0, 1000, 4)
    assert out["t"] == [900, 925, 950, 975]
    assert out["series"][0]["values"] == [1.0, 1.0, 1.0, 1.0]
    late = allocation_series([span("a", 1000, 990, None)], 0, 1000, 4)
    assert late["t"][0] == 940  # at least a minute is shown


def test_decode_gives_every_attempt_and_keeps_the_current_one_open() -> None:
    row = SimpleNamespace(
        id=7, name="w", team="nlp", wclass="elastic", pool="main", status="Running",
        attempt=2, started_at=200.0, ended_at=None, submitted_by="ana", submitted_at=90.0,
        placement=[{"node": "n1", "devices": [{"index": 0, "milli": 500}]}],
        attempts=[{"attempt": 1, "status": "Preempted", "pool": "main", "started_at": 100,
                   "ended_at": 150, "placement": [{"node": "n2", "devices": [
                       {"index": 1, "milli": 1000}, {"index": 2, "milli": 1000}]}]}])
    d = decode(row)
    assert [(s.attempt, s.milli, s.start, s.end, s.status) for s in d.spans] == [
        (1, 2000, 100.0, 150.0, "Preempted"), (2, 500, 200.0, None, "Running")]
    assert {(s.user, s.submitted_at) for s in d.spans} == {("ana", 90.0)}
    assert d.placement[0]["node"] == "n1"


def test_usage_groups_by_user_and_pool_with_wait_percentiles() -> None:
    def run(wid: int, user: str, pool: str, submitted: float, start: float,
            attempt: int = 1) -> Interval:
        return Interval(wid, attempt, "nlp", pool, False, 1000, start, start + H, "Completed",
                        user, submitted)

    spans = [run(i, "ana", "a", 0, 10.0 * i) for i in range(1, 21)]  # waits 10..200 s
    spans += [run(30, "bo", "b", 0, 500), run(30, "bo", "b", 0, 7000, attempt=2)]
    rows = usage_report(spans, 0, 10 * H, ("user", "pool"))
    assert [(r["user"], r["pool"]) for r in rows] == [("ana", "a"), ("bo", "b")]
    ana, bo = rows
    assert ana["gpu_hours"] == 20 and ana["started"] == 20
    # nearest rank: p50 is the 10th of 20 waits, p95 the 19th, p99 the 20th
    assert (ana["wait_p50_s"], ana["wait_p95_s"], ana["wait_p99_s"]) == (100, 190, 200)
    # a requeued attempt's start is not a wait of its own
    assert bo["started"] == 1 and bo["wait_p99_s"] == 500 and bo["gpu_hours"] == 2
    only = usage_report(spans, 0, 10 * H, ("team",), Filters(user="bo"))
    assert [(r["team"], r["gpu_hours"]) for r in only] == [("nlp", 2)]


def test_group_by_names_the_field_and_the_allowed_values() -> None:
    assert parse_group_by("team, user,team") == ("team", "user")
    assert parse_group_by(None) == ("team",)
    with pytest.raises(ValidationError) as err:
        parse_group_by("team,project")
    assert err.value.field == "group_by" and "team, user, pool" in str(err.value.allowed)
