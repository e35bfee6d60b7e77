"""Importer of the Alibaba GPU cluster trace 2023 ("openb", Weng et al.,
USENIX ATC '23): a folder with ``openb_node_list_gpu_node.csv`` and a pod
list (``openb_pod_list_default.csv`` unless another is named).

Each pod is one job of one pod: submitted at ``creation_time``, running for
``deletion_time - scheduled_time`` seconds (the time it held its GPUs in the
real cluster). Left out, and counted: pods without GPUs (``num_gpu`` 0: the
replay schedules GPUs) and pods never scheduled in the real cluster (empty
``scheduled_time``: they have no run time). A fractional request
(``num_gpu`` 1, ``gpu_milli`` < 1000) is rounded up to the next quarter GPU,
as apportion's requests are (SPEC 1); the GPUs this over-reserves, weighted by
run time, are counted. ``gpu_spec`` (allowed GPU types) becomes the job's
type list; nodes keep their ``model`` as GPU type.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

from apportion.domain.errors import ValidationError
from apportion.replay.trace import Trace, TraceJob, TraceNode

NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
QUARTER = 250


def is_alibaba(path: str) -> bool:
    """A folder holding the node list, or a pod list file next to one."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    return (folder / NODE_FILE).is_file() and (p.is_dir() or (p.suffix == ".csv"
                                              and p.name.startswith("openb_pod_list")))


def load_alibaba(path: str) -> Trace:
    """Read the folder (or one of its pod lists) at ``path``."""
    p = Path(path)
    folder, pods = (p, p / POD_FILE) if p.is_dir() else (p.parent, p)
    nodes = parse_nodes(_rows(folder / NODE_FILE, NODE_COLUMNS))
    return parse_pods(_rows(pods, POD_COLUMNS), nodes, source=str(pods))


def _rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in columns if c not in (reader.fieldnames or ())]
            if missing:
                raise ValidationError(path.name, f"missing column(s) {', '.join(missing)}",
                                      ", ".join(columns))
            return list(reader)
    except OSError as err:
        raise ValidationError(str(path), f"cannot read the file: {err.strerror or err}") from None


def _int(row: Mapping[str, str], key: str, where: str, *, low: int = 0) -> int:
    raw = (row.get(key) or "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(f"{where}.{key}", f"{raw!r} is not a whole number") from None
    if value < low:
        raise ValidationError(f"{where}.{key}", f"must be >= {low}, got {value}")
    return value


def parse_nodes(rows: Iterable[Mapping[str, str]]) -> tuple[TraceNode, ...]:
    nodes = []
    for i, row in enumerate(rows):
        where = f"{NODE_FILE}[row {i + 2}]"
        nodes.append(TraceNode(
            name=row["sn"], gpus=_int(row, "gpu", where), gpu_type=row["model"] or None,
            cpu_milli=_int(row, "cpu_milli", where), memory_mib=_int(row, "memory_mib", where),
        ))
    return tuple(nodes)


def parse_pods(
    rows: Iterable[Mapping[str, str]], nodes: tuple[TraceNode, ...], source: str = POD_FILE
) -> Trace:
    jobs: list[TraceJob] = []
    no_gpu = never = 0
    rounded = 0
    over_milli_seconds = 0
    total = 0
    for i, row in enumerate(rows):
        total += 1
        where = f"{Path(source).name}[row {i + 2}]"
        num_gpu = _int(row, "num_gpu", where)
        if num_gpu == 0:
            no_gpu += 1
            continue
        if not (row.get("scheduled_time") or "").strip():
            never += 1
            continue
        created = _int(row, "creation_time", where)
        scheduled = _int(row, "scheduled_time", where)
        deleted = _int(row, "deletion_time", where)
        duration = max(1, deleted - max(created, scheduled))
        if num_gpu == 1:
            asked = _int(row, "gpu_milli", where, low=1)
            milli = min(1000, -(-asked // QUARTER) * QUARTER)
            if milli != asked:
                rounded += 1
                over_milli_seconds += (milli - asked) * duration
        else:
            milli = num_gpu * 1000
        types = tuple(t for t in (row.get("gpu_spec") or "").split("|") if t)
        jobs.append(TraceJob(
            name=row["name"], submit=created, duration=duration, gpu_milli=milli,
            cpu_milli=_int(row, "cpu_milli", where), memory_mib=_int(row, "memory_mib", where),
            gpu_types=types, qos=row["qos"] or None,
        ))
    jobs.sort(key=lambda j: j.submit)  # stable: row order within a time
    span = max((j.submit + j.duration for j in jobs), default=0) - min(
        (j.submit for j in jobs), default=0)
    over_gpus = over_milli_seconds / 1000 / span if span else 0.0
    notes = (
        f"{no_gpu} pods without GPUs left out",
        f"{never} pods never scheduled in the real cluster left out",
        f"{rounded} fractional requests rounded up to a quarter GPU "
        f"(on average {over_gpus:.2f} GPUs over-reserved over the trace's span)",
    )
    counts = {"rows": total, "no_gpu": no_gpu,
              "never_scheduled": never, "rounded": rounded,
              "over_reserved_milli_seconds": over_milli_seconds}
    return Trace(source=source, jobs=tuple(jobs), nodes=nodes, notes=notes, counts=counts)
