"""Loading the engine's frozen Snapshot of one organization."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from apportion.domain.lifecycle import Exiting, Status, WorkloadState
from apportion.engine.gating import Stop, gate
from apportion.engine.snapshot import Snapshot
from apportion.service import devices
from apportion.service.devices import IDENTITY, DeviceMap
from apportion.service.loading import load_tree
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import orgs as repo
from apportion.store.repos import workloads as wl_repo


@dataclass(frozen=True, slots=True)
class Loaded:
    """A snapshot, the next cycle id, and the rows it was read from."""

    snapshot: Snapshot
    cycle_id: int
    submitted_at: dict[int, float]
    org_slug: str = ""
    #: engine device numbering <-> physical (devices used by unmanaged pods hidden)
    devices: DeviceMap = IDENTITY
    #: job control's own changes before the engine (engine/gating.py): the new
    #: states by id, the states they replace, and the runs to stop
    gated: dict[int, WorkloadState] = field(default_factory=dict)
    ungated: dict[int, WorkloadState] = field(default_factory=dict)
    stops: tuple[Stop, ...] = ()


class StateCache:
    """Workload states by id, valid while the row's ``version`` is unchanged.

    Every change of a workload row bumps its version (``codec.state_to_row``),
    so a cached state is exactly what decoding the row again would give; a
    snapshot then decodes only the rows that changed since the last one.
    """

    def __init__(self) -> None:
        self._states: dict[int, tuple[int, WorkloadState, float]] = {}

    def active(self, session: Session, org_id: int) -> list[tuple[WorkloadState, float]]:
        """(state, submitted_at) of every non-terminal workload, in id order."""
        current = wl_repo.active_versions(session, org_id)
        stale = [wid for wid, version in current
                 if (hit := self._states.get(wid)) is None or hit[0] != version]
        for start in range(0, len(stale), 500):
            for row in wl_repo.workloads_by_ids(session, org_id, stale[start:start + 500]):
                self._states[row.id] = (row.version, codec.state_from_row(row), row.submitted_at)
        out = []
        for wid, version in current:
            hit = self._states.get(wid)
            if hit is None or hit[0] != version:  # changed while we read: decode it now
                row = wl_repo.get_workload(session, org_id, wid)
                hit = (row.version, codec.state_from_row(row), row.submitted_at)
                self._states[wid] = hit
            out.append((hit[1], hit[2]))
        if len(self._states) > 2 * len(current) + 1000:
            keep = {wid for wid, _v in current}
            self._states = {k: v for k, v in self._states.items() if k in keep}
        return out


def _with_hosts(session: Session, org_id: int, exiting: tuple[Exiting, ...],
                active: dict[int, WorkloadState]) -> tuple[Exiting, ...]:
    """Each exiting entry with its pods' CPU and memory (they are held until the
    pods have exited, SPEC 5): from the workload's spec, a requeued one's live
    state or, for a victim that ended Preempted, its stored spec."""
    stored = wl_repo.specs_of(session, org_id, [e.workload_id for e in exiting
                                                if e.workload_id not in active])
    out = []
    for e in exiting:
        live = active.get(e.workload_id)
        if live is not None:
            cpu, mem = live.spec.cpu_milli, live.spec.memory_mib
        elif e.workload_id in stored:
            spec = codec.spec_from_dict(stored[e.workload_id])
            cpu, mem = spec.cpu_milli, spec.memory_mib
        else:
            cpu, mem = 0, 0
        out.append(replace(e, cpu_milli=cpu, memory_mib=mem) if cpu or mem else e)
    return tuple(out)


def load_snapshot(
    session: Session, org_id: int, now: float, cache: StateCache | None = None
) -> Loaded:
    """Teams, reservations, pools, nodes, non-terminal workloads and the victims
    still exiting, at scheduling version ``sched_version``."""
    org = repo.get_org(session, org_id)
    tree = load_tree(session, org_id)
    pools = {p.name: codec.pool_from_row(p) for p in repo.list_pools(session, org_id)}
    node_rows = repo.list_nodes(session, org_id)
    active = (cache or StateCache()).active(session, org_id)
    exiting = _with_hosts(session, org_id, tuple(
        codec.exiting_from_row(e) for e in wl_repo.list_exiting(session, org_id)
        if e.exits_at > now
    ), {state.id: state for state, _at in active})
    devmap = devices.build(node_rows, (s for s, _at in active), exiting)
    nodes = tuple(devices.engine_node(codec.node_from_row(n), devmap) for n in node_rows)
    states = tuple(devmap.state(state, physical=False) for state, _at in active)
    exiting = tuple(devmap.exiting(e, physical=False) for e in exiting)
    snap = Snapshot(
        now=int(now), tree=tree, pools=pools, nodes=nodes, workloads=states,
        exiting=exiting, version=org.sched_version,
    )
    submitted = {state.id: at for state, at in active}
    gated = gate(snap, _outside_statuses(session, org_id, states))
    if gated.is_identity and gated.snapshot is snap:
        return Loaded(snap, org.last_cycle + 1, submitted, org.slug, devmap)
    ungated = {w.id: w for w in states if w.id in gated.changed}
    return Loaded(gated.snapshot, org.last_cycle + 1, submitted, org.slug, devmap,
                  gated.changed, ungated, gated.stops)


def _outside_statuses(session: Session, org_id: int, states: tuple[WorkloadState, ...]
                      ) -> dict[int, Status]:
    """The statuses of the dependencies of waiting work that are not active."""
    active = {w.id for w in states}
    wanted = {d.workload_id for w in states if w.status.is_waiting for d in w.spec.after
              if d.workload_id not in active}
    if not wanted:
        return {}
    return {i: Status(s) for i, s in wl_repo.statuses_of(session, org_id, sorted(wanted)).items()}
