"""Organizations, teams, reservations, pools and nodes."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.orm import Session

from apportion.domain.cluster import Pool
from apportion.domain.errors import NotFound
from apportion.store.codec import typical_pods_json
from apportion.store.models import NodeRow, OrgRow, PoolRow, ReservationRow, TeamRow

_orgs, _teams = cast(Table, OrgRow.__table__), cast(Table, TeamRow.__table__)
#: Prebuilt statements for the hot path (parameters bound at execution, no rebuild).
_BUMP = (update(_orgs).where(_orgs.c.id == bindparam("oid"))
         .values(sched_version=_orgs.c.sched_version + 1))
_BUMP_TEAMS = (update(_orgs).where(_orgs.c.id == bindparam("oid"))
               .values(sched_version=_orgs.c.sched_version + 1,
                       teams_version=_orgs.c.teams_version + 1))
_BUMP_RETURNING = _BUMP.returning(_orgs.c.teams_version)
_PARENTS = select(_teams.c.slug, _teams.c.parent).where(_teams.c.org_id == bindparam("oid"))
_TEAMS_VERSION = select(_orgs.c.teams_version).where(_orgs.c.id == bindparam("oid"))


def lock_org(session: Session, org_id: int) -> None:
    """Lock the organization's row until the end of the transaction (PostgreSQL;
    SQLite's write transactions are exclusive already): no other plan commits
    for it meanwhile."""
    session.execute(select(OrgRow.id).where(OrgRow.id == org_id).with_for_update())


def get_org(session: Session, org_id: int) -> OrgRow:
    row = session.get(OrgRow, org_id)
    if row is None:
        raise NotFound("organization", str(org_id))
    return row


def add_org(
    session: Session, *, slug: str, name: str, is_system: bool, created_at: float
) -> OrgRow:
    """A new organization row, flushed (its id assigned)."""
    row = OrgRow(slug=slug, name=name, is_system=is_system, version=1, sched_version=0,
                 last_cycle=0, created_at=created_at)
    session.add(row)
    session.flush()
    return row


def update_org(row: OrgRow, *, name: str | None = None) -> None:
    """Rename the organization (``name`` None: keep it) and bump its version."""
    if name is not None:
        row.name = name
    row.version += 1


def find_org(session: Session, slug: str) -> OrgRow | None:
    return session.scalar(select(OrgRow).where(OrgRow.slug == slug))


def list_orgs(session: Session) -> list[OrgRow]:
    return list(session.scalars(select(OrgRow).order_by(OrgRow.id)))


def bump_sched_version(session: Session, org_id: int) -> None:
    """Mark the scheduling input as changed: plans from older snapshots won't commit.

    A Core statement on the session's connection: no ORM bookkeeping, no autoflush
    (this runs once per command, on the hot path of every submission)."""
    session.connection().execute(_BUMP, {"oid": org_id})


def bump_versions_for_teams(session: Session, org_id: int) -> None:
    """The team tree changed: bump the scheduling version and the teams version."""
    session.connection().execute(_BUMP_TEAMS, {"oid": org_id})


def bump_sched_version_returning_teams(session: Session, org_id: int) -> int:
    """:func:`bump_sched_version`, returning the teams version read under the
    org row's write lock (no team change can commit between it and our commit)."""
    return int(session.connection().execute(_BUMP_RETURNING, {"oid": org_id}).scalar_one())


def teams_version(session: Session, org_id: int) -> int:
    return int(session.connection().execute(_TEAMS_VERSION, {"oid": org_id}).scalar_one())


def advance_if_current(
    session: Session, org_id: int, expected: int, cycle_id: int, now: float
) -> bool:
    """Conditional update: True (and the version advanced) only if the org's
    scheduling version is still ``expected``."""
    t = _orgs
    res = session.connection().execute(
        update(t)
        .where(t.c.id == org_id, t.c.sched_version == expected)
        .values(sched_version=expected + 1, last_cycle=cycle_id, last_cycle_at=now)
    )
    return bool(res.rowcount)


# -- teams ---------------------------------------------------------------
def team_parents(session: Session, org_id: int) -> dict[str, str | None]:
    """slug -> parent slug of every team (a light query for permission checks)."""
    rows = session.connection().execute(_PARENTS, {"oid": org_id})
    return {slug: parent for slug, parent in rows}


def list_teams(session: Session, org_id: int) -> list[TeamRow]:
    return list(session.scalars(select(TeamRow).where(TeamRow.org_id == org_id)
                                .order_by(TeamRow.slug)))


def find_team(session: Session, org_id: int, slug: str) -> TeamRow | None:
    return session.scalar(select(TeamRow).where(TeamRow.org_id == org_id, TeamRow.slug == slug))


