"""Loading the engine's frozen Snapshot of one organization."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from apportion.engine.snapshot import Snapshot
from apportion.service.loading import load_tree
from apportion.store import codec
from apportion.store.models import WorkloadRow
from apportion.store.repos import orgs as repo
from apportion.store.repos import workloads as wl_repo


@dataclass(frozen=True, slots=True)
class Loaded:
    """A snapshot, the next cycle id, and the rows it was read from."""

    snapshot: Snapshot
    cycle_id: int
    submitted_at: dict[int, float]
    org_slug: str = ""


def load_snapshot(session: Session, org_id: int, now: float) -> Loaded:
    """Teams, reservations, pools, nodes, non-terminal workloads and the victims
    still exiting, at scheduling version ``sched_version``."""
    org = repo.get_org(session, org_id)
    tree = load_tree(session, org_id)
    pools = {p.name: codec.pool_from_row(p) for p in repo.list_pools(session, org_id)}
    nodes = tuple(codec.node_from_row(n) for n in repo.list_nodes(session, org_id))
    rows: list[WorkloadRow] = wl_repo.active_workloads(session, org_id)
    states = tuple(codec.state_from_row(r) for r in rows)
    exiting = tuple(
        codec.exiting_from_row(e) for e in wl_repo.list_exiting(session, org_id)
        if e.exits_at > now
    )
    snap = Snapshot(
        now=int(now), tree=tree, pools=pools, nodes=nodes, workloads=states,
        exiting=exiting, version=org.sched_version,
    )
    return Loaded(snap, org.last_cycle + 1, {r.id: r.submitted_at for r in rows}, org.slug)
