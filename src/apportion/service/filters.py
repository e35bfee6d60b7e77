"""List filters that name objects: an unknown team or pool is a 404 with a
did-you-mean, the same for every list (``GET /v1/workloads?team=``,
``/v1/nodes?pool=``, ``/v1/reservations``, ``/v1/teams?parent=``,
``/v1/capacity/teams``) and so for the CLI's flags that send them.
Enumerated filters (status, class, state, outcome, event type) are checked by
the API's query types (``api/filters.py``)."""

from __future__ import annotations

from apportion.domain.errors import NotFound
from apportion.store.db import Session
from apportion.store.repos import orgs as repo


def known_team(session: Session, org_id: int, slug: str | None) -> None:
    """Raise NotFound (with the closest slug) unless ``slug`` is None or a team."""
    if slug is None:
        return
    slugs = [t.slug for t in repo.list_teams(session, org_id)]
    if slug not in slugs:
        raise NotFound("team", slug, slugs)


def known_pool(session: Session, org_id: int, name: str | None) -> None:
    """Raise NotFound (with the closest name) unless ``name`` is None or a pool."""
    if name is None:
        return
    names = [p.name for p in repo.list_pools(session, org_id)]
    if name not in names:
        raise NotFound("pool", name, names)
