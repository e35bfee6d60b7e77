"""API tokens: ``apt_<id>_<secret>``, shown once, stored as a SHA-256 of the
secret, with expiry and revocation; and the first start's bootstrap."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
import threading
import time
from typing import Any

from apportion.domain.errors import NotFound, ValidationError, did_you_mean
from apportion.domain.org import validate_slug
from apportion.service import audit
from apportion.service.authz import require_admin
from apportion.service.context import Actor, Ctx, Role
from apportion.service.errors import Unauthenticated
from apportion.service.inputs import OrgNew, TokenNew
from apportion.service.views import org_view, token_view
from apportion.store.db import Database, Session
from apportion.store.repos import orgs as org_repo
from apportion.store.repos import security as sec_repo

PREFIX = "apt_"
TOKEN_RE = re.compile(r"^apt_([a-z0-9]{12})_([A-Za-z0-9_-]{20,128})$")
_ALPHABET = string.ascii_lowercase + string.digits
#: How long a verified token is trusted without a database read. Revocations
#: made through this process take effect at once; on PostgreSQL so do those of
#: other processes (their ``NOTIFY`` clears the entry, and while this process is
#: not listening the cache is not used); on SQLite another process's revocation
#: takes effect within this time.
CACHE_SECONDS = 5.0


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_token_string() -> str:
    token_id = "".join(secrets.choice(_ALPHABET) for _ in range(12))
    return f"{PREFIX}{token_id}_{secrets.token_urlsafe(24)}"


def parse_token(token: str) -> tuple[str, str]:
    m = TOKEN_RE.match(token)
    if not m:
        raise Unauthenticated("malformed token: expected apt_<id>_<secret>")
    return m.group(1), m.group(2)


def add_token(
    session: Session, org_id: int, *, name: str, role: str, teams: list[str] | None = None,
    pool: str | None = None, expires_at: float | None = None, token: str | None = None,
) -> tuple[dict[str, Any], str]:
    """Insert a token; returns its view (without the secret) and the full token
    string (shown once)."""
    token = token or new_token_string()
    token_id, secret = parse_token(token)
    row = sec_repo.add_token(
        session, token_id=token_id, org_id=org_id, name=name, role=role,
        teams=list(teams or []), pool=pool, secret_hash=_hash(secret),
        created_at=time.time(), expires_at=expires_at,
    )
    return token_view(row), token


class TokenVerifier:
    """Checks bearer tokens, caching good ones for ``CACHE_SECONDS``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[str, tuple[float, Actor, float | None]] = {}
        self._lock = threading.Lock()
        #: bumped by every forget: a verification that read the token before a
        #: revocation must not put it into the cache after the revocation's forget
        self._generation = 0
        #: False: verify every request against the database (set while a PostgreSQL
        #: process is not listening for revocations of other processes)
        self.use_cache = True

    def forget(self, token_id: str) -> None:
        with self._lock:
            self._generation += 1
            for key in [k for k, (_t, a, _e) in self._cache.items() if a.token_id == token_id]:
                del self._cache[key]

    def clear(self) -> None:
        """Forget every cached token (revocations may have been missed)."""
        with self._lock:
            self._generation += 1
            self._cache.clear()

    def cached(self, token: str) -> Actor | None:
        """The actor of a recently verified token, without touching the database
        (None: call :meth:`verify`)."""
        if not self.use_cache:
            return None
        now = time.time()
        with self._lock:
            hit = self._cache.get(token)
        if hit is not None and hit[0] > now and (hit[2] is None or hit[2] > now):
            return hit[1]
        return None

    def verify(self, token: str) -> Actor:
        hit = self.cached(token)
        if hit is not None:
            return hit
        now = time.time()
        token_id, secret = parse_token(token)
        with self._lock:
            generation = self._generation
        with self.db.read() as session:
            row = sec_repo.get_token(session, token_id)
            if row is None or not hmac.compare_digest(row.secret_hash, _hash(secret)):
                raise Unauthenticated("unknown token")
            if row.revoked_at is not None:
                raise Unauthenticated("token revoked")
            if row.expires_at is not None and row.expires_at <= now:
                raise Unauthenticated("token expired")
            org = org_repo.get_org(session, row.org_id)
            actor = Actor(
                token_id=row.id, name=row.name, role=Role(row.role), org_id=org.id,
                org_slug=org.slug, teams=tuple(row.teams or ()), pool=row.pool,
                is_system_org=org.is_system,
            )
            expires = row.expires_at
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            if self.use_cache and generation == self._generation:
                self._cache[token] = (now + CACHE_SECONDS, actor, expires)
        return actor


