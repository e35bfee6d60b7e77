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

The published variants differ in their columns, and all are read:
``memory_mib`` absent (the simulator's ``nomem`` lists) means no memory
request; ``gpu_spec`` or ``qos`` absent means any GPU type and the org's
default class. The ``multigpu`` lists have no times at all: they are the
FGD paper's experiment, pods arriving in row order into a cluster they never
leave. Such a list is replayed as one deep queue: every pod is submitted at
time 0, in row order (so its id, the SPEC's last tie-break, is its row
order), and runs to the end of the replay, which lasts one second; the
report then says how each policy filled the cluster from that queue and
whose work it placed. A list with some time columns but not all is refused.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

from apportion.domain.errors import ValidationError
from apportion.replay.trace import UNTIL_END, Trace, TraceJob, TraceNode

NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
#: Every pod list has these; the others are optional (see the module's text).
POD_COLUMNS = ("name", "cpu_milli", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")
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
    nodes = parse_nodes(_rows(folder / NODE_FILE, NODE_COLUMNS)[1])
    header, rows = _rows(pods, POD_COLUMNS)
    timed = [c for c in TIME_COLUMNS if c in header]
    if timed and len(timed) < len(TIME_COLUMNS):
        missing = ", ".join(c for c in TIME_COLUMNS if c not in header)
        raise ValidationError(pods.name, f"missing column(s) {missing}",
                              f"all of {', '.join(TIME_COLUMNS)}, or none (arrival order)")
    return parse_pods(rows, nodes, source=str(pods), timed=bool(timed))


def _rows(path: Path, columns: tuple[str, ...]) -> tuple[tuple[str, ...], list[dict[str, str]]]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            header = tuple(reader.fieldnames or ())
            missing = [c for c in columns if c not in header]
            if missing:
                raise ValidationError(path.name, f"missing column(s) {', '.join(missing)}",
                                      ", ".join(columns))
            return header, list(reader)
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
    rows: Iterable[Mapping[str, str]], nodes: tuple[TraceNode, ...], source: str = POD_FILE,
    *, timed: bool = True,
) -> Trace:
    """The pods of a list; ``timed`` False: a list without times (all
    submitted at 0 in row order, running to the end)."""
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
        if not timed:
            created, duration = 0, UNTIL_END
        elif not (row.get("scheduled_time") or "").strip():
            never += 1
            continue
        else:
            created = _int(row, "creation_time", where)
            scheduled = _int(row, "scheduled_time", where)
            deleted = _int(row, "deletion_time", where)
            duration = max(1, deleted - max(created, scheduled))
        if num_gpu == 1:
            asked = _int(row, "gpu_milli", where, low=1)
            milli = min(1000, -(-asked // QUARTER) * QUARTER)
            if milli != asked:
                rounded += 1
                over_milli_seconds += (milli - asked) * (duration if timed else 1)
        else:
            milli = num_gpu * 1000
        types = tuple(t for t in (row.get("gpu_spec") or "").split("|") if t)
        jobs.append(TraceJob(
            name=row["name"], submit=created, duration=duration, gpu_milli=milli,
            cpu_milli=_int(row, "cpu_milli", where),
            memory_mib=_int(row, "memory_mib", where) if "memory_mib" in row else 0,
            gpu_types=types, qos=row.get("qos") or None,
        ))
    jobs.sort(key=lambda j: j.submit)  # stable: row order within a time
    if timed:
        span = max((j.submit + j.duration for j in jobs), default=0) - min(
            (j.submit for j in jobs), default=0)
        over_gpus = over_milli_seconds / 1000 / span if span else 0.0
        over = f"on average {over_gpus:.2f} GPUs over-reserved over the trace's span"
        times = f"{never} pods never scheduled in the real cluster left out"
    else:
        over = f"{over_milli_seconds / 1000:.2f} GPUs over-reserved if all were placed"
        times = ("no times in this pod list: every pod is submitted at 0 in row order and "
                 "never ends (the FGD paper's experiment: the cluster filled from the list)")
    notes = (
        f"{no_gpu} pods without GPUs left out",
        times,
        f"{rounded} fractional requests rounded up to a quarter GPU ({over})",
    )
    counts = {"rows": total, "no_gpu": no_gpu,
              "never_scheduled": never, "rounded": rounded,
              "over_reserved_milli_seconds": over_milli_seconds}
    return Trace(source=source, jobs=tuple(jobs), nodes=nodes, notes=notes, counts=counts)
