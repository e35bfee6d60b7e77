"""Every policy over the same trace and org, one after the other."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from apportion.replay import metrics
from apportion.replay.org import Org
from apportion.replay.policies import POLICIES, build
from apportion.replay.trace import UNTIL_END, Trace
from apportion.sim.runner import Hooks, simulate

#: (policy, virtual time reached, end) after each instant; None when silent.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Replay:
    trace: Trace
    org: Org
    policies: tuple[str, ...]
    window: int | None = None  # seconds from the first submission; None: all


def run(replay: Replay, progress: Progress | None = None) -> dict[str, Any]:
    """Run every policy; returns the results (the results.json object)."""
    trace = replay.trace
    begin = min((j.submit for j in trace.jobs), default=0)
    last = window_end(trace, begin)
    end = min(last, begin + replay.window) if replay.window else last
    org = replay.org
    base_scenario, _ = build("apportion", org, trace, until=end)
    tree = base_scenario.tree
    results: dict[str, Any] = {}
    for name in replay.policies:
        scenario, team_by_name = build(name, org, trace, until=end)
        cycle_times: list[float] = []
        instant: Callable[[int], None] | None = None
        if progress is not None:
            def instant(at: int, name: str = name) -> None:
                progress(name, at - begin, end - begin)
        began = time.perf_counter()
        result = simulate(scenario, until=end, policy=POLICIES[name],
                          hooks=Hooks(instant=instant, cycle=cycle_times.append))
        took = time.perf_counter() - began
        measured = metrics.compute(result, team_by_name, tree, org.pool_name, begin, end,
                                   cycle_times)
        measured["wall_seconds"] = {"simulate": took,
                                    "measure": time.perf_counter() - began - took}
        results[name] = measured
        if progress is not None:
            progress(name, end - begin, end - begin)
    return {
        "trace": {"source": trace.source, "jobs": sum(1 for j in trace.jobs if j.submit < end),
                  "notes": list(trace.notes), "counts": trace.counts},
        "org": {"source": org.source, "description": org.description,
                "teams": _teams(tree, org.pool_name), "capacity_gpus":
                sum(n.gpus for n in base_scenario.nodes)},
        "window": {"start": begin, "end": end},
        "policies": results,
        "goals": goals(results),
    }


def window_end(trace: Trace, begin: int) -> int:
    """Where the whole trace ends: the last job's end, a job that runs to the
    end of the replay not counted; at least one second after the last
    submission, so that every arrival is scheduled and measured."""
    ends = [j.submit + j.duration for j in trace.jobs if j.duration < UNTIL_END]
    return max([*ends, trace.end + 1 if trace.jobs else begin])


def _teams(tree: Any, pool: str) -> list[dict[str, Any]]:
    return [{"team": slug, "parent": t.parent, "bursting_priority": t.bursting_priority,
             "burst_limit_percent": t.burst_limit_percent,
             "reservation_gpus": tree.reservation(slug, pool) / 1000}
            for slug, t in tree.teams.items()]


#: Which Jain's index the goal reads, and why (docs/replay.md, "Measures").
JAIN_WHY = ("measured as fairness.jain_spec_workloads: each top-level team's burst in use "
            "against its SPEC 4 burst entitlement at that instant (bursting demand served "
            "level by level in descending workload priority, water-filled by bursting "
            "priority, no team above its want, caps held), a team less than one of its "
            "workloads away from its entitlement counted at it (no whole workload started "
            "or taken could bring it closer); jain_spec (the fluid entitlement, exact), "
            "jain_weighted (burst / weight across priority levels) and jain_demand_aware "
            "are kept for comparison")


USEFUL_WHY = ("utilization counts the GPU-time of preempted runs, whose work is thrown "
              "away and done again; useful utilization counts only the work kept "
              "(work_balance.useful_utilization), the issue's 'how much more work gets done'")


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals, each met or missed, with the numbers behind it."""
    out: list[dict[str, Any]] = []
    ours = results.get("apportion")
    if ours is None:
        return out
    baselines = {k: v for k, v in results.items() if k != "apportion"}

    def add(goal: str, value: Any, target: str, met: bool | None, why: str = "") -> None:
        out.append({"goal": goal, "value": value, "target": target, "met": met,
                    **({"why": why} if why else {})})

    if baselines:
        best_name = max(baselines, key=lambda k: baselines[k]["utilization"]["average"])
        best = baselines[best_name]["utilization"]["average"]
        mine = ours["utilization"]["average"]
        add("utilization >= the best baseline's", round(mine, 6),
            f">= {best:.6f} ({best_name})", mine >= best)
        # the same, counting only work kept: a preempted run's GPU-time,
        # thrown away, is in the utilization above (docs/replay.md)
        kept_name = max(baselines,
                        key=lambda k: baselines[k]["work_balance"]["useful_utilization"])
        kept = baselines[kept_name]["work_balance"]["useful_utilization"]
        mine_kept = ours["work_balance"]["useful_utilization"]
        add("useful utilization (work kept) >= the best baseline's", round(mine_kept, 6),
            f">= {kept:.6f} ({kept_name})", mine_kept >= kept, USEFUL_WHY)
    frac = ours["reserved_start"]["fraction"]
    add("reserved work starts within one cycle when its reservation has room", frac,
        "1.0 (100 %)", None if frac is None else frac >= 1.0)
    jain = ours["fairness"]["jain_spec_workloads"]
    add("Jain's index of burst shares vs weights while saturated", jain, ">= 0.99",
        None if jain is None else jain >= 0.99, JAIN_WHY)
    ratio = ours["preemptions"]["over_preemption_ratio"]
    add("over-preemption ratio", ratio, "<= 1.10", True if ratio is None else ratio <= 1.10)
    rp = ours["preemptions"]["reserved_preempted"]
    add("reserved workloads preempted", rp, "0", rp == 0)
    if "reclaim-to-quota" in results:
        mine_p99 = ours["queueing_delay_s"]["elastic"]["p99"]
        theirs = results["reclaim-to-quota"]["queueing_delay_s"]["elastic"]["p99"]
        met = None if mine_p99 is None or theirs is None else mine_p99 <= theirs
        add("p99 queueing delay of elastic work no worse than reclaim-to-quota's", mine_p99,
            f"<= {theirs}", met)
    return out


def policy_names(names: Sequence[str] | None) -> tuple[str, ...]:
    """The policies asked for (all five when none), in the canonical order."""
    if not names:
        return tuple(POLICIES)
    return tuple(n for n in POLICIES if n in set(names))
