"""Node inventories from configuration, from a rack shape, or from ``nvidia-smi``.

Configuration (YAML or JSON), the same node syntax as scenario files::

    gpu_type: h100            # defaults for every node
    gpu_memory_mib: 81920
    nodes:
      - {name: a1, gpus: 8, cpu: 96, memory_mib: 786432, labels: {rack: r1}}
      - {prefix: b, count: 4, gpus: 8, labels: {rack: r2}}   # b1..b4

``cpu`` (cores) and ``memory_mib`` are the node's allocatable host resources;
absent = not limited.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from apportion.agent.model import NodeInfo
from apportion.domain.errors import ValidationError
from apportion.domain.host import parse_cpu, parse_memory_mib

DEFAULT_MEMORY = 81920


def load_config(path: str | Path | None) -> dict[str, Any]:
    """The executor configuration file as a mapping ({} without a file)."""
    if path is None:
        return {}
    raw = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return raw


def nodes_from_config(config: Mapping[str, Any]) -> list[NodeInfo]:
    """``config['nodes']`` expanded (``prefix`` + ``count`` → prefix1..prefixN)."""
    gpu_type = config.get("gpu_type")
    memory = int(config.get("gpu_memory_mib") or DEFAULT_MEMORY)
    out: list[NodeInfo] = []
    for i, entry in enumerate(config.get("nodes") or []):
        if not isinstance(entry, Mapping):
            raise ValueError(f"nodes[{i}]: expected a mapping")
        if "prefix" in entry:
            names = [f"{entry['prefix']}{k}" for k in range(1, int(entry.get("count", 1)) + 1)]
        elif "name" in entry:
            names = [str(entry["name"])]
        else:
            raise ValueError(f"nodes[{i}]: needs name, or prefix and count")
        gpus = int(entry.get("gpus", 0))
        if gpus < 0:
            raise ValueError(f"nodes[{i}].gpus: must be ≥ 0")
        labels = {str(k): str(v) for k, v in (entry.get("labels") or {}).items()}
        cpu, host_memory = entry.get("cpu"), entry.get("memory_mib")
        try:
            cpu_milli = None if cpu is None else parse_cpu(cpu, f"nodes[{i}].cpu")
            memory_mib = None if host_memory is None else parse_memory_mib(
                host_memory, f"nodes[{i}].memory_mib")
        except ValidationError as err:
            raise ValueError(str(err)) from None
        for name in names:
            out.append(NodeInfo(
                name=name, gpus=gpus, gpu_type=entry.get("gpu_type", gpu_type),
                gpu_memory_mib=int(entry.get("gpu_memory_mib", memory)), labels=labels,
                cpu_milli=cpu_milli, memory_mib=memory_mib,
            ))
    return out


def host_resources(meminfo: Path = Path("/proc/meminfo")) -> tuple[int | None, int | None]:
    """This machine's (milli-CPU, MiB): the CPUs this process may use and the
    total memory (``MemTotal``); None for what cannot be read."""
    try:
        cpus: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    memory = None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) // 1024  # kB -> MiB
                break
    except (OSError, ValueError, IndexError):
        memory = None
    return (None if cpus is None else cpus * 1000), memory


def parse_shape(shape: str) -> tuple[int, int, int]:
    """``"4x4x8"`` → (racks, nodes per rack, GPUs per node)."""
    parts = shape.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"shape {shape!r}: expected RACKSxNODESxGPUS, e.g. 4x4x8")
    racks, per_rack, gpus = (int(p) for p in parts)
    return racks, per_rack, gpus


def rack_nodes(racks: int, per_rack: int, gpus: int, *, gpu_type: str | None = "h100",
               gpu_memory_mib: int = DEFAULT_MEMORY, zones: int = 2) -> list[NodeInfo]:
    """A demo pool: nodes ``r1n1``.. with ``rack`` and ``zone`` labels."""
    return [
        NodeInfo(name=f"r{r}n{n}", gpus=gpus, gpu_type=gpu_type, gpu_memory_mib=gpu_memory_mib,
                 labels={"zone": f"z{(r - 1) % max(1, zones) + 1}", "rack": f"r{r}"})
        for r in range(1, racks + 1) for n in range(1, per_rack + 1)
    ]


def nvidia_smi_gpus(timeout: float = 10.0) -> list[tuple[int, str, int]] | None:
    """``(index, name, memory MiB)`` of every GPU, or None when nvidia-smi is absent
    or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_nvidia_smi(out)


def parse_nvidia_smi(out: str) -> list[tuple[int, str, int]]:
    """``(index, name, memory MiB)`` from ``nvidia-smi --query-gpu=index,name,memory.total
    --format=csv,noheader,nounits`` output; other lines are skipped and a memory that is
    not a number (``[N/A]``) is 0."""
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            memory = int(float(parts[2])) if parts[2].replace(".", "").isdigit() else 0
            gpus.append((int(parts[0]), parts[1], memory))
    return gpus
