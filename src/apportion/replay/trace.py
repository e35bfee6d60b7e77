"""What every importer yields: jobs with submission times and run times, and
(for traces that have one) the cluster the trace ran on."""

from __future__ import annotations

from dataclasses import dataclass, field

from apportion.domain.errors import ValidationError

#: The duration of a job that runs to the end of the replay (a scenario
#: workload without ``duration``, a pod of a list without times).
UNTIL_END = 10**9


@dataclass(frozen=True, slots=True)
class TraceNode:
    """A GPU node: ``gpus`` devices of ``gpu_type``; ``cpu_milli`` and
    ``memory_mib`` are what pods may be given (None: not limited)."""

    name: str
    gpus: int
    gpu_type: str | None = None
    cpu_milli: int | None = None
    memory_mib: int | None = None


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One row of a trace, before the org maps it.

    ``gpu_milli`` is per pod (250, 500, 750 or a multiple of 1000, already on
    the quarter grid); ``qos`` is the trace's own class label, which the org
    maps (Alibaba's LS, BE, Burstable, Guaranteed); ``team``, ``wclass`` and
    ``priority`` are set when the trace itself gives them (CSV, scenario).
    """

    name: str
    submit: int
    duration: int
    gpu_milli: int
    pods: int = 1
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_types: tuple[str, ...] = ()
    qos: str | None = None
    team: str | None = None
    wclass: str | None = None
    priority: int | None = None
    min_pods: int | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    """Jobs in submission order (time, then row order) and the trace's nodes
    (empty when the trace has none). ``notes`` say what the importer changed
    or left out, for the report; ``counts`` hold the same as numbers."""

    source: str
    jobs: tuple[TraceJob, ...]
    nodes: tuple[TraceNode, ...] = ()
    notes: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def end(self) -> int:
        """The last submission time (0 for an empty trace)."""
        return max((j.submit for j in self.jobs), default=0)


def parse_duration(text: str, field_name: str) -> int:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d`` -> seconds (> 0)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    raw = text.strip().lower()
    scale = 1
    if raw and raw[-1] in units:
        scale = units[raw[-1]]
        raw = raw[:-1]
    if not raw.isdigit() or int(raw) <= 0:
        raise ValidationError(field_name, f"{text!r} is not a duration",
                              "a positive whole number with s, m, h, d or w, e.g. 7d")
    return int(raw) * scale
