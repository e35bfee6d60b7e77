"""Endpoints for the organization, tokens, teams, pools, nodes, reservations and audit.

One method per endpoint of docs/api.md; each returns the API object (a ``dict``) or a
:class:`Page` of them, unchanged.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from apportion.client.base import BaseClient, Page


def _seg(value: str | int) -> str:
    """One URL path segment, escaped."""
    return quote(str(value), safe="")


def _if_match(version: int | None) -> dict[str, str] | None:
    return None if version is None else {"If-Match": str(version)}


def _idem(key: str | None) -> dict[str, str] | None:
    return None if key is None else {"Idempotency-Key": key}


def _body(**fields: Any) -> dict[str, Any]:
    """A PATCH/POST body with the fields that were given (``None`` = not given)."""
    return {k: v for k, v in fields.items() if v is not None}


class AdminEndpoints(BaseClient):
    """Organization, tokens, teams, pools, nodes, reservations, audit."""

    # -- organizations ----------------------------------------------------------------------

    def current_organization(self) -> dict[str, Any]:
        return self.obj("GET", "/v1/organizations/current")

    def update_organization(self, *, name: str | None = None,
                            version: int | None = None) -> dict[str, Any]:
        return self.obj("PATCH", "/v1/organizations/current",
                         json=_body(name=name, version=version))

    def list_organizations(self, *, limit: int | None = None,
                           next_token: str | None = None) -> Page:
        return self.page("/v1/organizations", {"limit": limit, "next_token": next_token})

    def create_organization(self, slug: str, name: str, *,
                            idempotency_key: str | None = None) -> dict[str, Any]:
        """Returns ``{"organization": ..., "admin_token": TokenCreated}``."""
        return self.obj("POST", "/v1/organizations", json={"slug": slug, "name": name},
                         headers=_idem(idempotency_key))

    # -- tokens -----------------------------------------------------------------------------

    def create_token(
        self, name: str, role: str, *, teams: list[str] | None = None, pool: str | None = None,
        expires_at: str | None = None, expires_in_days: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """TokenCreated: the only answer that carries the secret ``token``."""
        body = _body(name=name, role=role, teams=teams or None, pool=pool,
                     expires_at=expires_at, expires_in_days=expires_in_days)
        return self.obj("POST", "/v1/tokens", json=body, headers=_idem(idempotency_key))

    def list_tokens(self, *, limit: int | None = None, next_token: str | None = None) -> Page:
        return self.page("/v1/tokens", {"limit": limit, "next_token": next_token})

    def token_self(self) -> dict[str, Any]:
        return self.obj("GET", "/v1/tokens/self")

    def revoke_token(self, token_id: str) -> dict[str, Any]:
        return self.obj("DELETE", f"/v1/tokens/{_seg(token_id)}")

    # -- teams ------------------------------------------------------------------------------

    def list_teams(self, *, parent: str | None = None, limit: int | None = None,
                   next_token: str | None = None) -> Page:
        return self.page("/v1/teams", {"parent": parent, "limit": limit,
                                       "next_token": next_token})

    def get_team(self, slug: str) -> dict[str, Any]:
        return self.obj("GET", f"/v1/teams/{_seg(slug)}")

    def create_team(
        self, slug: str, *, name: str | None = None, parent: str | None = None,
        bursting_priority: int | None = None, burst_limit_percent: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        body = _body(slug=slug, name=name, parent=parent, bursting_priority=bursting_priority)
        if burst_limit_percent is not None:
            body["burst_limit_percent"] = burst_limit_percent
        return self.obj("POST", "/v1/teams", json=body, headers=_idem(idempotency_key))

    def update_team(self, slug: str, changes: dict[str, Any], *,
                    version: int | None = None) -> dict[str, Any]:
        """PATCH a team. ``changes`` is sent as given, so ``{"burst_limit_percent": None}``
        sets the limit back to unlimited and ``{"parent": None}`` moves to the top level."""
        return self.obj("PATCH", f"/v1/teams/{_seg(slug)}", json=dict(changes),
                         headers=_if_match(version))

    def delete_team(self, slug: str) -> Any:
        return self.data("DELETE", f"/v1/teams/{_seg(slug)}")

    # -- pools and nodes --------------------------------------------------------------------

    def list_pools(self, *, limit: int | None = None, next_token: str | None = None) -> Page:
        return self.page("/v1/pools", {"limit": limit, "next_token": next_token})

    def get_pool(self, name: str) -> dict[str, Any]:
        return self.obj("GET", f"/v1/pools/{_seg(name)}")

    def create_pool(self, name: str, *, idempotency_key: str | None = None,
                    **fields: Any) -> dict[str, Any]:
        """``fields``: gpu_type, gpu_memory_mib, topology, start_delay, preemption_grace, packing,
        starvation_hold_after."""
        return self.obj("POST", "/v1/pools", json={"name": name, **fields},
                         headers=_idem(idempotency_key))

    def update_pool(self, name: str, changes: dict[str, Any], *,
                    version: int | None = None) -> dict[str, Any]:
        return self.obj("PATCH", f"/v1/pools/{_seg(name)}", json=dict(changes),
                         headers=_if_match(version))

    def delete_pool(self, name: str) -> Any:
        return self.data("DELETE", f"/v1/pools/{_seg(name)}")

    def list_nodes(self, *, pool: str | None = None, state: str | None = None,
                   limit: int | None = None, next_token: str | None = None) -> Page:
        return self.page("/v1/nodes", {"pool": pool, "state": state, "limit": limit,
                                       "next_token": next_token})

    def get_node(self, name: str) -> dict[str, Any]:
        return self.obj("GET", f"/v1/nodes/{_seg(name)}")

    def cordon_node(self, name: str, *, version: int | None = None) -> dict[str, Any]:
        return self.obj("POST", f"/v1/nodes/{_seg(name)}/cordon", json=_body(version=version))

    def uncordon_node(self, name: str, *, version: int | None = None) -> dict[str, Any]:
        return self.obj("POST", f"/v1/nodes/{_seg(name)}/uncordon",
                         json=_body(version=version))

    # -- reservations -----------------------------------------------------------------------

    def list_reservations(self, *, team: str | None = None, pool: str | None = None,
                          limit: int | None = None, next_token: str | None = None) -> Page:
        return self.page("/v1/reservations", {"team": team, "pool": pool, "limit": limit,
                                              "next_token": next_token})

    def set_reservation(self, team: str, pool: str, gpus: float, *,
                        version: int | None = None) -> Any:
        return self.data("PUT", f"/v1/reservations/{_seg(team)}/{_seg(pool)}",
                         json=_body(gpus=gpus, version=version))

    def delete_reservation(self, team: str, pool: str) -> Any:
        return self.data("DELETE", f"/v1/reservations/{_seg(team)}/{_seg(pool)}")

    # -- audit ------------------------------------------------------------------------------

    def list_audit(
        self, *, actor: str | None = None, action: str | None = None,
        outcome: str | None = None, after: str | None = None, before: str | None = None,
        limit: int | None = None, next_token: str | None = None,
    ) -> Page:
        return self.page("/v1/audit", {"actor": actor, "action": action, "outcome": outcome,
                                       "after": after, "before": before, "limit": limit,
                                       "next_token": next_token})
