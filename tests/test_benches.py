"""Every benchmark script runs and prints its JSON contract as its last line
(small sizes: this checks the scripts, not the numbers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CASES = [
    pytest.param(["cycle.py", "--quick"],
                 {"full_cycle_s", "naive_full_cycle_s", "cost_over_scan",
                  "preempt_1000_gpus_ms", "burst_decisions_per_s", "scaling"}, id="cycle"),
    pytest.param(["fairshare.py", "--quick"],
                 {"teams", "workloads", "full_s", "naive_s", "ratio"}, id="fairshare"),
    pytest.param(["placement.py", "--requests", "400", "--nodes", "200"],
                 {"placements_per_s", "linear_placements_per_s", "ratio_vs_linear",
                  "gang_512_ms", "nodes_examined_per_placement"}, id="placement"),
    pytest.param(["simulate.py", "--workloads", "200", "--nodes", "60", "--teams", "10"],
                 {"wall_s", "cycles", "workloads", "nodes", "teams"}, id="simulate"),
    pytest.param(["dashboard.py", "--quick"],
                 {"pages", "baseline_ms", "live_update_ms", "slowest_ms", "sizes"},
                 id="dashboard"),
]


@pytest.mark.parametrize(("args", "keys"), CASES)
def test_bench_prints_its_json_contract(args: list[str], keys: set[str]) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / args[0]), *args[1:]],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    last = json.loads(run.stdout.strip().splitlines()[-1])
    assert keys <= set(last), keys - set(last)
