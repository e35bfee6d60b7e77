"""Limits on what a request body may cost the server (issue 18, hostile input).

- **Size**: a body over ``max_body_bytes`` (``APPORTION_MAX_BODY_BYTES``, 16 MiB:
  an agent's heartbeat of 100,000 nodes fits) is refused with ``413`` and the
  error envelope, before a route reads it: at once when ``Content-Length`` says
  so, else as soon as the bytes received pass the limit (chunked uploads).
- **Time**: a client that starts a body and then trickles it (a slow-loris
  client) gets ``408`` once ``body_timeout`` seconds (``APPORTION_BODY_TIMEOUT``,
  30 s) pass without a byte of it; its connection is then closed. The body is
  read here, within both limits, before the route runs (FastAPI reads it whole
  anyway); after it, the route sees the client's own messages (a disconnect
  that a streaming response waits for is never timed).

Either refusal changes nothing and is audited (``request.refused``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apportion.api.errors import error_body
from apportion.service import audit
from apportion.service.control import ControlPlane

log = logging.getLogger("apportion.api")


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


class BodyLimits:
    """ASGI middleware: the size and time limits above."""

    def __init__(self, app: ASGIApp, control: ControlPlane) -> None:
        self.app = app
        self.control = control
        self.max_bytes = control.settings.max_body_bytes
        self.timeout = control.settings.body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send, self._too_large(declared))
            return
        try:
            messages = await self._read_body(receive)
        except _Refused as refused:
            await self._refuse(scope, send, refused)
            return
        queued = list(messages)

        async def replay() -> Message:
            # the body as it came; then the client's own messages (a disconnect)
            return queued.pop(0) if queued else await receive()

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> list[Message]:
        """The request's body messages, within the size and time limits."""
        messages: list[Message] = []
        received = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), self.timeout)
            except TimeoutError:
                raise _Refused(408, "REQUEST_TIMEOUT", (
                    f"no part of the request body arrived for {self.timeout:g} s"),
                    {"timeout_seconds": self.timeout}) from None
            messages.append(message)
            if message["type"] != "http.request":
                return messages  # the client went away: the app sees it as before
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise self._too_large(received)
            if not message.get("more_body", False):
                return messages

    def _too_large(self, size: int) -> _Refused:
        return _Refused(413, "PAYLOAD_TOO_LARGE", (
            f"the request body is over {self.max_bytes} bytes ({size} or more); split it, "
            f"or raise APPORTION_MAX_BODY_BYTES"), {"limit_bytes": self.max_bytes})

    async def _refuse(self, scope: Scope, send: Send, refused: _Refused) -> None:
        path = str(scope.get("path", ""))
        rid = str(scope.get("state", {}).get("request_id", ""))
        try:
            await run_in_threadpool(
                audit.record_denial, self.control.db, None, "request.refused",
                f"{scope.get('method', '')} {path}", f"{refused.status}: {refused.message}",
                request_id=rid)
        except Exception:  # the answer matters more than its audit entry
            log.warning("could not audit a refused request", exc_info=True)
        body = error_body(refused.code, refused.message, refused.details, rid)
        await send({"type": "http.response.start", "status": refused.status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
