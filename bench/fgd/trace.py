"""The openb CSVs, request modes, the arrival sequence and FGD's typical pods.

What the paper's simulator (hkust-adsl/kubernetes-scheduler-simulator) does,
and where (docs/placement.md, "The fragmentation benchmark", has the list):

* a pod's GPU request is ``gpu_milli`` per GPU for ``num_gpu`` GPUs; the CSV-to-
  YAML step caps gpu_milli at 1000 and sets no GPU annotation for num_gpu == 0
  (data/pod_csv_to_yaml.py); ``gpu_spec`` becomes the allowed models, "|"-separated,
  empty = any (pkg/utils/utils.go IsNodeAccessibleToPodByType);
* pods are sorted by name, then shuffled with the seed; creation times are not
  written to the YAML, so the order stays the shuffled one
  (pkg/simulator/simulator.go SortClusterPods, syncClusterResourceList);
* "tuning" to 1.3x the cluster's GPU capacity: below it, pods drawn uniformly
  (with replacement, from the name-sorted list) are appended until the next
  draw's *per-GPU* milli would pass the target; above it, random pods are
  removed until the total is at most the target (simulator.go tuneUpPods,
  tuneDownPods);
* typical pods: every pod (CPU-only ones too) counted by (cpu, gpu milli, gpu
  count, gpu type string), most frequent first, taken one at a time until they
  cover 95 % of the pods, then renormalized (pkg/utils/frag.go GetTypicalPods;
  scripts/generate_config_and_run.py: isInvolvedCpuPods true, threshold 95,
  step 1).
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MILLI = 1000
TUNE_RATIO = 1.3
TYPICAL_THRESHOLD_PCT = 95
MODES = ("exact", "quarter", "memory")
# memory mode (kept from the previous bench): a share asks gpu_milli x 16 GiB / 1000
# MiB and is charged per model; G2 and G3 sizes are assumptions (undisclosed types)
MEMORY_GIB = {"P100": 16, "T4": 16, "V100M16": 16, "V100M32": 32, "A10": 24, "G2": 24, "G3": 32}
REFERENCE_MIB = 16 * 1024


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class PodRow:
    """One pod as the simulator sees it (after the CSV-to-YAML step)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int  # 0 for CPU-only pods (also when gpu_milli is 0)
    gpu_milli: int  # per GPU, 1..1000; 0 for CPU-only pods
    gpu_spec: str  # allowed models joined by "|" as written; "" = any

    @property
    def total_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(t for t in self.gpu_spec.split("|") if t)

    @property
    def is_share(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI


def load_nodes(path: Path) -> list[NodeRow]:
    with open(path) as f:
        rows = [NodeRow(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]),
                        r["model"]) for r in csv.DictReader(f)]
    return [r for r in rows if r.gpus > 0]


def load_pods(path: Path) -> list[PodRow]:
    out = []
    with open(path) as f:
        for r in csv.DictReader(f):
            num, milli = int(r["num_gpu"]), int(r["gpu_milli"])
            milli = min(milli, MILLI) if num > 0 else 0
            if milli <= 0:
                num = milli = 0
            spec = "|".join(t for t in (r.get("gpu_spec") or "").split("|") if t) if num else ""
            # the simulator's ``nomem`` lists have no memory column: no memory asked
            out.append(PodRow(r["name"], int(r["cpu_milli"]), int(r.get("memory_mib") or 0),
                              num, milli, spec))
    out.sort(key=lambda p: p.name)
    return out


# -- request modes -----------------------------------------------------------------
def charge(pod: PodRow, model: str, mode: str) -> int:
    """Milli per device that ``pod`` is charged on a device of ``model``."""
    if pod.num_gpu == 0:
        return 0
    if not pod.is_share:
        return MILLI
    if mode == "exact":
        return pod.gpu_milli
    if mode == "quarter":
        return min(MILLI, -(-pod.gpu_milli // 250) * 250)
    if mode == "memory":
        mib = pod.gpu_milli * REFERENCE_MIB // MILLI
        return min(MILLI, -(-mib * MILLI // (MEMORY_GIB.get(model, 16) * 1024)))
    raise ValueError(f"unknown mode {mode!r}")


# -- the arrival sequence ----------------------------------------------------------
def arrival_sequence(pods: Sequence[PodRow], capacity_milli: int, seed: int
                     ) -> tuple[list[PodRow], np.random.Generator]:
    """Shuffled pods, tuned to 1.3x capacity; the generator continues the stream
    (the simulator draws the node-name permutation next, then the random policy)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pods))
    seq = [pods[i] for i in order]
    target = TUNE_RATIO * capacity_milli
    total = sum(p.total_milli for p in seq)
    if total < target:
        i = 0
        while True:
            p = pods[int(rng.integers(len(pods)))]
            if total + p.gpu_milli > target:  # the simulator's test: per-GPU milli
                break
            seq.append(PodRow(f"{p.name}-tuned-{i}", p.cpu_milli, p.memory_mib, p.num_gpu,
                              p.gpu_milli, p.gpu_spec))
            total += p.total_milli
            i += 1
    while total > target:
        total -= seq.pop(int(rng.integers(len(seq)))).total_milli
    return seq, rng


# -- FGD's typical pods ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Typical:
    cpu_milli: int
    gpu_milli: int  # per GPU as in the trace (0 = CPU-only)
    num_gpu: int
    gpu_spec: str
    count: int


def typical_pods(pods: Sequence[PodRow], threshold_pct: int = TYPICAL_THRESHOLD_PCT
                 ) -> list[Typical]:
    """Most frequent shapes covering ``threshold_pct`` % of the pods (counts kept:
    the weights are count / sum of the kept counts)."""
    counts = Counter((p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec) for p in pods)
    # sort.Reverse on (count, then cpu, milli, num, type ascending): all descending
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], *kv[0]), reverse=True)
    expected = float(threshold_pct) * len(pods) / 100.0
    kept: list[Typical] = []
    cum = 0
    for (cpu, milli, num, spec), n in ranked:
        if cum >= expected:
            break
        kept.append(Typical(cpu, milli, num, spec, n))
        cum += n
    return kept
