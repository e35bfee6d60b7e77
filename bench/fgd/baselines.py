"""The simulator's policies, from their published definitions, vectorized over nodes.

Facts from hkust-adsl/kubernetes-scheduler-simulator (paths in that repo):

* feasibility (the Filter step): GPU model accepted (Open-Gpu-Share,
  pkg/simulator/plugin/open_gpu_share.go), a device with enough free milli for a
  1-GPU pod or N fully free devices for an N-GPU pod
  (pkg/type/open-gpu-share/cache/gpunodeinfo.go AllocateGpuId), and free CPU and
  memory (Kubernetes' NodeResourcesFit, still on in the scheduler config of
  scripts/generate_config_and_run.py);
* the node with the highest score wins; equal scores go to the smallest node name
  (vendor/k8s.io/kubernetes/pkg/scheduler/core/generic_scheduler.go selectHost,
  patched for reproducibility), and node names are prefixed with a seeded random
  permutation ("%04d-", pkg/simulator/simulator.go syncClusterResourceList): ties
  go to the node with the smallest rank in a seeded shuffle;
* whole-GPU pods take the lowest-index fully free devices
  (pkg/type/resource.go AllocateExclusiveGpuId);
* FGD (pkg/simulator/plugin/fgd_score.go, pkg/utils/frag.go): a node's
  fragmentation is sum over typical pods t of w_t * f_t, f_t = the GPU milli left
  on devices with less than t's milli when the node could host t (GPU and CPU;
  memory is not looked at), else all GPU milli left (including when t asks no
  GPU, or the node's model is not allowed for t). Score = int(100 * sigmoid(
  (F_before - F_after) / 1000)); for a 1-GPU share every fitting device is tried and
  the best score wins, ties to the lowest device index;
* best-fit (best_fit_score.go): int(100 * (1 - (0.5 (cpu_left - cpu)/128000 +
  0.5 (gpu_left - gpu)/8000))), then min-max normalized to 0..100 over the
  feasible nodes with integer division (plugin_utils.go NormalizeScore); device:
  the least free one that fits, lowest index on ties (open_gpu_share.go);
* dot-product (dot_product_score.go, "merge" + "max" as in the artifact's run
  scripts): int(100 * (1 - (cpu_left*cpu/128000^2 + gpu_left*gpu/8000^2) / 2));
  device: best fit;
* random (random_score.go): a uniformly random feasible node; device: a uniformly
  random fitting one.

Exactness: FGD's fragmentation is computed in integers (weights = typical-pod
counts), so equal states give exactly equal scores; the float steps after that are
the simulator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fgd.trace import MILLI, NodeRow, PodRow, Typical, charge

MAX_SPEC_CPU = 128000.0
MAX_SPEC_GPU = 8000.0
POLICIES = ("fgd", "best-fit", "dot-product", "random")


@dataclass(frozen=True, slots=True)
class Ask:
    """One pod's request, per node of the cluster (charges differ per model in
    the memory mode)."""

    num: int  # GPUs (0 = CPU only); > 1 means whole devices
    milli: np.ndarray  # charge per device on each node (int64[N]); 0 for CPU-only
    type_ok: np.ndarray  # bool[N]
    cpu: int
    mem: int


class Cluster:
    """Free resources of every node: CPU, memory, milli per device (padded devices
    hold -1 so they never fit)."""

    def __init__(self, nodes: Sequence[NodeRow]) -> None:
        self.n = len(nodes)
        self.gmax = max(r.gpus for r in nodes)
        self.models = sorted({r.model for r in nodes})
        self.tau = np.array([self.models.index(r.model) for r in nodes], dtype=np.int64)
        self.cpu = np.array([r.cpu_milli for r in nodes], dtype=np.int64)
        self.mem = np.array([r.memory_mib for r in nodes], dtype=np.int64)
        self.gpus = np.array([r.gpus for r in nodes], dtype=np.int64)
        self.left = np.full((self.n, self.gmax), -1, dtype=np.int64)
        for i, r in enumerate(nodes):
            self.left[i, : r.gpus] = MILLI
        self.gleft = self.gpus * MILLI
        self.full = self.gpus.copy()
        self.maxleft = np.full(self.n, MILLI, dtype=np.int64)

    def ask(self, pod: PodRow, mode: str) -> Ask:
        by_model = np.array([charge(pod, m, mode) for m in self.models], dtype=np.int64)
        allowed = pod.allowed
        ok = np.array([not allowed or m in allowed for m in self.models])
        return Ask(pod.num_gpu, by_model[self.tau], ok[self.tau], pod.cpu_milli, pod.memory_mib)

    def feasible(self, a: Ask) -> np.ndarray:
        f = a.type_ok & (self.cpu >= a.cpu) & (self.mem >= a.mem)
        if a.num == 1:
            f &= self.maxleft >= a.milli
        elif a.num > 1:
            f &= self.full >= a.num
        return np.flatnonzero(f)

    def take(self, i: int, devices: Sequence[int], milli: int, a: Ask) -> None:
        row = self.left[i]
        for d in devices:
            if row[d] < milli:
                raise AssertionError(f"device {d} of node {i} over capacity")
            row[d] -= milli
        self.cpu[i] -= a.cpu
        self.mem[i] -= a.mem
        if self.cpu[i] < 0 or self.mem[i] < 0:
            raise AssertionError(f"node {i} over its CPU or memory")
        self.gleft[i] -= milli * len(devices)
        self.full[i] = int((row == MILLI).sum())
        self.maxleft[i] = int(row.max())

    def whole_devices(self, i: int, num: int) -> list[int]:
        return [int(d) for d in np.flatnonzero(self.left[i] == MILLI)[:num]]


#: placement = (node index, devices, milli per device)
Placement = tuple[int, list[int], int]


def pick_node(scores: np.ndarray, rank: np.ndarray) -> int:
    """Position of the highest score, ties to the smallest rank."""
    top = scores.max()
    tied = np.flatnonzero(scores == top)
    return int(tied[np.argmin(rank[tied])]) if len(tied) > 1 else int(tied[0])


class Policy:
    name = ""

    def __init__(self, cluster: Cluster, rank: np.ndarray, rng: np.random.Generator) -> None:
        self.c = cluster
        self.rank = rank
        self.rng = rng

    def place(self, a: Ask) -> Placement | None:
        idx = self.c.feasible(a)
        if len(idx) == 0:
            return None
        i, devices = self.choose(a, idx)
        milli = int(a.milli[i]) if a.num else 0
        self.c.take(i, devices, milli, a)
        self.after_take(i)
        return i, devices, milli

    def choose(self, a: Ask, idx: np.ndarray) -> tuple[int, list[int]]:
        raise NotImplementedError

    def after_take(self, i: int) -> None:
        """Hook for cached per-node state."""

    def best_fit_device(self, i: int, a: Ask) -> list[int]:
        if a.num != 1:
            return self.c.whole_devices(i, a.num)
        row = self.c.left[i]
        m = a.milli[i]
        fits = np.where(row >= m, row, MILLI + 1)
        return [int(np.argmin(fits))]


class BestFit(Policy):
    name = "best-fit"

    def choose(self, a: Ask, idx: np.ndarray) -> tuple[int, list[int]]:
        c = self.c
        gpu_req = (a.milli[idx] * a.num).astype(np.float64)
        score = (c.cpu[idx] - a.cpu) / MAX_SPEC_CPU * 0.5
        score = score + (c.gleft[idx] - gpu_req) / MAX_SPEC_GPU * 0.5
        raw = np.trunc((1.0 - score) * 100.0).astype(np.int64)
        lo, hi = raw.min(), raw.max()
        norm = (raw - lo) * 100 // (hi - lo) if hi > lo else np.zeros_like(raw)
        i = int(idx[pick_node(norm, self.rank[idx])])
        return i, self.best_fit_device(i, a)


class DotProduct(Policy):
    name = "dot-product"

    def choose(self, a: Ask, idx: np.ndarray) -> tuple[int, list[int]]:
        c = self.c
        gpu_req = (a.milli[idx] * a.num).astype(np.float64)
        dot = (c.cpu[idx] / MAX_SPEC_CPU) * (a.cpu / MAX_SPEC_CPU)
        dot = dot + (c.gleft[idx] / MAX_SPEC_GPU) * (gpu_req / MAX_SPEC_GPU)
        score = np.trunc(100.0 * (1.0 - dot / 2.0)).astype(np.int64)
        i = int(idx[pick_node(score, self.rank[idx])])
        return i, self.best_fit_device(i, a)


class Random(Policy):
    name = "random"

    def choose(self, a: Ask, idx: np.ndarray) -> tuple[int, list[int]]:
        i = int(idx[self.rng.integers(len(idx))])
        if a.num != 1 or a.milli[i] >= MILLI:
            return i, self.c.whole_devices(i, max(a.num, 1) if a.num else 0)
        fits = np.flatnonzero(self.c.left[i] >= a.milli[i])
        return i, [int(fits[self.rng.integers(len(fits))])]


# -- FGD ---------------------------------------------------------------------------
class FragModel:
    """Tables that make a node's fragmentation a few lookups.

    With integer weights n_t (typical-pod counts, N = sum n_t) and G = GPU milli
    left, N * F = N * G - sum_t n_t * A_t * U_t, where A_t = 1 when the node could
    host t (model allowed, CPU left >= t's CPU, t asks a GPU) and U_t is the milli
    left on devices that could hold t (0 when t does not fit the GPUs). For a 1-GPU
    t, U_t = sum of free milli over devices with free >= t's milli; for N > 1 GPUs,
    U_t = 1000 k if k >= N fully free devices, else 0. Grouping typical pods by CPU
    level (how many distinct CPU asks fit) gives, per model m and CPU level L:
    ``cm[m, L, K]`` = weight of 1-GPU typical pods with the K smallest milli asks,
    and ``whole[m, L, k]`` = the multi-GPU part for k fully free devices.
    Then sum_t n_t A_t U_t = sum_d free_d * cm[m, L, K(free_d)] + whole[m, L, k].
    """

    def __init__(self, typical: Sequence[Typical], models: Sequence[str], mode: str,
                 gmax: int) -> None:
        self.weight = sum(t.count for t in typical)
        thr = sorted({t.cpu_milli for t in typical})
        self.thr = np.array(thr, dtype=np.int64)
        levels = len(thr) + 1
        nm = len(models)
        per_model_share: list[dict[int, np.ndarray]] = [{} for _ in models]
        self.whole = np.zeros((nm, levels, gmax + 1), dtype=np.int64)
        ks = np.arange(gmax + 1)
        for t in typical:
            if t.num_gpu == 0:
                continue  # f_t = all GPU left: never subtracted
            lv = thr.index(t.cpu_milli) + 1  # counted from this level up
            row = PodRow("", t.cpu_milli, 0, t.num_gpu, t.gpu_milli, t.gpu_spec)
            allowed = row.allowed
            for mi, model in enumerate(models):
                if allowed and model not in allowed:
                    continue  # no access: all counted as fragment
                if t.num_gpu == 1:
                    m = charge(row, model, mode)
                    vec = per_model_share[mi].setdefault(m, np.zeros(levels, dtype=np.int64))
                    vec[lv:] += t.count
                else:
                    self.whole[mi, lv:, :] += t.count * MILLI * ks * (ks >= t.num_gpu)
        width = max((len(d) for d in per_model_share), default=0) + 1
        self.cm = np.zeros((nm, levels, width), dtype=np.int64)
        # kidx[m, x + 1] = how many 1-GPU asks on model m are <= x (x = -1 .. 1000)
        self.kidx = np.zeros((nm, MILLI + 2), dtype=np.int64)
        xs = np.arange(-1, MILLI + 1)
        for mi, d in enumerate(per_model_share):
            asks = sorted(d)
            for k, m in enumerate(asks):
                self.cm[mi, :, k + 1] = self.cm[mi, :, k] + d[m]
            self.cm[mi, :, len(asks) + 1:] = self.cm[mi, :, len(asks)][:, None]
            self.kidx[mi] = np.searchsorted(np.array(asks, dtype=np.int64), xs, side="right")

    def level(self, cpu_left: np.ndarray | int) -> np.ndarray:
        return np.searchsorted(self.thr, cpu_left, side="right")

    def usable(self, tau: int, free: np.ndarray) -> np.ndarray:
        """sum_d free_d * cm[tau, L, K(free_d)] for every level L (free: one node's
        devices, padding -1 counts 0)."""
        f = np.maximum(free, 0)
        return self.cm[tau][:, self.kidx[tau, f + 1]] @ f

    def frag(self, cluster: Cluster, i: int) -> float:
        """Node ``i``'s fragmentation, in milli-GPU (as the simulator reports it)."""
        tau = int(cluster.tau[i])
        lv = int(self.level(int(cluster.cpu[i])))
        used = int(self.usable(tau, cluster.left[i])[lv]) + int(
            self.whole[tau, lv, cluster.full[i]])
        return (self.weight * int(cluster.gleft[i]) - used) / self.weight


def sigmoid_score(delta_weighted: np.ndarray, weight: int) -> np.ndarray:
    """int64(100 * sigmoid(dF / 1000)), dF = delta_weighted / weight."""
    x = delta_weighted / weight / 1000.0
    return np.trunc(1.0 / (1.0 + np.exp(-x)) * 100.0).astype(np.int64)


class FGD(Policy):
    name = "fgd"

    def __init__(self, cluster: Cluster, rank: np.ndarray, rng: np.random.Generator,
                 model: FragModel) -> None:
        super().__init__(cluster, rank, rng)
        self.m = model
        self.lv = model.level(cluster.cpu)
        self.vs = np.stack([model.usable(int(cluster.tau[i]), cluster.left[i])
                            for i in range(cluster.n)])

    def after_take(self, i: int) -> None:
        c = self.c
        self.lv[i] = self.m.level(int(c.cpu[i]))
        self.vs[i] = self.m.usable(int(c.tau[i]), c.left[i])

    def choose(self, a: Ask, idx: np.ndarray) -> tuple[int, list[int]]:
        c, m = self.c, self.m
        tau = c.tau[idx]
        lv0 = self.lv[idx]
        lv1 = m.level(c.cpu[idx] - a.cpu)
        k0 = c.full[idx]
        # weighted usable GPU before, and the part of "after" that does not depend on
        # the device: N * dF = N * g - (P_before - P_after)
        rows = np.arange(len(idx))
        before = self.vs[idx, lv0] + m.whole[tau, lv0, k0]
        after_base = self.vs[idx, lv1]
        if a.num == 1:
            x = c.left[idx]  # (n, gmax)
            g = a.milli[idx][:, None]
            valid = x >= g
            xs = np.where(valid, x, 0)
            rest = np.where(valid, x - g, 0)
            t3 = tau[:, None]
            l3 = lv1[:, None]
            lost = (xs * m.cm[t3, l3, m.kidx[t3, xs + 1]]
                    - rest * m.cm[t3, l3, m.kidx[t3, rest + 1]])
            k1 = k0[:, None] - (xs == MILLI)
            after = after_base[:, None] - lost + m.whole[t3, l3, k1]
            delta = m.weight * g - (before[:, None] - after)
            score = np.where(valid, sigmoid_score(delta, m.weight), -1)
            best = score.max(axis=1)
            j = pick_node(best, self.rank[idx])
            return int(idx[j]), [int(np.argmax(score[j]))]
        if a.num > 1:
            gtot = a.milli[idx] * a.num
            lost = gtot * m.cm[tau, lv1, m.kidx[tau, MILLI + 1]]
            after = after_base - lost + m.whole[tau, lv1, k0 - a.num]
        else:
            gtot = np.zeros(len(idx), dtype=np.int64)
            after = after_base + m.whole[tau, lv1, k0]
        del rows
        delta = m.weight * gtot - (before - after)
        score = sigmoid_score(delta, m.weight)
        i = int(idx[pick_node(score, self.rank[idx])])
        return i, (c.whole_devices(i, a.num) if a.num else [])


def make_policy(name: str, cluster: Cluster, rank: np.ndarray, rng: np.random.Generator,
                model: FragModel | None) -> Policy:
    if name == "fgd":
        assert model is not None
        return FGD(cluster, rank, rng, model)
    return {"best-fit": BestFit, "dot-product": DotProduct, "random": Random}[name](
        cluster, rank, rng)
