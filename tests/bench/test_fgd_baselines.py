"""The FGD replay's baselines on tiny hand-made clusters: fragmentation worked by
hand, and every choice of the vectorized policies against a plain transcription of
the simulator's rules (pkg/utils/frag.go, pkg/simulator/plugin/*_score.go)."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from fgd.baselines import (
    FGD,
    BestFit,
    Cluster,
    DotProduct,
    FragModel,
    Policy,
    make_policy,
)
from fgd.trace import NodeRow, PodRow, Typical, arrival_sequence, load_pods, typical_pods

SHARE = Typical(cpu_milli=4000, gpu_milli=500, num_gpu=1, gpu_spec="", count=1)
PAIR = Typical(cpu_milli=8000, gpu_milli=1000, num_gpu=2, gpu_spec="", count=1)
CPU_ONLY = Typical(cpu_milli=1000, gpu_milli=0, num_gpu=0, gpu_spec="", count=2)


def cluster_with(devices: list[list[int]], cpu: list[int], model: str = "T4") -> Cluster:
    nodes = [NodeRow(f"n{i}", 16000, 65536, len(d), model) for i, d in enumerate(devices)]
    c = Cluster(nodes)
    for i, (d, cpu_left) in enumerate(zip(devices, cpu, strict=True)):
        c.left[i, : len(d)] = d
        c.cpu[i] = cpu_left
        c.gleft[i] = sum(d)
        c.full[i] = sum(x == 1000 for x in d)
        c.maxleft[i] = max(d)
    return c


def test_fragmentation_worked_by_hand() -> None:
    # node 0: free [1000, 1000, 700, 200], CPU 16 cores left
    #   0.5 GPU share: fits (700 or 1000 free) -> fragment = the 200 below 500
    #   2 whole GPUs: fits (two free) -> fragment = 700 + 200, not whole
    #   F = 0.5 * 200 + 0.5 * 900 = 550
    # node 1: same GPUs, 2 cores left: neither shape fits for lack of CPU, so every
    #   free milli is fragment: F = 2900
    # node 2: all free: F = 0
    c = cluster_with([[1000, 1000, 700, 200], [1000, 1000, 700, 200], [1000] * 4],
                     [16000, 2000, 16000])
    model = FragModel([SHARE, PAIR], c.models, "exact", c.gmax)
    assert [model.frag(c, i) for i in range(3)] == [550, 2900, 0]
    # a CPU-only typical pod (weight 2 of 4) counts all free GPU milli everywhere
    model = FragModel([SHARE, PAIR, CPU_ONLY], c.models, "exact", c.gmax)
    assert model.frag(c, 0) == 0.25 * 200 + 0.25 * 900 + 0.5 * 2900
    assert model.frag(c, 1) == 2900


def test_a_model_the_typical_pod_excludes_is_all_fragment() -> None:
    c = cluster_with([[1000, 1000, 700, 200]], [16000], model="P100")
    only_t4 = Typical(4000, 500, 1, "T4|V100M16", 1)
    assert FragModel([only_t4], c.models, "exact", c.gmax).frag(c, 0) == 2900


def test_fgd_score_worked_by_hand() -> None:
    # 0.5 GPU, 1 core, on node 0 [1000, 1000, 700, 200] (F = 550):
    #   device 2 -> [1000, 1000, 200, 200]: F = 0.5*400 + 0.5*400 = 400,
    #     dF = 150, int(100 * sigmoid(0.15)) = 53
    #   device 0 -> [500, 1000, 700, 200]: one free GPU left, the pair no longer
    #     fits: F = 0.5*200 + 0.5*2400 = 1300, dF = -750, score 32
    # on node 1, all free (F = 0) -> [500, 1000, 1000, 1000]: F = 250, score 43
    c = cluster_with([[1000, 1000, 700, 200], [1000] * 4], [16000, 16000])
    model = FragModel([SHARE, PAIR], c.models, "exact", c.gmax)
    fgd = FGD(c, np.array([1, 0]), np.random.default_rng(0), model)
    ask = c.ask(PodRow("p", 1000, 1024, 1, 500, ""), "exact")
    assert [int(100 / (1 + math.exp(-x))) for x in (0.15, -0.75, -0.25)] == [53, 32, 43]
    assert fgd.place(ask) == (0, [2], 500)
    assert list(c.left[0]) == [1000, 1000, 200, 200] and c.cpu[0] == 15000


def test_ties_go_to_the_smallest_rank() -> None:
    c = cluster_with([[1000] * 4] * 3, [16000] * 3)
    for cls in (BestFit, DotProduct):
        policy = cls(cluster_with([[1000] * 4] * 3, [16000] * 3), np.array([2, 0, 1]),
                     np.random.default_rng(0))
        assert policy.place(c.ask(PodRow("p", 1000, 1024, 1, 300, ""), "exact")) == (1, [0], 300)


# -- the simulator's rules, transcribed plainly ------------------------------------
def naive_frag(left: list[int], cpu: int, model: str, typical: list[Typical]) -> Fraction:
    total = sum(t.count for t in typical)
    g = sum(left)
    out = Fraction(0)
    for t in typical:
        w = Fraction(t.count, total)
        allowed = {x for x in t.gpu_spec.split("|") if x}
        if t.gpu_milli == 0 or (allowed and model not in allowed):
            out += w * g
        elif sum(x >= t.gpu_milli for x in left) >= t.num_gpu and cpu >= t.cpu_milli:
            out += w * sum(x for x in left if x < t.gpu_milli)
        else:
            out += w * g
    return out


def fgd_score(before: Fraction, after: Fraction) -> int:
    return int(1.0 / (1.0 + math.exp(-(float(before - after) / 1000.0))) * 100.0)


def naive_choice(policy: str, c: Cluster, rank: np.ndarray, ask_pod: PodRow,
                 typical: list[Typical]) -> tuple[int, list[int]] | None:
    """(node, devices) the simulator picks, from the cluster's arrays."""
    a = c.ask(ask_pod, "exact")
    options = []
    for i in range(c.n):
        left = [int(x) for x in c.left[i, : c.gpus[i]]]
        cpu, model = int(c.cpu[i]), c.models[int(c.tau[i])]
        m, num = int(a.milli[i]), a.num
        if not a.type_ok[i] or cpu < a.cpu or c.mem[i] < a.mem:
            continue
        if (num == 1 and max(left) < m) or (num > 1 and sum(x == 1000 for x in left) < num):
            continue
        if policy == "fgd":
            f0 = naive_frag(left, cpu, model, typical)
            if num == 1:
                best = None
                for d, x in enumerate(left):
                    if x >= m:
                        new = left.copy()
                        new[d] -= m
                        s = fgd_score(f0, naive_frag(new, cpu - a.cpu, model, typical))
                        if best is None or s > best[0]:
                            best = (s, [d])
                assert best is not None
                options.append((best[0], -rank[i], i, best[1]))
            else:
                new = left.copy()
                devs = [d for d, x in enumerate(left) if x == 1000][:num]
                for d in devs:
                    new[d] = 0
                s = fgd_score(f0, naive_frag(new, cpu - a.cpu, model, typical))
                options.append((s, -rank[i], i, devs))
        else:
            gpu_req = m * num
            if policy == "best-fit":
                score = 0.0
                score += (cpu - a.cpu) / 128000 * 0.5
                score += (sum(left) - gpu_req) / 8000 * 0.5
                raw = int((1.0 - score) * 100)
            else:
                dot = (cpu / 128000) * (a.cpu / 128000) + (sum(left) / 8000) * (gpu_req / 8000)
                raw = int(100 * (1 - dot / 2))
            if num == 1:
                fits = [(x, d) for d, x in enumerate(left) if x >= m]
                devs = [min(fits)[1]]
            else:
                devs = [d for d, x in enumerate(left) if x == 1000][:num]
            options.append((raw, -rank[i], i, devs if num else []))
    if not options:
        return None
    if policy == "best-fit":  # min-max normalization with integer division
        lo, hi = min(o[0] for o in options), max(o[0] for o in options)
        options = [((o[0] - lo) * 100 // (hi - lo) if hi > lo else 0, *o[1:]) for o in options]
    _, _, i, devs = max(options)
    return i, devs


def random_cluster(rnd: random.Random) -> list[NodeRow]:
    return [NodeRow(f"node-{i:02d}", rnd.choice([8000, 16000, 32000]),
                    rnd.choice([16384, 65536]), rnd.choice([1, 2, 4, 8]),
                    rnd.choice(["T4", "P100", "G2"])) for i in range(12)]


def random_pods(rnd: random.Random, n: int) -> list[PodRow]:
    shapes = [(rnd.choice([1000, 2000, 4000, 6000]), rnd.choice([2048, 8192]),
               *rnd.choice([(0, 0), (1, 1000), (2, 1000), (4, 1000), (8, 1000),
                            (1, 500), (1, 250), (1, 300), (1, 700), (1, 460)]),
               rnd.choice(["", "", "", "T4", "P100|G2"])) for _ in range(25)]
    out = []
    for i in range(n):
        cpu, mem, num, milli, spec = rnd.choice(shapes)
        out.append(PodRow(f"pod-{i:04d}", cpu, mem, num, milli, spec if num else ""))
    return sorted(out, key=lambda p: p.name)


@pytest.mark.parametrize("policy", ["fgd", "best-fit", "dot-product"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_choice_matches_the_simulators_rules(policy: str, seed: int) -> None:
    rnd = random.Random(seed)
    nodes = random_cluster(rnd)
    pods = random_pods(rnd, 160)
    capacity = sum(r.gpus for r in nodes) * 1000
    seq, rng = arrival_sequence(pods, capacity, seed)
    typical = typical_pods(pods)
    c = Cluster(nodes)
    rank = rng.permutation(len(nodes))
    model = FragModel(typical, c.models, "exact", c.gmax) if policy == "fgd" else None
    p: Policy = make_policy(policy, c, rank, rng, model)
    placed = 0
    for pod in seq:
        want = naive_choice(policy, c, rank, pod, typical)
        got = p.place(c.ask(pod, "exact"))
        assert (got[:2] if got else None) == want, pod
        placed += got is not None
    assert placed > len(seq) // 3  # the run did fill the cluster, not just fail


def test_tuning_reaches_1_3_times_capacity_by_the_simulators_rule() -> None:
    pods = [PodRow(f"p{i}", 1000, 1024, 1, 500, "") for i in range(10)]
    seq, _ = arrival_sequence(pods, 10_000, seed=5)
    total = sum(p.total_milli for p in seq)
    assert total <= 13_000 < total + 500 and len(seq) == 26
    assert sorted(p.name for p in seq[:10]) == [p.name for p in pods]  # trace first, shuffled
    many = [PodRow(f"p{i}", 1000, 1024, 2, 1000, "") for i in range(10)]  # 20,000 milli
    seq, _ = arrival_sequence(many, 10_000, seed=5)
    assert sum(p.total_milli for p in seq) == 12_000  # random pods dropped down to <= 1.3x


def test_typical_pods_cover_95_percent_most_frequent_first() -> None:
    pods = ([PodRow(f"a{i}", 1000, 1, 1, 500, "") for i in range(60)]
            + [PodRow(f"b{i}", 2000, 1, 0, 0, "") for i in range(30)]
            + [PodRow(f"c{i}", 3000, 1, 2, 1000, "") for i in range(6)]
            + [PodRow(f"d{i}", 4000, 1, 1, 1000, "") for i in range(4)])
    got = typical_pods(pods)
    assert [(t.cpu_milli, t.count) for t in got] == [(1000, 60), (2000, 30), (3000, 6)]


def test_a_pod_list_without_memory_asks_for_none(tmp_path: Path) -> None:
    # the simulator's openb_pod_list_nomem*.csv drop the memory column
    path = tmp_path / "openb_pod_list_nomem.csv"
    path.write_text("name,cpu_milli,num_gpu,gpu_milli,gpu_spec,qos\n"
                    "openb-pod-0001,6000,1,460,G2,BE\nopenb-pod-0000,12000,2,1000,,LS\n")
    pods = load_pods(path)
    assert [(p.name, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli) for p in pods] == [
        ("openb-pod-0000", 12000, 0, 2, 1000), ("openb-pod-0001", 6000, 0, 1, 460)]
