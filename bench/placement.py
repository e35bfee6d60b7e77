"""Placement throughput: apportion's indexed ClusterState vs a linear first-fit scan.

1. 10,000 single-pod requests (a mix of 0.25-1 GPU shares and 1-8 GPU pods,
   seeded) onto 5,000 nodes x 8 GPUs: each request is placed and occupied.
   The same requests run through a linear-scan first-fit placer written here.
2. A 512-pod gang (1 GPU each) with required rack topology over 640 nodes in
   10 racks (five racks carry one busy GPU, so only the other five fit).
3. The same 10,000 requests asking host CPU and memory too (per pod 2-16 CPUs
   and 16-128 GiB per GPU asked, seeded) on nodes with 128 CPUs and 1 TiB,
   packed ``best_fit`` and ``fragmentation`` (the pool's mix: the requests'
   own shapes, as a scheduler sees them in its queue).

Prints one JSON object as its last line:
placements_per_s, linear_placements_per_s, ratio_vs_linear, gang_512_ms,
nodes_examined_per_placement, host_best_fit_per_s, host_fragmentation_per_s
(with ``ratio_vs_gpu_only``: against the first run, same process) and the
fragmentation picker's work counters (states scored per pick).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import replace

from apportion.domain.cluster import Node, Packing, Pool
from apportion.domain.workload import DeviceShare, PodPlacement, Topology
from apportion.engine.placement import ClusterState, PlacementRequest, PodShape, ShapeMix

#: (gpus per pod, weight): fractions 0.25-1 GPU and whole 1-8 GPU pods.
MIX = ((0.25, 20), (0.5, 15), (0.75, 5), (1, 25), (2, 15), (4, 12), (8, 8))


def make_requests(count: int, seed: int) -> list[PlacementRequest]:
    rng = random.Random(seed)
    sizes = [g for g, _ in MIX]
    weights = [w for _, w in MIX]
    out = []
    for gpus in rng.choices(sizes, weights, k=count):
        whole = int(gpus) if gpus >= 1 else 0
        out.append(PlacementRequest(pods=1, min_pods=1, charge=round(gpus * 1000),
                                    whole_devices=whole))
    return out


def with_host(reqs: list[PlacementRequest], seed: int) -> list[PlacementRequest]:
    """The requests asking CPU and memory too (seeded, a few sizes per GPU)."""
    rng = random.Random(seed + 1)
    out = []
    for r in reqs:
        gpus = max(1, r.whole_devices)
        out.append(replace(r, cpu_milli=rng.choice((2, 4, 8, 16)) * 1000 * gpus,
                           memory_mib=rng.choice((16, 32, 64, 128)) * 1024 * gpus))
    return out


def run_apportion(nodes: list[Node], reqs: list[PlacementRequest],
                  packing: Packing = Packing.BEST_FIT,
                  mix: ShapeMix | None = None,
                  decisions: list[str] | None = None) -> tuple[float, int, dict]:
    """Place and occupy every request; with ``decisions``, append each one's
    placement as a line (node and device:milli, or the failure kind)."""
    cs = ClusterState(Pool("p", packing=packing), nodes, mix=mix)
    owned = [replace(r, owner=(i, 0, 0)) for i, r in enumerate(reqs)]
    placed = 0
    start = time.perf_counter()
    for r in owned:
        res = cs.place_and_occupy(r)
        if res.ok:
            placed += 1
        if decisions is not None:
            decisions.append(" ".join(
                f"{p.node}:" + ",".join(f"{d.index}/{d.milli}" for d in p.devices)
                for p in res.pods) if res.ok else f"- {res.failure}")
    counters = cs.counters.as_dict()
    frag = cs._book.frag
    if frag is not None:
        counters["fragmentation_picks"] = frag.picks
        counters["states_scored"] = frag.states_scored
        counters["states_seen"] = len(frag.states)
    return time.perf_counter() - start, placed, counters


def run_linear(nodes: list[Node], reqs: list[PlacementRequest]) -> tuple[float, int]:
    """First fit by scanning nodes in name order and devices in index order."""
    free = {n.name: [1000] * n.gpus for n in sorted(nodes, key=lambda n: n.name)}
    placed = 0
    start = time.perf_counter()
    for r in reqs:
        pod = None
        for name, devs in free.items():
            if r.whole_devices:
                idx = [i for i, f in enumerate(devs) if f == 1000][: r.whole_devices]
                if len(idx) == r.whole_devices:
                    pod = PodPlacement(name, tuple(DeviceShare(i, 1000) for i in idx))
            else:
                for i, f in enumerate(devs):
                    if f >= r.charge:
                        pod = PodPlacement(name, (DeviceShare(i, r.charge),))
                        break
            if pod is not None:
                for d in pod.devices:
                    devs[d.index] -= d.milli
                placed += 1
                break
    return time.perf_counter() - start, placed


def gang_ms(repeats: int) -> float:
    nodes = [Node(f"r{r}n{i:02d}", "p", 8, labels={"rack": f"r{r}"})
             for r in range(10) for i in range(64)]
    cs = ClusterState(Pool("p", topology=("rack",)), nodes)
    for r in range(5):
        cs.occupy((1000 + r, 0, 0), (PodPlacement(f"r{r}n00", (DeviceShare(0, 1000),)),))
    req = PlacementRequest(pods=512, min_pods=512, charge=1000, whole_devices=1,
                           topology=Topology("rack"))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        res = cs.place(req)
        times.append((time.perf_counter() - start) * 1000)
        assert res.ok and res.domain == "rack=r5" and len(res.pods) == 512
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dump", type=argparse.FileType("w"),
                        help="write every decision of the two host runs here (one line a "
                             "request: packing, index, placement), to check that a change "
                             "keeps them; timings then include the recording")
    args = parser.parse_args()
    nodes = [Node(f"node{i:05d}", "p", 8) for i in range(args.nodes)]
    reqs = make_requests(args.requests, args.seed)
    t_app, placed_app, counters = run_apportion(nodes, reqs)
    t_lin, placed_lin = run_linear(nodes, reqs)
    host_nodes = [replace(n, cpu_milli=128_000, memory_mib=1024 * 1024) for n in nodes]
    host_reqs = with_host(reqs, args.seed)
    mix = ShapeMix.of(PodShape(r.charge, r.whole_devices, r.cpu_milli, r.memory_mib)
                      for r in host_reqs)
    bf_log: list[str] | None = [] if args.dump else None
    fr_log: list[str] | None = [] if args.dump else None
    t_bf, placed_bf, _ = run_apportion(host_nodes, host_reqs, decisions=bf_log)
    t_fr, placed_fr, frag_counters = run_apportion(host_nodes, host_reqs,
                                                   Packing.FRAGMENTATION, mix, fr_log)
    if args.dump:
        for name, log in (("best_fit", bf_log), ("fragmentation", fr_log)):
            for i, line in enumerate(log or ()):
                args.dump.write(f"{name} {i} {line}\n")
        args.dump.close()
    result = {
        "requests": len(reqs),
        "placed_apportion": placed_app,
        "placed_linear": placed_lin,
        "placements_per_s": round(len(reqs) / t_app),
        "linear_placements_per_s": round(len(reqs) / t_lin),
        "ratio_vs_linear": round(t_lin / t_app, 2),
        "gang_512_ms": round(gang_ms(5), 2),
        "nodes_examined_per_placement": round(
            counters["nodes_examined"] / max(1, counters["placements"]), 3
        ),
        "counters": counters,
        "host_best_fit_per_s": round(len(reqs) / t_bf),
        "host_fragmentation_per_s": round(len(reqs) / t_fr),
        "host_ratio_vs_gpu_only": {"best_fit": round(t_app / t_bf, 3),
                                   "fragmentation": round(t_app / t_fr, 3)},
        "placed_host": {"best_fit": placed_bf, "fragmentation": placed_fr},
        "fragmentation_counters": frag_counters,
        "states_scored_per_pick": round(frag_counters.get("states_scored", 0)
                                        / max(1, frag_counters.get("fragmentation_picks", 1)), 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
