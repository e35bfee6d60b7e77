"""One replay: a policy places the arrival sequence; the reading is the simulator's.

The simulator logs, after every pod (placed, failed or CPU-only), the GPU milli
arrived so far (failed pods included) and the milli allocated
(pkg/simulator/analysis.go ClusterGpuFragReport); the artifact's merge script
buckets the events by arrived share rounded to a whole percent and averages the
allocated share in each bucket (experiments/analysis/merge_alloc_discrete.py).
``curve`` reproduces that; "unallocated at 100 %" is 100 minus the bucket 100.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from fgd.trace import NodeRow, PodRow

CURVE_POINTS = tuple(range(50, 131, 5))

#: place(pod) -> (node index, devices, milli per device) or None
Placer = Callable[[PodRow], "tuple[int, list[int], int] | None"]


@dataclass(slots=True)
class Outcome:
    curve: dict[int, float]  # arrived % -> unallocated % of GPU capacity
    placed: int
    failed: int
    allocated_milli: int
    overreserved_milli: int  # charged beyond the trace's request (quarter, memory)


def bucket_curve(arrived: np.ndarray, allocated: np.ndarray, capacity: int,
                 points: Sequence[int] = CURVE_POINTS) -> dict[int, float]:
    pct = np.round(arrived * 100.0 / capacity)  # half to even, like pandas' round
    alloc = allocated * 100.0 / capacity
    out: dict[int, float] = {}
    for p in points:
        sel = pct == p
        if not sel.any():
            sel = (pct >= p - 1) & (pct <= p + 1)
        if sel.any():
            out[p] = round(100.0 - float(alloc[sel].mean()), 3)
    return out


def run(place: Placer, seq: Sequence[PodRow], nodes: Sequence[NodeRow], capacity: int,
        dump: IO[str] | None = None) -> Outcome:
    arrived = np.zeros(len(seq), dtype=np.int64)
    allocated = np.zeros(len(seq), dtype=np.int64)
    arr = alloc = placed = failed = over = 0
    for e, pod in enumerate(seq):
        arr += pod.total_milli
        got = place(pod)
        if got is None:
            failed += 1
        else:
            placed += 1
            i, devices, milli = got
            alloc += milli * len(devices)
            over += milli * len(devices) - pod.total_milli
            if dump is not None:
                dump.write(json.dumps({
                    "pod": pod.name, "node": nodes[i].name,
                    "devices": [[d, milli] for d in devices],
                    "cpu_milli": pod.cpu_milli, "memory_mib": pod.memory_mib}) + "\n")
        arrived[e] = arr
        allocated[e] = alloc
    return Outcome(bucket_curve(arrived, allocated, capacity), placed, failed, alloc, over)


def dump_path(root: Path, trace: str, mode: str, policy: str, seed: int) -> Path:
    return root / f"{trace}.{mode}.{policy}.{seed}.jsonl"
