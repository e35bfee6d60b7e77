"""The report's numbers, recomputed from results.json; the charts and the
self-contained HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from apportion.replay import metrics, report
from apportion.replay.csvtrace import load_csv
from apportion.replay.org import load_org
from apportion.replay.runner import Replay, run

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    trace = load_csv(str(FIXTURES / "tiny.csv"))
    org = load_org(str(FIXTURES / "org.yaml"))
    results = run(Replay(trace, org, ("apportion", "fifo", "reclaim-to-quota")))
    out = tmp_path_factory.mktemp("report")
    report.write(results, str(out))
    return json.loads((out / "results.json").read_text()), out


def test_files_are_written_and_the_html_needs_no_network(
        written: tuple[dict[str, Any], Path]) -> None:
    _results, out = written
    names = sorted(p.name for p in out.iterdir())
    assert names == ["replay-delays.png", "replay-preemptions.png", "replay-usage.png",
                     "replay-utilization.png", "report.html", "results.json"]
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4
    assert "http://" not in page and "https://" not in page


def test_utilization_average_is_the_mean_of_its_series(
        written: tuple[dict[str, Any], Path]) -> None:
    results, _out = written
    for r in results["policies"].values():
        series = r["utilization"]["series"]
        assert r["utilization"]["average"] == pytest.approx(np.mean(series), rel=1e-9)


def test_delay_percentiles_come_from_the_listed_delays(
        written: tuple[dict[str, Any], Path]) -> None:
    results, _out = written
    for r in results["policies"].values():
        for klass, values in r["delays_s"].items():
            got = r["queueing_delay_s"][klass]
            for p in (50, 95, 99):
                want = float(np.percentile(values, p)) if values else None
                assert got[f"p{p}"] == want


def test_the_tiny_trace_s_numbers(written: tuple[dict[str, Any], Path]) -> None:
    results, _out = written
    spec, fifo = results["policies"]["apportion"], results["policies"]["fifo"]
    # a-reserved (4 GPUs, alpha reserves 4) starts at once under the SPEC by
    # preempting b-elastic (6 GPUs: over-preemption 6/4); fifo makes it wait
    assert spec["reserved_start"] == {"with_room": 1, "started_at_once": 1, "fraction": 1.0,
                                      "late_delay_s": {"p50": None, "p95": None, "p99": None}}
    assert spec["preemptions"]["count"] == 1
    assert spec["preemptions"]["over_preemption_ratio"] == pytest.approx(6 / 4)
    assert spec["preemptions"]["gpus_freed"] == 6 and spec["preemptions"]["gpus_needed"] == 4
    assert spec["preemptions"]["gpu_hours_lost"] == pytest.approx(6 * 10 / 3600)
    assert spec["preemptions"]["reserved_preempted"] == 0
    assert fifo["preemptions"]["count"] == 0
    assert fifo["reserved_start"]["fraction"] == 0.0
    assert fifo["queueing_delay_s"]["reserved"]["p50"] == 90.0  # 10 -> 100
    # 8 GPUs; fifo keeps 6 busy from 0 to 100 (and more): at least 6/8 of the window
    assert results["window"] == {"start": 0, "end": 100}
    assert fifo["utilization"]["average"] >= 0.75


def test_summary_rows_and_goals_are_the_json_s_values(
        written: tuple[dict[str, Any], Path]) -> None:
    results, out = written
    rows = {row[0]: row[1:] for row in report.summary_rows(results)}
    names = list(results["policies"])
    for i, name in enumerate(names):
        r = results["policies"][name]
        assert rows["GPU util %"][i] == f"{100 * r['utilization']['average']:.2f}"
        assert rows["preemptions"][i] == str(r["preemptions"]["count"])
        ratio = r["preemptions"]["over_preemption_ratio"]
        assert rows["over-preemption"][i] == ("-" if ratio is None else f"{ratio:.3f}")
    page = (out / "report.html").read_text()
    for cells in rows.values():
        for cell in cells:
            assert f"<td>{cell}</td>" in page
    goals = {g["goal"]: g for g in results["goals"]}
    util = goals["utilization >= the best baseline's"]
    best = max(results["policies"][n]["utilization"]["average"] for n in names[1:])
    assert util["met"] == (results["policies"]["apportion"]["utilization"]["average"] >= best)
    kept = {n: results["policies"][n]["work_balance"]["useful_utilization"] for n in names}
    useful = goals["useful utilization (work kept) >= the best baseline's"]
    best_kept = max(names[1:], key=lambda n: kept[n])
    assert useful["value"] == round(kept["apportion"], 6)
    assert useful["target"] == f">= {kept[best_kept]:.6f} ({best_kept})"
    assert useful["met"] == (kept["apportion"] >= kept[best_kept])
    assert goals["over-preemption ratio"]["met"] is False  # 1.5 > 1.10
    assert goals["reserved workloads preempted"]["met"] is True


def test_idle_and_work_balance_tables_are_the_json_s_values(
        written: tuple[dict[str, Any], Path]) -> None:
    results, out = written
    page = (out / "report.html").read_text()
    names = list(results["policies"])
    idle = {row[0]: row[1:] for row in report.idle_rows(results)}
    balance = {row[0]: row[1:] for row in report.balance_rows(results)}
    summary = {row[0]: row[1:] for row in report.summary_rows(results)}
    for i, name in enumerate(names):
        r = results["policies"][name]
        by_reason = r["idle"]["by_reason_gpus"]
        # the reasons split the idle GPUs: they add up to all of them
        assert sum(by_reason.values()) == pytest.approx(r["idle"]["average_gpus"])
        assert sum(r["idle"]["instants"].values()) <= metrics.SAMPLES
        for title, key in report.IDLE_ROWS:
            assert idle[title][i] == f"{by_reason[key]:,.2f}"
        assert idle["all idle GPUs"][i] == f"{r['idle']['average_gpus']:,.2f}"
        # idle + allocated = capacity, on average over the sampled instants
        capacity = r["capacity_gpus"]
        assert r["idle"]["average_gpus"] <= capacity
        wb = r["work_balance"]
        for title, key in report.BALANCE_ROWS:
            assert balance[title][i] == report.fmt(wb[key], "num")
        assert wb["offered_gpu_h"] - wb["deferred_by_wait_gpu_h"] \
            - wb["deferred_by_restart_gpu_h"] == pytest.approx(wb["done_gpu_h"])
        window = results["window"]["end"] - results["window"]["start"]
        assert wb["allocated_gpu_h"] == pytest.approx(
            r["utilization"]["average"] * capacity * window / 3600)
        assert summary["useful util %"][i] == f"{100 * wb['useful_utilization']:.2f}"
        kinds = r["preemptions"]["by_kind"]
        assert sum(k["count"] for k in kinds.values()) == r["preemptions"]["count"]
        assert sum(k["gpu_hours_lost"] for k in kinds.values()) == pytest.approx(
            r["preemptions"]["gpu_hours_lost"])
        thrown = {row[0]: row[1:] for row in report.preemption_rows(results)}
        for title, key in report.PREEMPTION_ROWS:
            assert thrown[title][i] == (f"{kinds[key]['count']} / "
                                        f"{report.fmt(kinds[key]['gpu_hours_lost'], 'num')}")
            assert f"<td>{thrown[title][i]}</td>" in page
        for title, key in (("Jain (SPEC 4, fluid)", "jain_spec"),
                           ("Jain (SPEC 4, whole workloads)", "jain_spec_workloads")):
            jain = r["fairness"][key]
            assert summary[title][i] == ("-" if jain is None else f"{jain:.3f}")
    for cells in [*idle.values(), *balance.values()]:
        for cell in cells:
            assert f"<td>{cell}</td>" in page
    goal = next(g for g in results["goals"] if g["goal"].startswith("Jain"))
    assert goal["value"] == results["policies"]["apportion"]["fairness"]["jain_spec_workloads"]
    assert "jain_spec_workloads" in goal["why"] and goal["why"] in page.replace("&#x27;", "'")
    md = report.markdown(results)
    assert "| nothing waits |" in md and "| = allocated (the utilization's numerator) |" in md


def test_reserved_work_no_node_could_hold_is_not_counted_as_having_room(tmp_path: Path) -> None:
    # n1 has 64 CPUs: a reserved job asking 100 could never start (SPEC 7's
    # NO_ELIGIBLE_POOL), so its reservation's room is not a promise it missed
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,duration,team,class,gpus,cpu\n"
                     "huge,0,100,alpha,reserved,1,100\nsmall,0,100,alpha,reserved,1,4\n")
    results = run(Replay(load_csv(str(trace)), load_org(str(FIXTURES / "org.yaml")),
                         ("apportion",)))
    start = results["policies"]["apportion"]["reserved_start"]
    assert (start["with_room"], start["started_at_once"], start["fraction"]) == (1, 1, 1.0)
