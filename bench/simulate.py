"""Benchmark of ``apportion simulate`` (issue 5): a week of a large cluster.

Scenario, generated in memory (seeded, so every run sees the same data) and
validated by the same parser as a file:

- 2,000 nodes x 8 GPUs (16,000 GPUs) in two pools, `east` (1,200 nodes) and
  `west` (800), racks of 20 nodes, topology [rack];
- 100 teams: 10 top-level teams with 9 leaf teams each; reservations cover
  60% of each pool; bursting priorities 1-5, some burst limits;
- 50,000 workloads over one simulated week (604,800 s), arriving on the minute
  (like a batch system's submission ticks): 40% reserved, 60% elastic,
  fractions, whole GPUs and multi-node gangs (some with preferred rack
  topology, 10% pinned to a pool), durations from 5 minutes to 12 hours.

Prints one JSON object as its last line: wall_s (parsing + simulation),
simulate_s and ms_per_cycle (the simulation alone), parse_s, cycles, instants,
workloads, nodes, teams, outcome counts and the engine's counters.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from typing import Any

from apportion.sim.runner import simulate
from apportion.sim.scenario import scenario_from_data

WEEK = 7 * 86400
POOLS = (("east", 0.6), ("west", 0.4))


def pools(nodes: int, has_topology: bool = True) -> list[dict[str, Any]]:
    out = []
    for name, share in POOLS:
        count = round(nodes * share)
        racks = [
            {"prefix": f"{name}-r{r:03d}-n", "count": min(20, count - r * 20), "gpus": 8,
             "labels": {"rack": f"r{r:03d}"}}
            for r in range((count + 19) // 20)
        ]
        out.append({"name": name, "topology": ["rack"] if has_topology else [],
                    "preemption_grace": 30,
                    "nodes": racks})
    return out


def teams(n_teams: int, nodes: int, rng: random.Random) -> tuple[list[dict[str, Any]], list[str]]:
    n_top = max(1, n_teams // 10)
    n_leaf = max(1, n_teams // n_top - 1)
    capacity = {name: round(nodes * share) * 8 for name, share in POOLS}
    out, leaves = [], []
    for t in range(n_top):
        per_top = {p: int(c * 0.6) // n_top for p, c in capacity.items()}
        children = []
        for c in range(n_leaf):
            slug = f"t{t:02d}-l{c:02d}"
            leaves.append(slug)
            child: dict[str, Any] = {
                "name": slug, "bursting_priority": rng.randint(1, 5),
                "reservations": {p: v // n_leaf for p, v in per_top.items()},
            }
            if c % 4 == 0:
                child["burst_limit_percent"] = 100
            children.append(child)
        out.append({"name": f"t{t:02d}", "bursting_priority": 1 + t % 3,
                    "reservations": per_top, "children": children})
    return out, leaves


def workload(
    k: int, leaves: list[str], rng: random.Random, has_topology: bool = True
) -> dict[str, Any]:
    is_reserved = rng.random() < 0.4
    shape = rng.random()
    w: dict[str, Any] = {"name": f"w{k:05d}", "team": rng.choice(leaves),
                         "class": "reserved" if is_reserved else "elastic",
                         "at": rng.randrange(0, WEEK // 60) * 60,
                         "duration": rng.choice((300, 900, 1800, 3600, 7200, 14400, 43200))}
    if shape < 0.1:
        w["gpus"] = rng.choice((0.25, 0.5, 0.75))
    elif shape < 0.7:
        w["gpus"] = rng.choice((1, 2, 4, 8))
    else:
        w.update(gpus=8, pods=rng.choice((2, 3, 4)))
        if rng.random() < 0.5 and has_topology:
            w["topology"] = {"level": "rack", "mode": "preferred"}
    if is_reserved:
        w["priority"] = rng.choice((100, 200, 500))
    else:
        w["priority"] = rng.choice((10, 50, 50, 80))
        w["requeue_on_preemption"] = rng.random() < 0.3
    if rng.random() < 0.1:
        w["pool"] = rng.choice([p for p, _ in POOLS])
    return w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-topology", action="store_true",
                        help="pools without topology levels (and no topology requests)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    team_data, leaves = teams(args.teams, args.nodes, rng)
    has_topology = not args.no_topology
    data = {"pools": pools(args.nodes, has_topology), "teams": team_data,
            "workloads": [workload(k, leaves, rng, has_topology)
                          for k in range(args.workloads)]}
    start = time.perf_counter()
    scenario = scenario_from_data(data)
    parsed = time.perf_counter()
    result = simulate(scenario)
    done = time.perf_counter()
    wall = done - start
    statuses = Counter(w.status.value for w in result.states.values())
    print(json.dumps({
        "wall_s": round(wall, 2),  # parsing + simulation
        "simulate_s": round(done - parsed, 2),  # the simulation alone
        # the simulation alone per cycle (parsing the scenario is not a cycle's cost)
        "ms_per_cycle": round(1000 * (done - parsed) / max(1, result.cycles), 2),
        "topology": has_topology,
        "parse_s": round(parsed - start, 2),
        "cycles": result.cycles,
        "instants": result.instants,
        "simulated_s": result.time,
        "workloads": len(result.states),
        "nodes": len(result.nodes),
        "teams": len(scenario.tree.teams),
        "statuses": dict(sorted(statuses.items())),
        "preemptions": len(result.preemptions),
        "requeued": sum(1 for w in result.states.values() if w.attempt > 1),
        "counters": dict(sorted(result.counters.items())),
    }))


if __name__ == "__main__":
    main()