def get_team(session: Session, org_id: int, slug: str) -> TeamRow:
    row = find_team(session, org_id, slug)
    if row is None:
        raise NotFound("team", slug)
    return row


def add_team(
    session: Session, org_id: int, *, slug: str, name: str, parent: str | None,
    bursting_priority: int, burst_limit_percent: int | None, created_at: float,
) -> TeamRow:
    """A new team row (version 1), flushed."""
    row = TeamRow(
        org_id=org_id, slug=slug, name=name, parent=parent, bursting_priority=bursting_priority,
        burst_limit_percent=burst_limit_percent, version=1, created_at=created_at,
    )
    session.add(row)
    session.flush()
    return row


def update_team(
    session: Session, row: TeamRow, *, name: str, parent: str | None, bursting_priority: int,
    burst_limit_percent: int | None,
) -> None:
    """Change a team's fields and bump its version (flushed)."""
    row.name, row.parent = name, parent
    row.bursting_priority = bursting_priority
    row.burst_limit_percent = burst_limit_percent
    row.version += 1
    session.flush()


def delete_team(session: Session, row: TeamRow) -> None:
    session.delete(row)


# -- reservations --------------------------------------------------------------
def list_reservations(
    session: Session, org_id: int, team: str | None = None, pool: str | None = None
) -> list[ReservationRow]:
    q = select(ReservationRow).where(ReservationRow.org_id == org_id)
    if team is not None:
        q = q.where(ReservationRow.team == team)
    if pool is not None:
        q = q.where(ReservationRow.pool == pool)
    return list(session.scalars(q.order_by(ReservationRow.team, ReservationRow.pool)))


def find_reservation(session: Session, org_id: int, team: str, pool: str) -> ReservationRow | None:
    return session.get(ReservationRow, (org_id, team, pool))


def set_reservation(
    session: Session, org_id: int, team: str, pool: str, milli: int, now: float,
    row: ReservationRow | None,
) -> ReservationRow:
    """Set the team's reservation in the pool to ``milli`` (``row``: the current
    one, if any): a new row (version 1), or the row changed with its version
    bumped; 0 deletes it, or stores nothing where there was none. Returns the
    row as it now reads (a deleted or unstored one included)."""
    if row is None:
        row = ReservationRow(org_id=org_id, team=team, pool=pool, milli=milli, version=1,
                             updated_at=now)
        if milli:  # setting 0 where there is none stores nothing
            session.add(row)
    else:
        row.milli, row.version, row.updated_at = milli, row.version + 1, now
        if milli == 0:
            session.delete(row)
    return row


def delete_reservation(session: Session, row: ReservationRow) -> None:
    session.delete(row)


def delete_reservations_of_team(session: Session, org_id: int, team: str) -> None:
    session.execute(
        delete(ReservationRow).where(ReservationRow.org_id == org_id, ReservationRow.team == team)
    )


# -- pools and nodes --------------------------------------------------------------
def list_pools(session: Session, org_id: int) -> list[PoolRow]:
    return list(session.scalars(select(PoolRow).where(PoolRow.org_id == org_id)
                                .order_by(PoolRow.name)))


def pool_names(session: Session, org_id: int) -> list[str]:
    """The org's pool names, sorted (no node is read)."""
    q = select(PoolRow.name).where(PoolRow.org_id == org_id).order_by(PoolRow.name)
    return list(session.scalars(q))


def find_pool(session: Session, org_id: int, name: str) -> PoolRow | None:
    return session.scalar(select(PoolRow).where(PoolRow.org_id == org_id, PoolRow.name == name))


def get_pool(session: Session, org_id: int, name: str) -> PoolRow:
    row = find_pool(session, org_id, name)
    if row is None:
        raise NotFound("pool", name)
    return row


def add_pool(session: Session, org_id: int, pool: Pool, created_at: float) -> PoolRow:
    """A new pool row (version 1, its agent never seen), flushed."""
    row = PoolRow(
        org_id=org_id, name=pool.name, gpu_type=pool.gpu_type,
        gpu_memory_mib=pool.gpu_memory_mib, topology=list(pool.topology),
        start_delay=pool.start_delay, preemption_grace=pool.preemption_grace,
        starvation_hold_after=pool.starvation_hold_after, packing=pool.packing.value,
        typical_pods=typical_pods_json(pool), agent_status="never",
        default_time_limit=pool.default_time_limit, max_time_limit=pool.max_time_limit,
        version=1, created_at=created_at,
    )
    session.add(row)
    session.flush()
    return row


