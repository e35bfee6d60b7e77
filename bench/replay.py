"""Benchmark of ``apportion replay`` (issue 17): the Alibaba GPU 2023 trace
with all five policies, for one or both example orgs.

For each org: the wall time of the whole replay (import, five simulations,
measures) and of each policy's simulation, its cycles, instants and ms per
cycle; and, as the baseline measured in the same process, a plain
``simulate`` of the apportion scenario without hooks or measures, so the
figures read as ratios on a shared, noisy machine (``ratio_vs_plain``: a
policy's simulation time over the plain run's; ``ratio_vs_apportion``: over
the apportion policy's). ``--jobs N`` runs the policies in N processes at
once (results merged as one run's). With ``--report DIR`` the
report of each org is written to DIR/<org>/ (docs/replay.md's figures).

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from apportion.replay import report
from apportion.replay.alibaba import load_alibaba
from apportion.replay.org import load_org
from apportion.replay.policies import POLICIES, build
from apportion.replay.runner import Replay, goals, run
from apportion.replay.trace import parse_duration
from apportion.sim.runner import simulate

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "alibaba-gpu-2023"
ORGS = {"flat8": ROOT / "examples" / "replay" / "flat8.yaml",
        "seed_tree": ROOT / "examples" / "replay" / "seed_tree.yaml"}


def _one(name: str, trace_path: str, window: int | None, policies: tuple[str, ...]
         ) -> dict[str, Any]:
    trace = load_alibaba(trace_path)
    return run(Replay(trace, load_org(str(ORGS[name])), policies, window))


def bench_org(name: str, trace_path: str, window: int | None, policies: tuple[str, ...],
              out: str | None, baseline: bool, jobs: int = 1) -> dict[str, Any]:
    began = time.perf_counter()
    trace = load_alibaba(trace_path)
    org = load_org(str(ORGS[name]))
    if jobs > 1:  # one process per policy; the results merged as one run's
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            parts = list(pool.map(_one, [name] * len(policies), [trace_path] * len(policies),
                                  [window] * len(policies), [(p,) for p in policies]))
        results = parts[0]
        results["policies"] = {p: part["policies"][p] for p, part in zip(policies, parts,
                                                                         strict=True)}
        results["goals"] = goals(results["policies"])
    else:
        results = run(Replay(trace, org, policies, window))
    total = time.perf_counter() - began
    plain = None
    if baseline:
        end = results["window"]["end"]
        scenario, _ = build("apportion", org, trace, until=end)
        t0 = time.perf_counter()
        simulate(scenario, until=end)
        plain = time.perf_counter() - t0
    if out:
        report.write(results, str(Path(out) / name))
    per = {}
    for policy, r in results["policies"].items():
        sim_s = r["wall_seconds"]["simulate"]
        per[policy] = {
            "simulate_s": round(sim_s, 2),
            "measure_s": round(r["wall_seconds"]["measure"], 2),
            "cycles": r["sim"]["cycles"],
            "instants": r["sim"]["instants"],
            "ms_per_cycle": round(1000 * sim_s / max(1, r["sim"]["cycles"]), 3),
            "ratio_vs_plain": None if not plain else round(sim_s / plain, 3),
            "ratio_vs_apportion": round(
                sim_s / results["policies"]["apportion"]["wall_seconds"]["simulate"], 3)
            if "apportion" in results["policies"] else None,
        }
    return {"org": name, "total_s": round(total, 1), "jobs_in_parallel": jobs, "plain_simulate_s":
            None if plain is None else round(plain, 2), "jobs": results["trace"]["jobs"],
            "window_s": results["window"]["end"] - results["window"]["start"],
            "policies": per,
            "goals": {g["goal"]: g["met"] for g in results["goals"]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--org", choices=[*ORGS, "both"], default="both")
    parser.add_argument("--trace", default=str(TRACE))
    parser.add_argument("--window", default=None, help="e.g. 120d (default: the whole trace)")
    parser.add_argument("--policy", action="append", choices=list(POLICIES))
    parser.add_argument("--report", default=None, help="write each org's report here")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--jobs", type=int, default=1,
                        help="policies run in this many processes at once (default 1)")
    args = parser.parse_args()
    window = parse_duration(args.window, "--window") if args.window else None
    names = list(ORGS) if args.org == "both" else [args.org]
    policies = tuple(args.policy) if args.policy else tuple(POLICIES)
    out = [bench_org(n, args.trace, window, policies, args.report, not args.no_baseline,
                     args.jobs) for n in names]
    for o in out:
        print(f"{o['org']}: {o['total_s']} s for {len(o['policies'])} policies")
    print(json.dumps({"orgs": out}))


if __name__ == "__main__":
    main()
