"""Loading domain objects from the store inside a transaction."""

from __future__ import annotations

from sqlalchemy.orm import Session

from apportion.domain.cluster import Node, pool_capacity
from apportion.domain.org import OrgTree, build_tree
from apportion.service.authz import Parents
from apportion.store import codec
from apportion.store.models import NodeRow, TeamRow
from apportion.store.repos import orgs as org_repo


def load_tree(session: Session, org_id: int) -> OrgTree:
    teams = [codec.team_from_row(r) for r in org_repo.list_teams(session, org_id)]
    res = {(r.team, r.pool): r.milli for r in org_repo.list_reservations(session, org_id)}
    return build_tree(teams, res)


def parents_of(rows: list[TeamRow]) -> Parents:
    return {r.slug: r.parent for r in rows}


def load_parents(session: Session, org_id: int) -> Parents:
    return org_repo.team_parents(session, org_id)


def capacities(session: Session, org_id: int) -> dict[str, int]:
    """Milli-GPU capacity of every pool (nodes not down)."""
    nodes: dict[str, list[Node]] = {p.name: [] for p in org_repo.list_pools(session, org_id)}
    for row in org_repo.list_nodes(session, org_id):
        nodes.setdefault(row.pool, []).append(codec.node_from_row(row))
    return {pool: pool_capacity(ns) for pool, ns in nodes.items()}


def node_capacity(rows: list[NodeRow]) -> int:
    return pool_capacity(codec.node_from_row(r) for r in rows)
