"""The paging cursor of list endpoints and dashboard tables: an opaque token
for "after id N", so a page URL and an API call agree."""

from __future__ import annotations

import base64


def encode_cursor(after: int | None) -> str | None:
    if after is None:
        return None
    return base64.urlsafe_b64encode(f"a:{after}".encode()).decode().rstrip("=")


def decode_cursor(token: str | None) -> int | None:
    """The id a token stands for (None for no token); ValueError if it is not
    a token :func:`encode_cursor` made."""
    if not token:
        return None
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    kind, _, value = raw.partition(":")
    if kind != "a":
        raise ValueError(raw)
    return int(value)
