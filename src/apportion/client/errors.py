"""Errors raised by :class:`apportion.client.ApportionClient`.

``ApiError`` is a failure the server reported (its ``error`` body); ``ServerUnreachable``
means no answer came back at all (connection refused, DNS, timeout).
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """The server answered with an error body (docs/api.md, "Error body")."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.request_id = request_id


class ServerUnreachable(Exception):
    """No HTTP answer from ``server``; ``reason`` says why (refused, timeout, ...)."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"cannot reach {server}: {reason}")
        self.server = server
        self.reason = reason
