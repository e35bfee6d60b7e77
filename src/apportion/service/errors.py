"""Errors of the service layer. The API maps each to one HTTP status, in one place."""

from __future__ import annotations

from typing import Any

from apportion.domain.errors import ApportionError, ValidationError


class Unauthenticated(ApportionError):
    """No valid token (401)."""


class PermissionDenied(ApportionError):
    """The token's role does not allow the action (403)."""

    def __init__(self, action: str, obj: str, role: str, required: str) -> None:
        self.action = action
        self.obj = obj
        self.role = role
        self.required = required
        super().__init__(f"role {role!r} may not {action} {obj}".strip() + f" (needs {required})")


class Conflict(ApportionError):
    """A state conflict (409): not empty, already exists, already terminal."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        self.details = details or {}
        super().__init__(message)


class VersionConflict(Conflict):
    """A write named a version that is no longer current (409)."""

    def __init__(self, kind: str, name: str, expected: int, current: int) -> None:
        super().__init__(
            f"{kind} {name!r} has changed: you sent version {expected}, it is now {current}",
            {"kind": kind, "name": name, "expected_version": expected, "current_version": current},
        )


class IdempotencyMismatch(ValidationError):
    """An Idempotency-Key reused with a different request (422)."""

    def __init__(self, key: str) -> None:
        super().__init__(
            "Idempotency-Key",
            f"key {key!r} was already used with a different request",
            "a new key for a different request",
        )


class RateLimited(ApportionError):
    """Too many requests for this token (429)."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(f"rate limit exceeded; retry in {retry_after:.1f} s")


class StaleSnapshot(ApportionError):
    """A plan was computed from a snapshot that is no longer current."""


class LostLease(ApportionError):
    """This scheduler no longer holds the lease (its fencing token is old)."""


def check_version(kind: str, name: str, expected: int | None, current: int) -> None:
    if expected is not None and expected != current:
        raise VersionConflict(kind, name, expected, current)
