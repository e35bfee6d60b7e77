"""Server-Sent Events parsing for ``GET /v1/events/stream`` (docs/api.md, Events).

Pure: turns an iterator of text lines into :class:`SseEvent` values, following the
WHATWG rules that matter here (``id``/``event``/``data`` fields, comments, blank-line
dispatch, multi-line data).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: ``id`` and ``type`` as sent, ``data`` decoded from JSON."""

    id: str | None
    type: str
    data: Any


def parse_sse(lines: Iterable[str]) -> Iterator[SseEvent]:
    """Yield one :class:`SseEvent` per blank-line-terminated block of ``lines``.

    Comment lines (``: keep-alive``) are skipped; a block without ``data`` is not an event.
    Data that is not JSON is passed on as the raw string.
    """
    event_id: str | None = None
    event_type = "message"
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(event_id, event_type, _decode("\n".join(data)))
            event_type, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event_id = value
        elif name == "event":
            event_type = value
        elif name == "data":
            data.append(value)
    if data:
        yield SseEvent(event_id, event_type, _decode("\n".join(data)))


def _decode(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