def update_pool(row: PoolRow, pool: Pool) -> None:
    """Store ``pool``'s settings in its row and bump the version (the name and
    the agent's fields stay)."""
    row.gpu_type, row.gpu_memory_mib = pool.gpu_type, pool.gpu_memory_mib
    row.topology = list(pool.topology)
    row.start_delay, row.preemption_grace = pool.start_delay, pool.preemption_grace
    row.starvation_hold_after = pool.starvation_hold_after
    row.packing = pool.packing.value
    row.typical_pods = typical_pods_json(pool)
    row.default_time_limit, row.max_time_limit = pool.default_time_limit, pool.max_time_limit
    row.version += 1


def delete_pool(session: Session, row: PoolRow) -> None:
    session.delete(row)


def set_agent_status(row: PoolRow, status: str, *, heartbeat_at: float | None = None) -> None:
    """The pool's agent is ``connected`` (``heartbeat_at``: its heartbeat's
    time) or ``silent`` (the last heartbeat's time stays)."""
    row.agent_status = status
    if heartbeat_at is not None:
        row.last_heartbeat_at = heartbeat_at


def add_node(
    session: Session, org_id: int, *, pool: str, name: str, gpus: int, gpu_memory_mib: int
) -> NodeRow:
    """A new node row of ``pool``, added to the transaction (not flushed), at
    version 0: the inventory stored next (:func:`update_node`) makes it 1."""
    row = NodeRow(org_id=org_id, pool=pool, name=name, gpus=gpus,
                  gpu_memory_mib=gpu_memory_mib, version=0, cordoned=False)
    session.add(row)
    return row


def update_node(
    row: NodeRow, *, gpus: int, gpu_type: str | None, gpu_memory_mib: int,
    labels: dict[str, str], health: str, unavailable: list[list[int]],
    cpu_milli: int | None, memory_mib: int | None,
) -> None:
    """Store a node's inventory as its agent reports it and bump its version."""
    row.gpus, row.gpu_type, row.gpu_memory_mib = gpus, gpu_type, gpu_memory_mib
    row.labels, row.health, row.unavailable = labels, health, unavailable
    row.cpu_milli, row.memory_mib = cpu_milli, memory_mib
    row.version = (row.version or 0) + 1


def set_node_health(row: NodeRow, health: str) -> None:
    """Set a node's health (``down``, ``unknown``, ``ready``) and bump its version."""
    row.health, row.version = health, row.version + 1


def node_seen(row: NodeRow, at: float) -> None:
    """The node's agent reported it at ``at``."""
    row.last_seen_at = at


def set_cordoned(row: NodeRow, cordoned: bool) -> None:
    """Cordon or uncordon a node and bump its version."""
    row.cordoned = cordoned
    row.version += 1


def list_nodes(
    session: Session, org_id: int, pool: str | None = None
) -> list[NodeRow]:
    q = select(NodeRow).where(NodeRow.org_id == org_id)
    if pool is not None:
        q = q.where(NodeRow.pool == pool)
    return list(session.scalars(q.order_by(NodeRow.name)))


def find_node(session: Session, org_id: int, name: str) -> NodeRow | None:
    return session.scalar(select(NodeRow).where(NodeRow.org_id == org_id, NodeRow.name == name))


def get_node(session: Session, org_id: int, name: str) -> NodeRow:
    row = find_node(session, org_id, name)
    if row is None:
        raise NotFound("node", name)
    return row


def node_health(
    session: Session, org_id: int
) -> list[tuple[str, int, str, bool, list[list[int]]]]:
    """(pool, gpus, health, cordoned, unavailable) of every node, as plain columns."""
    t = NodeRow
    q = select(t.pool, t.gpus, t.health, t.cordoned, t.unavailable).where(t.org_id == org_id)
    return [(pool, gpus, health, cordoned, unavailable)
            for pool, gpus, health, cordoned, unavailable in session.execute(q)]


def node_map_columns(
    session: Session, org_id: int, pool: str
) -> list[tuple[str, int, dict[str, str], str, bool, list[list[int]], int | None, int | None]]:
    """(name, gpus, labels, health, cordoned, unavailable, cpu_milli, memory_mib)
    of the nodes of ``pool``, by name, as plain columns."""
    t = NodeRow
    q = (select(t.name, t.gpus, t.labels, t.health, t.cordoned, t.unavailable, t.cpu_milli,
                t.memory_mib).where(t.org_id == org_id, t.pool == pool).order_by(t.name))
    return [(name, gpus, labels, health, cordoned, unavailable, cpu, memory)
            for name, gpus, labels, health, cordoned, unavailable, cpu, memory
            in session.execute(q)]
