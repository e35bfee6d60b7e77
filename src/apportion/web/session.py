"""Dashboard sessions: the API token in a signed cookie, and CSRF tokens.

The cookie holds the token the user logged in with, signed (itsdangerous) so
that nothing but this server's key can make one; it is ``HttpOnly`` (no
script reads it) and ``SameSite=Strict`` (no other site's page sends it).
Every request verifies the token again through the same token service as
``Authorization: Bearer`` (cached for seconds), so a revoked token ends its
session at once. Roles are then the REST API's, through the same service
functions.

CSRF: every form and every htmx request carries a token derived from the
session (HMAC of the key and the token id), compared in constant time.
The login form, which has no session yet, uses a signed nonce kept in a
short-lived cookie of its own (double submit).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.concurrency import run_in_threadpool

from apportion.service.context import Ctx, Role
from apportion.service.control import ControlPlane
from apportion.service.errors import Unauthenticated

COOKIE = "apportion_session"
LOGIN_COOKIE = "apportion_login"
#: a session lasts at most this long (the token's own expiry may end it sooner)
MAX_AGE = 12 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"


class Keys:
    """The signing key of this server (``Settings.web_secret`` or random)."""

    def __init__(self, secret: str | None) -> None:
        self.secret = (secret or secrets.token_hex(32)).encode()
        self.session = URLSafeTimedSerializer(self.secret, salt="apportion.session")
        self.login = URLSafeTimedSerializer(self.secret, salt="apportion.login")

    def csrf_for(self, token_id: str) -> str:
        return hmac.new(self.secret, b"csrf:" + token_id.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Session:
    """A logged-in request: the caller (as the REST API would see it) and its CSRF token."""

    ctx: Ctx
    csrf: str


def keys(request: Request) -> Keys:
    k: Keys = request.app.state.web_keys
    return k


def control(request: Request) -> ControlPlane:
    cp: ControlPlane = request.app.state.control
    return cp


def request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


async def current(request: Request) -> Session | None:
    """The session of this request, or None (no cookie, bad signature, or a
    token that no longer verifies)."""
    raw = request.cookies.get(COOKIE)
    if not raw:
        return None
    try:
        token = str(keys(request).session.loads(raw, max_age=MAX_AGE))
    except BadSignature:
        return None
    cp = control(request)
    actor = cp.tokens.cached(token)
    if actor is None:
        try:
            actor = await run_in_threadpool(cp.tokens.verify, token)
        except Unauthenticated:
            return None
    if actor.role is Role.AGENT:
        return None
    ctx = Ctx(actor, request_id(request))
    request.state.ctx = ctx
    return Session(ctx, keys(request).csrf_for(actor.token_id))


async def verify_token(request: Request, token: str) -> Ctx:
    """Check a token typed into the login form (raises Unauthenticated)."""
    token = token.strip()
    if not token:
        raise Unauthenticated("enter an API token")
    actor = await run_in_threadpool(control(request).tokens.verify, token)
    if actor.role is Role.AGENT:
        raise Unauthenticated("agent tokens cannot log in to the dashboard")
    return Ctx(actor, request_id(request))


def is_secure(request: Request) -> bool:
    return request.url.scheme == "https"


def start(response: Response, request: Request, token: str) -> None:
    response.set_cookie(COOKIE, keys(request).session.dumps(token.strip()), max_age=MAX_AGE,
                        httponly=True, samesite="strict", secure=is_secure(request), path="/")
    response.delete_cookie(LOGIN_COOKIE, path="/")


def end(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")


def login_nonce(request: Request, response: Response) -> str:
    """A fresh CSRF value for the login form, also set as a signed cookie."""
    nonce = secrets.token_urlsafe(24)
    response.set_cookie(LOGIN_COOKIE, keys(request).login.dumps(nonce), max_age=3600,
                        httponly=True, samesite="strict", secure=is_secure(request), path="/")
    return nonce


def check_login_nonce(request: Request, sent: str) -> bool:
    raw = request.cookies.get(LOGIN_COOKIE, "")
    try:
        nonce = str(keys(request).login.loads(raw, max_age=3600))
    except BadSignature:
        return False
    return bool(sent) and hmac.compare_digest(nonce, sent)


def check_csrf(request: Request, session: Session, form: dict[str, str]) -> bool:
    sent = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD, "")
    return bool(sent) and hmac.compare_digest(sent, session.csrf)
