"""The one place where errors become HTTP responses. Never a stack trace."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from apportion.api.deps import BadParam
from apportion.domain.errors import (
    IllegalTransition,
    NotFound,
    ReservationError,
    ValidationError,
    did_you_mean,
)
from apportion.domain.org import SLUG_ALLOWED, SLUG_RE
from apportion.service import audit
from apportion.service.errors import (
    Conflict,
    IdempotencyMismatch,
    PermissionDenied,
    RateLimited,
    Unauthenticated,
    VersionConflict,
)

log = logging.getLogger("apportion.api")


def request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


def error_body(code: str, message: str, details: dict[str, Any] | None,
               request_id_: str) -> bytes:
    """The error envelope as bytes (for middleware that answers before a route)."""
    return json.dumps({"error": {"code": code, "message": message, "details": details or {}},
                       "request_id": request_id_}).encode()


def error_response(
    request: Request, status: int, code: str, message: str,
    details: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details or {}},
            "request_id": request_id(request)}
    return JSONResponse(body, status_code=status, headers=headers)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_KIND = {"workload_id": "workload", "slug": "team", "token_id": "token"}


def _problem(err: Any) -> tuple[str, str, str | None]:
    """One Pydantic error as (field, message, allowed) in the domain's words
    (``ValidationError``): the same style as the scenario parser and the CLI."""
    loc = list(err.get("loc", ()))[1:]
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    got = err.get("input")
    if kind == "unknown_key":
        loc.append(ctx["key"])
        return _field(loc), str(err.get("msg")), str(ctx.get("allowed"))
    if kind == "nul_character":
        loc.extend(ctx.get("path") or [])
        return _field(loc) or "body", str(err.get("msg")), str(ctx.get("allowed"))
    allowed: str | None = ctx.get("allowed")
    message = str(err.get("msg", "invalid"))
    if kind in ("int_type", "int_parsing", "int_from_float", "int_parsing_size"):
        message, allowed = f"must be an integer, got {got!r}", allowed or "an integer"
    elif kind == "finite_number":  # an integer field given 1e400 (JSON infinity)
        message = f"must be a finite number, got {got!r}"
    elif kind in ("string_type",):
        message = f"must be a string, got {got!r}"
    elif kind in ("bool_type", "bool_parsing"):
        message, allowed = f"must be true or false, got {got!r}", "true, false"
    elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        op = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">",
              "less_than": "<"}[kind]
        bound = ctx.get("ge", ctx.get("le", ctx.get("gt", ctx.get("lt"))))
        message = f"must be {op} {bound}, got {got!r}"
    elif kind in ("string_too_short", "string_too_long", "too_short", "too_long"):
        lo, hi = ctx.get("min_length"), ctx.get("max_length")
        message = (f"must have at least {lo} characters/items" if "short" in kind
                   else f"must have at most {hi} characters/items")
    elif kind in ("literal_error", "enum"):
        words = [w.strip().strip("'") for w in
                 str(ctx.get("expected", "")).replace(" or ", ", ").split(",") if w.strip()]
        allowed = ", ".join(words)
        message = f"{got!r} is not allowed{did_you_mean(str(got), words)}"
    elif kind == "string_pattern_mismatch":
        message = f"{got!r} is not allowed"
        allowed = SLUG_ALLOWED if ctx.get("pattern") == SLUG_RE.pattern else str(
            ctx.get("pattern"))
    elif kind == "missing":
        message = "is required"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = f"must be an object, got {type(got).__name__}"
    elif kind == "list_type":
        message = f"must be a list, got {type(got).__name__}"
    # a union (``list[str] | str``) reports each member; name the field only
    loc = [p for p in loc if p not in ("list[str]", "str", "int", "float", "function-before")
           and not (isinstance(p, str) and p.startswith(("function-", "list[", "constrained")))]
    return _field(loc) or "body", message, allowed


def _request_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = []
    raw = exc.errors()
    where = {str(e.get("loc", ("body",))[0]) for e in raw}
    for err in raw:
        if err.get("type") == "json_invalid":
            return error_response(request, 400, "BAD_REQUEST", "the body is not valid JSON",
                                  {"field": "body"})
    if "path" in where:
        # an id that is not a number, or out of range, names nothing that exists
        err = next(e for e in raw if e.get("loc", ("",))[0] == "path")
        name = str(err["loc"][1]) if len(err["loc"]) > 1 else ""
        kind = _KIND.get(name, name)
        value = str(err.get("input", ""))
        return error_response(request, 404, "NOT_FOUND", f"no {kind} {value!r}",
                              {"kind": kind, "name": value})
    seen: set[tuple[str, str]] = set()
    for err in raw:
        field, message, allowed = _problem(err)
        if str(err.get("loc", ("body",))[0]) != "body":
            field = _field(list(err.get("loc", ()))[1:]) or field
        if (field, message) in seen:
            continue
        seen.add((field, message))
        errors.append({"field": field, "message": message, "allowed": allowed})
    first = errors[0] if errors else {"field": "", "message": "invalid", "allowed": None}
    message = f"{first['field']}: {first['message']}"
    if first["allowed"]:
        message += f" (allowed: {first['allowed']})"
    details = {"field": first["field"], "allowed": first["allowed"], "errors": errors}
    if where == {"body"}:
        return error_response(request, 422, "VALIDATION_ERROR", message, details)
    return error_response(request, 400, "BAD_REQUEST", message, details)


def _validation(request: Request, exc: ValidationError) -> JSONResponse:
    code = "VALIDATION_ERROR"
    if isinstance(exc, ReservationError):
        code = "RESERVATION_INVALID"
    elif isinstance(exc, IdempotencyMismatch):
        code = "IDEMPOTENCY_KEY_REUSED"
    details = {"field": exc.field, "allowed": exc.allowed,
               "errors": [{"field": exc.field, "message": exc.message, "allowed": exc.allowed}]}
    return error_response(request, 422, code, str(exc), details)


def _denied(request: Request, exc: PermissionDenied) -> JSONResponse:
    ctx = getattr(request.state, "ctx", None)
    control = request.app.state.control
    try:
        audit.record_denial(control.db, ctx, exc.action, exc.obj, str(exc))
    except Exception:
        log.exception("could not audit a denial")
    return error_response(request, 403, "FORBIDDEN", str(exc),
                          {"role": exc.role, "required": exc.required, "action": exc.action})


def _unauthenticated(request: Request, exc: Unauthenticated) -> JSONResponse:
    if request.headers.get("authorization"):
        try:
            audit.record_denial(request.app.state.control.db, None, "authenticate",
                                request.url.path, str(exc), request_id=request_id(request))
        except Exception:
            log.exception("could not audit a denial")
    return error_response(request, 401, "UNAUTHENTICATED", str(exc),
                          headers={"WWW-Authenticate": "Bearer"})


def install(app: FastAPI) -> None:
    """Register every handler on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def h_reqval(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _request_validation(request, exc)

    @app.exception_handler(ValidationError)
    async def h_val(request: Request, exc: ValidationError) -> JSONResponse:
        return _validation(request, exc)

    @app.exception_handler(BadParam)
    async def h_param(request: Request, exc: BadParam) -> JSONResponse:
        return error_response(request, 400, "BAD_REQUEST", str(exc), {
            "field": exc.field, "allowed": exc.allowed,
            "errors": [{"field": exc.field, "message": exc.message, "allowed": exc.allowed}]})

    @app.exception_handler(NotFound)
    async def h_nf(request: Request, exc: NotFound) -> JSONResponse:
        return error_response(request, 404, "NOT_FOUND", str(exc),
                              {"kind": exc.kind, "name": exc.name})

    @app.exception_handler(VersionConflict)
    async def h_ver(request: Request, exc: VersionConflict) -> JSONResponse:
        return error_response(request, 409, "VERSION_CONFLICT", str(exc), exc.details)

    @app.exception_handler(Conflict)
    async def h_conf(request: Request, exc: Conflict) -> JSONResponse:
        return error_response(request, 409, "CONFLICT", str(exc), exc.details)

    @app.exception_handler(IllegalTransition)
    async def h_ill(request: Request, exc: IllegalTransition) -> JSONResponse:
        return error_response(request, 409, "CONFLICT", str(exc),
                              {"current": exc.current, "target": exc.target})

    @app.exception_handler(Unauthenticated)
    async def h_unauth(request: Request, exc: Unauthenticated) -> JSONResponse:
        return _unauthenticated(request, exc)

    @app.exception_handler(PermissionDenied)
    async def h_denied(request: Request, exc: PermissionDenied) -> JSONResponse:
        return _denied(request, exc)

    @app.exception_handler(RateLimited)
    async def h_rate(request: Request, exc: RateLimited) -> JSONResponse:
        return error_response(request, 429, "RATE_LIMITED", str(exc),
                              {"retry_after": exc.retry_after},
                              headers={"Retry-After": str(max(1, round(exc.retry_after)))})

    @app.exception_handler(HTTPException)
    async def h_http(request: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "BAD_REQUEST")
        return error_response(request, exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def h_any(request: Request, exc: Exception) -> JSONResponse:
        log.error("request %s failed", request_id(request), exc_info=exc)
        return error_response(request, 500, "INTERNAL",
                              f"internal error; quote request id {request_id(request)}")
