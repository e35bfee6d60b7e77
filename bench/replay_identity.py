"""Identity check for speed work on ``apportion replay``: the sha256 of every
decision each policy's simulation made, for one or both example orgs over a
window of the Alibaba GPU 2023 trace.

A decision digest covers every workload's final state as the simulator
returns it (status, attempts with their start and end times and devices,
events with their reasons, the reason it waits for) and every preemption
record, in id order. Two versions of the engine that decide alike print the
same digests; the wall and CPU time and cycle count are printed beside them.

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from apportion.replay.alibaba import load_alibaba
from apportion.replay.org import load_org
from apportion.replay.policies import POLICIES, build
from apportion.replay.trace import parse_duration
from apportion.sim.runner import SimResult, simulate

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "alibaba-gpu-2023"
ORGS = {"flat8": ROOT / "examples" / "replay" / "flat8.yaml",
        "seed_tree": ROOT / "examples" / "replay" / "seed_tree.yaml"}


def digest(result: SimResult) -> str:
    """sha256 of the run's decisions: every state (repr) and preemption."""
    h = hashlib.sha256()
    for wid in sorted(result.states):
        h.update(repr(result.states[wid]).encode())
        h.update(b"\n")
    for p in result.preemptions:
        h.update(repr(p).encode())
        h.update(b"\n")
    return h.hexdigest()


def one(org: str, policy: str, trace_path: str, window: int) -> dict[str, Any]:
    trace = load_alibaba(trace_path)
    begin = min(j.submit for j in trace.jobs)
    end = begin + window
    scenario, _ = build(policy, load_org(str(ORGS[org])), trace, until=end)
    t0, c0 = time.perf_counter(), time.process_time()
    result = simulate(scenario, until=end, policy=POLICIES[policy])
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"org": org, "policy": policy, "sha256": digest(result),
            "cycles": result.cycles, "instants": result.instants,
            "counters": dict(result.counters), "simulate_s": round(took, 2), "cpu_s": round(cpu, 2),
            "ms_per_cycle": round(1000 * took / max(1, result.cycles), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--org", choices=[*ORGS, "both"], default="both")
    parser.add_argument("--trace", default=str(TRACE))
    parser.add_argument("--window", default="30d")
    parser.add_argument("--policy", action="append", choices=list(POLICIES))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    window = parse_duration(args.window, "--window")
    orgs = list(ORGS) if args.org == "both" else [args.org]
    policies = args.policy or list(POLICIES)
    pairs = [(o, p) for o in orgs for p in policies]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = list(pool.map(one, [o for o, _ in pairs], [p for _, p in pairs],
                             [args.trace] * len(pairs), [window] * len(pairs)))
    for r in runs:
        print(f"{r['org']:9} {r['policy']:17} {r['sha256'][:16]} cycles {r['cycles']} "
              f"{r['simulate_s']} s, CPU {r['cpu_s']} s ({r['ms_per_cycle']} ms/cycle)")
    print(json.dumps({"window": args.window, "runs": runs}))


if __name__ == "__main__":
    main()
