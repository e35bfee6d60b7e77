"""Every benchmark script runs in its small (quick) mode and prints its JSON
contract as its last line, with values that were measured: positive rates,
ratios in sane ranges, counters that show work was done, and null (never 0) for
what a quick run does not measure. The figures themselves are in
docs/performance.md; these checks catch a bench that silently stopped measuring."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces" / "alibaba-gpu-2023"


def _check_cycle(r: dict[str, Any]) -> None:
    assert (r["workloads"], r["nodes"]) == (2500, 125)  # scale 0.1, seeded
    assert 0 < r["full_cycle_s"] < 60
    assert r["naive_sample_decisions"] == 10
    assert r["naive_full_cycle_s_extrapolated"] > r["full_cycle_s"]
    assert 1 < r["ratio_vs_naive"] < 100_000
    assert r["plain_scan_s"] > 0 and r["cost_over_scan"] > 1
    assert r["cycle_counters"]["started"] > 0 and r["cycle_counters"]["victim_searches"] > 0
    assert r["full_cycle_preemptions"] == r["cycle_counters"]["preempted"] > 0
    assert 0.5 < r["overpreemption_ratio"] < 10  # freed vs needed: about what was needed
    assert r["burst_submissions"] == 1000
    assert r["burst_decisions_per_s"] > 0 and r["burst_naive_decisions_per_s"] > 0
    assert 0 < r["burst_starts"] <= 1000
    assert 0 <= r["burst_self_preemptions"] <= r["burst_preemptions"]
    assert r["scaling"] == {"0.1": r["full_cycle_s"]}
    # not measured in quick mode: null, so nobody reads a 0 as a figure
    assert r["preempt_1000_gpus_ms"] is None and r["preempt_victims"] is None


def _check_fairshare(r: dict[str, Any]) -> None:
    assert r["workloads"] == 10_000 and r["teams"] > 1000
    assert 0 < r["incremental_s"] < r["full_s"] < 60
    assert 0 < r["full_same_as_naive_s"] < r["naive_s"]
    assert r["naive_runs"] == 1
    assert r["ratio"] == pytest.approx(r["naive_s"] / r["full_same_as_naive_s"], rel=0.05)
    assert 1 < r["ratio"] < 100_000
    assert r["small_tree_call_ms"] > 0


def _check_placement(r: dict[str, Any]) -> None:
    assert r["placed_apportion"] == r["placed_linear"] == r["requests"] == 400
    assert r["placements_per_s"] > 0 and r["linear_placements_per_s"] > 0
    # at this size a linear first fit finds room on the first nodes, so the ratio is
    # about 1 (0.67-1.5 seen): only a sane range; the work counter shows the index
    assert 0.05 < r["ratio_vs_linear"] < 10_000
    assert 1 <= r["nodes_examined_per_placement"] <= 2
    assert r["counters"]["placements"] == 400
    assert 0 < r["gang_512_ms"] < 60_000


def _check_simulate(r: dict[str, Any]) -> None:
    assert (r["workloads"], r["nodes"], r["teams"]) == (200, 60, 10)
    assert r["cycles"] > 0 and r["simulated_s"] > 0
    assert 0 < r["simulate_s"] <= r["wall_s"]
    assert r["parse_s"] >= 0
    assert r["ms_per_cycle"] == pytest.approx(1000 * r["simulate_s"] / r["cycles"], rel=0.1,
                                              abs=0.05)
    assert r["statuses"].get("Completed", 0) > 0
    assert sum(r["statuses"].values()) == 200


def _check_fragmentation(r: dict[str, Any]) -> None:
    assert (r["nodes"], r["pods_with_gpus"]) == (150, 3000)
    for policies in (r["policies"], r["exact_share_mode"]["policies"],
                     r["memory_mode"]["policies"]):
        assert set(policies) == {"apportion", "best_fit", "first_fit", "random_fit"}
        for result in policies.values():
            assert 0.5 < result["allocated_share_at_full"] <= 1.0
            assert result["unallocated_gpus_at_full"] >= 0
        # the replay ran until full: apportion packs at least as well as random fit
        assert (policies["apportion"]["allocated_share_at_full"]
                >= policies["random_fit"]["allocated_share_at_full"])
    assert r["rounding_overreserved_gpus"] > 0  # quarter rounding reserves more than asked


def _check_api(r: dict[str, Any]) -> None:
    sqlite = r["sqlite"]
    assert sqlite["submitted"] > 0 and sqlite["errors"] == 0
    assert r["sqlite_submits_per_s"] == sqlite["submits_per_s"] > 0
    assert 0 < r["p50_ms"] <= r["p99_ms"]
    assert r["clients"] == 2
    assert r["postgres"] is None and r["postgres_submits_per_s"] is None  # not in --quick


def _check_dashboard(r: dict[str, Any]) -> None:
    assert r["sizes"]["workloads"] == 300 and r["sizes"]["running"] > 0
    assert r["baseline_ms"] > 0 and 0 < r["live_update_ms"] < 10_000
    pages = r["pages"]
    assert {"overview", "workloads", "pool_map", "queue"} <= set(pages), sorted(pages)
    for name, fig in pages.items():
        assert fig["median_ms"] > 0 and fig["first_ms"] > 0, name
        assert fig["ratio"] == pytest.approx(fig["median_ms"] / r["baseline_ms"], abs=0.1)
    assert r["slowest_ms"] == max(f["median_ms"] for n, f in pages.items()
                                  if n != "rest_dry_run")


needs_traces = pytest.mark.skipif(not TRACES.is_dir(),
                                  reason=f"the Alibaba GPU trace is not at {TRACES}")

CASES = [
    pytest.param(["cycle.py", "--quick"], _check_cycle, id="cycle"),
    pytest.param(["fairshare.py", "--quick"], _check_fairshare, id="fairshare"),
    pytest.param(["placement.py", "--requests", "400", "--nodes", "200"], _check_placement,
                 id="placement"),
    pytest.param(["simulate.py", "--workloads", "200", "--nodes", "60", "--teams", "10"],
                 _check_simulate, id="simulate"),
    pytest.param(["fragmentation.py", "--quick", "--traces", str(TRACES)],
                 _check_fragmentation, id="fragmentation", marks=needs_traces),
    pytest.param(["api.py", "--quick"], _check_api, id="api"),
    pytest.param(["dashboard.py", "--quick"], _check_dashboard, id="dashboard"),
]


@pytest.mark.parametrize(("args", "check"), CASES)
def test_bench_measures_what_its_json_says(args: list[str],
                                           check: Callable[[dict[str, Any]], None]) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / args[0]), *args[1:]],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    last = json.loads(run.stdout.strip().splitlines()[-1])
    check(last)
