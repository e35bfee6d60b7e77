"""Benchmark of start-time estimates (issue 16): how good, and how cheap.

**Accuracy.** A simulated week of a trace-like workload (``bench/simulate.py``'s
generator: fractions, whole GPUs and multi-node gangs, 40 % reserved,
durations 5 min - 12 h, arriving on the minute) on a smaller fleet, so work
waits (default 40 nodes x 8 GPUs, 2,500 workloads). Half of the workloads
carry a time limit as Slurm users give them: their duration rounded up to
whole hours, times 1-3 (an overestimate, never below the run). The simulator
runs the week with the engine; every ``--every`` seconds of virtual time the
snapshot the next cycle sees is kept. Afterwards each kept snapshot is
forecast (``engine/forecast.py``; runtimes for the medians are those of the
work Completed by then) and every estimate is compared with when the workload
actually first started in the simulation:

- ``median_abs_error_s``: median |estimated start - actual start|;
- ``share_late_10pct``: the share of estimates whose workload started later
  than the estimate by more than 10 % of the estimated wait (at least 60 s);
- the same two for a baseline that predicts "now + the median wait of the
  work that started so far" (``baseline_*``);
- ``unknown``: estimates beyond the horizon (counted apart, not as errors).

**Cost.** ``bench/cycle.py``'s snapshot: 1,250 nodes, 20,000 running and 5,000
waiting workloads (25,000), the running ones with time limits of 30 min -
12 h. One engine cycle on it (``run_cycle``) is the baseline; then ONE
forward run estimates all waiting work of the pool. Reported: the run's time
over the cycle's (``forecast_over_cycle``), per estimate (``ms_per_estimate``,
the run / the estimates it made), the cycles and instants simulated.

Prints one JSON object as its last line. Seeded.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from apportion.domain.lifecycle import Status, WorkloadState
from apportion.engine.cycle import run_cycle
from apportion.engine.forecast import History, forecast
from apportion.engine.kept_state import CycleCache
from apportion.engine.plan import Plan
from apportion.engine.snapshot import CycleConfig, Snapshot
from apportion.service.gcpause import paused_gc
from apportion.sim.runner import simulate
from apportion.sim.scenario import Scenario, scenario_from_data

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benches
import cycle as cycle_bench
from simulate import WEEK, pools, teams, workload

HOUR = 3600


def trace_scenario(nodes: int, n_workloads: int, seed: int, limit_share: float) -> Scenario:
    rng = random.Random(seed)
    team_data, leaves = teams(20, nodes, rng)
    data = {"pools": pools(nodes), "teams": team_data,
            "workloads": [workload(k, leaves, rng) for k in range(n_workloads)]}
    scenario = scenario_from_data(data)
    out = []
    for w in scenario.workloads:
        if w.spec.duration is not None and rng.random() < limit_share:
            hours = -(-w.spec.duration // HOUR)
            limit = hours * HOUR * rng.randint(1, 3)
            w = replace(w, spec=replace(w.spec, time_limit=limit))
        out.append(w)
    return replace(scenario, workloads=tuple(out))


class Sampling(CycleCache):
    """The engine's kept-state cycle, keeping the first snapshot at or after
    each sample time (the state the next cycle decides on)."""

    def __init__(self, every: int) -> None:
        super().__init__()
        self.every = every
        self.next_at = every
        self.samples: list[Snapshot] = []

    def run(self, snapshot: Snapshot, config: CycleConfig, by_id: Any = None,
            changed: Any = None) -> Plan:
        if snapshot.now >= self.next_at:
            self.samples.append(snapshot)
            self.next_at = (snapshot.now // self.every + 1) * self.every
        return super().run(snapshot, config, by_id, changed)


def first_start(w: WorkloadState) -> int | None:
    starts = [a.started_at for a in w.attempts if a.started_at is not None]
    if w.started_at is not None:
        starts.append(w.started_at)
    return min(starts) if starts else None


def history_at(states: dict[int, WorkloadState], at: int) -> History:
    by_team: dict[str, list[int]] = {}
    by_pool: dict[str, list[int]] = {}
    for w in states.values():
        if (w.status is Status.COMPLETED and w.ended_at is not None and w.ended_at <= at
                and w.started_at is not None):
            by_team.setdefault(w.spec.team, []).append(w.ended_at - w.started_at)
            by_pool.setdefault(w.pool or "", []).append(w.ended_at - w.started_at)
    return History({k: tuple(sorted(v)) for k, v in by_team.items()},
                   {k: tuple(sorted(v)) for k, v in by_pool.items()})


def is_late(est: int, actual: int, at: int) -> bool:
    return actual - est > max(60, 0.1 * (est - at))


def accuracy(args: argparse.Namespace) -> dict[str, Any]:
    scenario = trace_scenario(args.nodes, args.workloads, args.seed, 0.5)
    sampler = Sampling(args.every)
    t0 = time.perf_counter()
    result = simulate(scenario, until=WEEK, cycle=sampler)
    sim_s = time.perf_counter() - t0
    starts = {wid: first_start(w) for wid, w in result.states.items()}
    errors, late, base_errors, base_late = [], 0, [], 0
    unknown = cycles = runs = 0
    t1 = time.perf_counter()
    for snap in sampler.samples:
        at = snap.now
        waits = sorted(s - result.states[wid].submitted_at for wid, s in starts.items()
                       if s is not None and s <= at)
        median_wait = statistics.median(waits) if waits else 0
        f = forecast(snap, history_at(result.states, at))
        runs += 1
        cycles += f.cycles
        for wid, est in f.estimates.items():
            actual = starts.get(wid)
            if actual is None or actual < at:
                continue
            if est.start is None:
                unknown += 1
                continue
            errors.append(abs(est.start - actual))
            late += is_late(est.start, actual, at)
            guess = int(at + median_wait)
            base_errors.append(abs(guess - actual))
            base_late += is_late(guess, actual, at)
    forecast_s = time.perf_counter() - t1
    n = len(errors)
    return {
        "nodes": args.nodes, "workloads": args.workloads, "samples": len(sampler.samples),
        "estimates": n, "unknown": unknown,
        "median_abs_error_s": statistics.median(errors) if errors else None,
        "p90_abs_error_s": statistics.quantiles(errors, n=10)[-1] if n >= 10 else None,
        "share_late_10pct": round(late / n, 4) if n else None,
        "baseline_median_abs_error_s": statistics.median(base_errors) if base_errors else None,
        "baseline_share_late_10pct": round(base_late / n, 4) if n else None,
        "simulate_s": round(sim_s, 2), "forecasts_s": round(forecast_s, 2),
        "forecast_runs": runs, "forecast_cycles": cycles,
        "sim_cycles": result.cycles,
    }


def cost(scale: float, seed: int) -> dict[str, Any]:
    snap = cycle_bench.build(scale)
    rng = random.Random(seed)
    limited = tuple(
        replace(w, spec=replace(w.spec, time_limit=rng.choice(
            (1800, 3600, 7200, 14400, 28800, 43200)))) if w.status.is_placed else w
        for w in snap.workloads)
    snap = replace(snap, workloads=limited)
    waiting = [w.id for w in snap.workloads if w.status.is_waiting]
    with paused_gc():
        t0 = time.perf_counter()
        run_cycle(snap, CycleConfig(cycle_id=1))
        cycle_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        f = forecast(snap, History(), waiting)
        run_s = time.perf_counter() - t1
    made = sum(1 for e in f.estimates.values() if e.start is not None)
    return {
        "workloads": len(snap.workloads), "waiting": len(waiting),
        "cycle_s": round(cycle_s, 3), "forecast_s": round(run_s, 3),
        "forecast_over_cycle": round(run_s / cycle_s, 2),
        "ms_per_estimate": round(1000 * run_s / max(1, len(waiting)), 2),
        "estimated": made, "unknown": len(waiting) - made,
        "cycles": f.cycles, "instants": f.instants,
        "horizon_reached": f.is_horizon_reached,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--workloads", type=int, default=2500)
    parser.add_argument("--every", type=int, default=4 * HOUR,
                        help="seconds of virtual time between two samples")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="size of the cost snapshot (1.0: 25,000 workloads)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true",
                        help="small: 10 nodes, 300 workloads, cost at scale 0.05")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.workloads, args.scale, args.every = 10, 300, 0.05, 12 * HOUR
    out = {"accuracy": accuracy(args), "cost": cost(args.scale, args.seed)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
