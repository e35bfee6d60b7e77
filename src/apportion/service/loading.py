"""Loading domain objects from the store inside a transaction."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

from apportion.domain.cluster import Node, pool_capacity
from apportion.domain.org import OrgTree, build_tree
from apportion.service.authz import Parents
from apportion.store import codec
from apportion.store.db import Session
from apportion.store.repos import orgs as org_repo


def load_tree(session: Session, org_id: int) -> OrgTree:
    teams = [codec.team_from_row(r) for r in org_repo.list_teams(session, org_id)]
    res = {(r.team, r.pool): r.milli for r in org_repo.list_reservations(session, org_id)}
    return build_tree(teams, res)


class TeamLink(Protocol):
    """What :func:`parents_of` reads of a team (the store's team rows have it)."""

    @property
    def slug(self) -> str: ...
    @property
    def parent(self) -> str | None: ...


def parents_of(rows: Iterable[TeamLink]) -> Parents:
    return {r.slug: r.parent for r in rows}


def load_parents(session: Session, org_id: int) -> Parents:
    return org_repo.team_parents(session, org_id)


class ParentsCache:
    """The team tree (slug -> parent) per database and organization, with the
    ``teams_version`` it was read at. Used by submission, the hot path.

    A cached tree may be stale (another server changed a team); the caller
    confirms it with :meth:`confirm` at the end of its transaction, where the
    teams version is read under the organization row's write lock.
    """

    def __init__(self) -> None:
        self._trees: dict[tuple[str, int], tuple[int, Parents]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(session: Session, org_id: int) -> tuple[str, int]:
        return str(session.get_bind().engine.url), org_id

    def get(self, session: Session, org_id: int) -> tuple[int, Parents]:
        """(teams version, tree): the cached one, else read now."""
        key = self._key(session, org_id)
        with self._lock:
            hit = self._trees.get(key)
        if hit is not None:
            return hit
        return self.reload(session, org_id)

    def reload(self, session: Session, org_id: int) -> tuple[int, Parents]:
        """(teams version, tree) read now, and cached."""
        version = org_repo.teams_version(session, org_id)
        return self._store(self._key(session, org_id), version, load_parents(session, org_id))

    def confirm(self, session: Session, org_id: int, used: int, current: int) -> Parents | None:
        """None if the tree of version ``used`` is the current one; else the
        current tree, read now (and cached), for the caller to check again."""
        if used == current:
            return None
        return self._store(self._key(session, org_id), current, load_parents(session, org_id))[1]

    def _store(self, key: tuple[str, int], version: int, parents: Parents) -> tuple[int, Parents]:
        with self._lock:
            if len(self._trees) > 1000:
                self._trees.clear()
            self._trees[key] = (version, parents)
        return version, parents


#: One per process: shared by every request thread of the server.
PARENTS_CACHE = ParentsCache()


def capacities(session: Session, org_id: int) -> dict[str, int]:
    """Milli-GPU capacity of every pool (nodes not down)."""
    nodes: dict[str, list[Node]] = {p.name: [] for p in org_repo.list_pools(session, org_id)}
    for row in org_repo.list_nodes(session, org_id):
        nodes.setdefault(row.pool, []).append(codec.node_from_row(row))
    return {pool: pool_capacity(ns) for pool, ns in nodes.items()}


def node_capacity(nodes: Iterable[Node]) -> int:
    """Milli-GPU capacity of these nodes (those not down)."""
    return pool_capacity(nodes)