def _validate_token_body(new: TokenNew) -> tuple[str, Role, list[str], str | None]:
    name, role, teams, pool = new.name, new.role, list(new.teams), new.pool
    if not 1 <= len(name) <= 255:
        raise ValidationError("name", "must be a string of 1-255 characters")
    if role in (Role.TEAM_LEAD, Role.MEMBER) and not teams:
        raise ValidationError("teams", f"a {role.value} token needs at least one team")
    if role is Role.AGENT and not pool:
        raise ValidationError("pool", "an agent token needs its pool")
    return name, role, teams, pool


def create_token(session: Session, ctx: Ctx, new: TokenNew) -> dict[str, Any]:
    require_admin(ctx, "token.create", "tokens")
    name, role, teams, pool = _validate_token_body(new)
    for i, slug in enumerate(teams):
        if org_repo.find_team(session, ctx.org_id, slug) is None:
            known = [t.slug for t in org_repo.list_teams(session, ctx.org_id)]
            raise ValidationError(f"teams[{i}]", f"team {slug!r} does not exist"
                                  f"{did_you_mean(slug, known)}", "an existing team")
    expires_at = new.expires_at
    if new.expires_in_days is not None:
        expires_at = time.time() + new.expires_in_days * 86400
    view, token = add_token(
        session, ctx.org_id, name=name, role=role.value, teams=teams, pool=pool,
        expires_at=expires_at,
    )
    audit.record(session, ctx, "token.create", f"token/{view['id']}", after=view)
    return {**view, "token": token}


def is_revoked(session: Session, token_id: str) -> bool:
    row = sec_repo.get_token(session, token_id)
    return row is not None and row.revoked_at is not None


def revoke_token(session: Session, ctx: Ctx, token_id: str) -> dict[str, Any]:
    require_admin(ctx, "token.revoke", f"token/{token_id}")
    row = sec_repo.get_token(session, token_id)
    if row is None or row.org_id != ctx.org_id:
        raise NotFound("token", token_id)
    before = token_view(row)
    if row.revoked_at is None:
        sec_repo.revoke_token(row, time.time())
    after = token_view(row)
    audit.record(session, ctx, "token.revoke", f"token/{row.id}", before=before, after=after)
    return after


def create_org(
    session: Session, slug: str, name: str, *, is_system: bool = False,
    admin_token: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A new organization with its first org_admin token: the organization's
    view, the token's view (with the secret) and the token string."""
    validate_slug(slug)
    if org_repo.find_org(session, slug) is not None:
        raise ValidationError("slug", f"organization {slug!r} already exists", "a new slug")
    org = org_repo.add_org(session, slug=slug, name=name or slug, is_system=is_system,
                           created_at=time.time())
    view, token = add_token(session, org.id, name=f"{slug}-admin",
                            role=Role.ORG_ADMIN.value, token=admin_token)
    return org_view(org), {**view, "token": token}, token


def bootstrap(db: Database, org_slug: str, token: str | None) -> str | None:
    """On an empty database create the first organization and its admin token.

    Returns the token to print, or None when the database already has an org.
    """
    if token is not None and not TOKEN_RE.match(token):
        raise ValidationError("APPORTION_BOOTSTRAP_TOKEN", "is not a valid token",
                              "apt_<12 of a-z0-9>_<20-128 of A-Za-z0-9_->")
    with db.write() as session:
        if org_repo.list_orgs(session):
            return None
        _org, _token, secret = create_org(session, org_slug, org_slug.capitalize(),
                                          is_system=True, admin_token=token)
        return secret


def new_org(session: Session, ctx: Ctx, new: OrgNew) -> dict[str, Any]:
    require_admin(ctx, "organization.create", "organizations")
    if not ctx.actor.is_system_org:
        from apportion.service.authz import deny

        raise deny(ctx, "organization.create", "organizations",
                   "org_admin of the bootstrap organization")
    view, admin, _token = create_org(session, new.slug, new.name or new.slug)
    audit.record(session, ctx, "organization.create", f"organization/{view['slug']}",
                 after=view)
    return {"organization": view, "admin_token": admin}
