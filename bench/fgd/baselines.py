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
NO_FIT = np.iinfo(np.int64).min


@dataclass(frozen=True, slots=True)
class Ask:
    """One pod's request, per node of the cluster (charges differ per model in
    the memory mode)."""

    num: int  # GPUs (0 = CPU only); > 1 means whole devices
    milli: np.ndarray  # charge per device on each node (int64[N]); 0 for CPU-only
    type_ok: np.ndarray  # bool[N]
    cpu: int
    mem: int
    key: tuple[int, ...]  # what the score depends on: (num, cpu, charge per model...)


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
        self._asks: dict[tuple[object, ...], Ask] = {}

    def ask(self, pod: PodRow, mode: str) -> Ask:
        key = (pod.num_gpu, pod.gpu_milli, pod.cpu_milli, pod.memory_mib, pod.gpu_spec, mode)
        got = self._asks.get(key)
        if got is None:
            got = self._asks[key] = self._ask(pod, mode)
        return got

    def _ask(self, pod: PodRow, mode: str) -> Ask:
        by_model = np.array([charge(pod, m, mode) for m in self.models], dtype=np.int64)
        allowed = pod.allowed
        ok = np.array([not allowed or m in allowed for m in self.models])
        return Ask(pod.num_gpu, by_model[self.tau], ok[self.tau], pod.cpu_milli, pod.memory_mib,
                   (pod.num_gpu, pod.cpu_milli, *by_model.tolist()))

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
        if a.num != 1 or a.milli[i] >= MILLI:  # whole devices (or none): the first free
            return i, self.c.whole_devices(i, a.num)
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
    # (no fitting device is marked with the smallest int64: exp saturates to a 0 score)
    return np.trunc(1.0 / (1.0 + np.exp(np.minimum(-x, 700.0))) * 100.0).astype(np.int64)


class FGD(Policy):
    name = "fgd"

    def __init__(self, cluster: Cluster, rank: np.ndarray, rng: np.random.Generator,
                 model: FragModel) -> None:
        super().__init__(cluster, rank, rng)
        self.m = model
        levels, width = model.cm.shape[1], model.cm.shape[2]
        self.cm_flat = model.cm.reshape(-1)
        self.whole_flat = model.whole.reshape(-1)
        self.kidx_flat = model.kidx.reshape(-1)
        self.row_cm = cluster.tau * levels  # + level, then * width + K
        self.width = width
        self.wwidth = model.whole.shape[2]
        self.koff = cluster.tau * model.kidx.shape[1] + 1  # + free milli
        self.lv = model.level(cluster.cpu)
        self.vs = np.stack([model.usable(int(cluster.tau[i]), cluster.left[i])
                            for i in range(cluster.n)])
        self.before = np.zeros(cluster.n, dtype=np.int64)
        self.version = np.zeros(cluster.n, dtype=np.int64)
        self.tick = 0
        self.cache: dict[tuple[int, ...], tuple[np.ndarray, int]] = {}
        for i in range(cluster.n):
            self.after_take(i)

    def after_take(self, i: int) -> None:
        c, m = self.c, self.m
        tau = int(c.tau[i])
        lv = int(m.level(int(c.cpu[i])))
        self.lv[i] = lv
        self.vs[i] = m.usable(tau, c.left[i])
        self.before[i] = self.vs[i, lv] + m.whole[tau, lv, c.full[i]]
        self.tick += 1
        self.version[i] = self.tick

    def choose(self, a: Ask, idx: np.ndarray) -> tuple[int, list[int]]:
        # Scores only change on nodes that changed: keep, per request shape, every
        # node's score and refresh the nodes changed since.
        got = self.cache.get(a.key)
        if got is None:
            best = np.empty(self.c.n, dtype=np.int64)
            stale = np.arange(self.c.n)
        else:
            best, seen = got
            stale = np.flatnonzero(self.version > seen)
        if len(stale):
            best[stale] = sigmoid_score(self.deltas(a, stale)[0], self.m.weight)
        self.cache[a.key] = (best, self.tick)
        j = pick_node(best[idx], self.rank[idx])
        i = int(idx[j])
        if a.num == 1:
            delta, devices = self.deltas(a, np.array([i]))[1:]
            score = sigmoid_score(delta, self.m.weight)
            return i, [int(devices[int(np.argmax(score))])]
        return i, (self.c.whole_devices(i, a.num) if a.num else [])

    def deltas(self, a: Ask, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """N * dF of each node in ``idx`` (its best device for a 1-GPU pod); for a
        1-GPU pod also every fitting device's value and index, in index order."""
        c, m = self.c, self.m
        lv1 = m.level(c.cpu[idx] - a.cpu)
        k0 = c.full[idx]
        cm_row = (self.row_cm[idx] + lv1) * self.width
        whole_row = (self.row_cm[idx] + lv1) * self.wwidth
        # N * dF = N * g - (P_before - P_after); P_after = vs[lv1] - lost + whole[lv1, k']
        base = self.vs[idx, lv1] - self.before[idx]
        if a.num == 1:
            x = c.left[idx]  # (n, gmax)
            g = a.milli[idx]
            r, d = np.nonzero(x >= g[:, None])
            xs = x[r, d]
            rest = xs - g[r]
            ko = self.koff[idx][r]
            cr = cm_row[r]
            lost = (xs * self.cm_flat[cr + self.kidx_flat[ko + xs]]
                    - rest * self.cm_flat[cr + self.kidx_flat[ko + rest]])
            k1 = k0[r] - (xs == MILLI)
            delta = m.weight * g[r] + base[r] - lost + self.whole_flat[whole_row[r] + k1]
            # a node's best device has its highest dF (the score is monotone in it)
            best = np.full(len(idx), NO_FIT, dtype=np.int64)
            np.maximum.at(best, r, delta)
            return best, delta, d
        if a.num > 1:
            gtot = a.milli[idx] * a.num
            lost = gtot * self.cm_flat[cm_row + self.kidx_flat[self.koff[idx] + MILLI]]
            after_whole = self.whole_flat[whole_row + np.maximum(k0 - a.num, 0)]
        else:
            gtot = np.zeros(len(idx), dtype=np.int64)
            lost = np.zeros(len(idx), dtype=np.int64)
            after_whole = self.whole_flat[whole_row + k0]
        delta = m.weight * gtot + base - lost + after_whole
        return delta, delta, np.zeros(0, dtype=np.int64)


class FGDGpuOnly(FGD):
    """FGD for GPU pods, the best-fit baseline for CPU-only pods: how apportion's
    policies are run (the engine has no request without GPUs). A diagnostic, not
    one of the simulator's policies."""

    name = "fgd-gpu-only"

    def choose(self, a: Ask, idx: np.ndarray) -> tuple[int, list[int]]:
        if a.num == 0:
            return BestFit.choose(self, a, idx)
        return super().choose(a, idx)


def make_policy(name: str, cluster: Cluster, rank: np.ndarray, rng: np.random.Generator,
                model: FragModel | None) -> Policy:
    if name in ("fgd", "fgd-gpu-only"):
        assert model is not None
        return (FGD if name == "fgd" else FGDGpuOnly)(cluster, rank, rng, model)
    return {"best-fit": BestFit, "dot-product": DotProduct, "random": Random}[name](
        cluster, rank, rng)
