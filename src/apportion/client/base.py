"""The HTTP core of the client: envelopes, errors, pages, retries-free and synchronous.

Every ``/v1`` answer is ``{"data", "metadata", "request_id"}`` or
``{"error": {"code", "message", "details"}, "request_id"}`` (docs/api.md,
Conventions). :meth:`BaseClient.call` unwraps the first and raises
:class:`ApiError` for the second, so callers only ever see ``data``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from apportion.client.errors import ApiError, ServerUnreachable
from apportion.client.sse import SseEvent, parse_sse

DEFAULT_TIMEOUT = 30.0
PAGE_LIMIT_MAX = 100


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list endpoint: its ``items`` and where the next page starts."""

    items: list[dict[str, Any]]
    next_token: str | None = None
    total_count: int | None = None
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """An unwrapped success: ``data`` plus the envelope's extras and useful headers."""

    data: Any
    metadata: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None
    is_replayed: bool = False


def _clean(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Drop ``None`` values; join lists for repeatable filters; booleans as ``true``/``false``."""
    out: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, list | tuple):
            if value:
                out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = value
    return out


class BaseClient:
    """Holds the ``httpx.Client``; knows nothing about individual endpoints.

    ``transport`` lets tests plug in ``httpx.MockTransport`` or an ASGI transport.
    """

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        user_agent: str = "apportion-client",
    ) -> None:
        self.server = server.rstrip("/")
        self.token = token
        headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=self.server, headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> BaseClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ---------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """Send one request and unwrap its envelope; raise :class:`ApiError` on an error body."""
        response = self._send(method, path, params=params, json=json, headers=headers,
                              timeout=timeout)
        body = _json_or_none(response)
        request_id = response.headers.get("X-Request-Id")
        if response.is_error:
            raise _api_error(response, body, request_id)
        if isinstance(body, dict) and "data" in body:
            return Response(
                data=body["data"],
                metadata=body.get("metadata") or {},
                request_id=body.get("request_id") or request_id,
                is_replayed=response.headers.get("Idempotent-Replayed") == "true",
            )
        return Response(data=body, request_id=request_id)

    def data(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`call` and return ``data`` only."""
        return self.call(method, path, **kwargs).data

    def obj(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """:meth:`data` for an endpoint whose ``data`` is one object."""
        data = self.data(method, path, **kwargs)
        if not isinstance(data, dict):
            raise ApiError(200, "BAD_RESPONSE", f"{method} {path}: expected an object, got "
                           f"{type(data).__name__}", {}, None)
        return data

    def page(self, path: str, params: Mapping[str, Any] | None = None) -> Page:
        """GET one page of a list endpoint."""
        result = self.call("GET", path, params=params)
        return Page(
            items=list(result.data or []),
            next_token=result.metadata.get("next_token"),
            total_count=result.metadata.get("total_count"),
            request_id=result.request_id,
        )

    def text(self, path: str) -> str:
        """GET a non-JSON resource (``/metrics``)."""
        response = self._send("GET", path)
        if response.is_error:
            raise _api_error(response, _json_or_none(response), None)
        return response.text

    def raw(self, method: str, path: str, *, params: Mapping[str, Any] | None = None) -> bytes:
        """A non-JSON body (``text/plain`` logs) as bytes."""
        response = self._send(method, path, params=params)
        if response.is_error:
            raise _api_error(response, _json_or_none(response), response.headers.get(
                "X-Request-Id"))
        return response.content

    def stream_bytes(self, path: str, params: Mapping[str, Any] | None = None, *,
                     read_timeout: float | None = None) -> Iterator[bytes]:
        """GET ``path`` and yield the body as it arrives, until the server ends it
        (or no byte arrives for ``read_timeout`` seconds: then it ends quietly)."""
        timeout = httpx.Timeout(DEFAULT_TIMEOUT, read=read_timeout)
        headers = {"X-Request-Id": uuid.uuid4().hex}
        try:
            with self._http.stream("GET", path, params=_clean(params), headers=headers,
                                   timeout=timeout) as response:
                if response.is_error:
                    response.read()
                    raise _api_error(response, _json_or_none(response), None)
                yield from response.iter_bytes()
        except httpx.ReadTimeout:
            return
        except httpx.TransportError as err:
            raise ServerUnreachable(self.server, str(err) or type(err).__name__) from err

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        all_headers = {"X-Request-Id": uuid.uuid4().hex, **(headers or {})}
        extra: dict[str, Any] = {}
        if timeout is not None:
            extra["timeout"] = timeout
        try:
            return self._http.request(
                method, path, params=_clean(params), json=json, headers=all_headers, **extra
            )
        except httpx.TimeoutException as err:
            raise ServerUnreachable(self.server, f"timed out ({type(err).__name__})") from err
        except httpx.TransportError as err:
            raise ServerUnreachable(self.server, str(err) or type(err).__name__) from err

    # -- event stream -----------------------------------------------------------------------

    def sse(
        self,
        path: str,
        params: Mapping[str, Any] | None = None,
        *,
        last_event_id: str | int | None = None,
        read_timeout: float | None = None,
    ) -> Iterator[SseEvent]:
        """Stream Server-Sent Events from ``path`` until the server closes it.

        ``read_timeout`` bounds the wait for each chunk (keep-alives arrive every 15 s);
        when it passes, the iterator ends quietly rather than raising.
        """
        headers = {"Accept": "text/event-stream", "X-Request-Id": uuid.uuid4().hex}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        timeout = httpx.Timeout(DEFAULT_TIMEOUT, read=read_timeout)
        try:
            with self._http.stream(
                "GET", path, params=_clean(params), headers=headers, timeout=timeout
            ) as response:
                if response.is_error:
                    response.read()
                    raise _api_error(response, _json_or_none(response), None)
                yield from parse_sse(response.iter_lines())
        except httpx.ReadTimeout:
            return
        except httpx.TransportError as err:
            raise ServerUnreachable(self.server, str(err) or type(err).__name__) from err


def paginate(fetch: Callable[..., Page], /, *args: Any,
             **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Yield every item of every page of ``fetch(*args, **kwargs, next_token=...)``.

    Example: ``for w in paginate(client.list_workloads, team="nlp"): ...``
    """
    kwargs.setdefault("limit", PAGE_LIMIT_MAX)
    token: str | None = kwargs.pop("next_token", None)
    while True:
        page = fetch(*args, **kwargs, next_token=token)
        yield from page.items
        if not page.next_token or page.next_token == token:
            return
        token = page.next_token


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _api_error(response: httpx.Response, body: Any, request_id: str | None) -> ApiError:
    """Build the :class:`ApiError` for an error response, tolerating non-JSON bodies."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return ApiError(
            response.status_code,
            str(error.get("code") or "ERROR"),
            str(error.get("message") or response.reason_phrase),
            error.get("details") or {},
            body.get("request_id") or request_id,
        )
    text = response.text.strip()[:200] if response.content else response.reason_phrase
    return ApiError(response.status_code, f"HTTP_{response.status_code}", text or "error",
                    {}, request_id or response.headers.get("X-Request-Id"))
