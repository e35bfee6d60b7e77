"""A schemathesis check of apportion's own, for the CLI runs of
``test_schemathesis.py`` (loaded through ``SCHEMATHESIS_HOOKS``)."""

from __future__ import annotations

from typing import Any

import schemathesis


@schemathesis.check
def envelope_on_errors(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx (and 5xx) body is ``{"error": {code, message, details}, "request_id"}``."""
    if response.status_code < 400:
        return None
    body = response.json()
    if set(body) != {"error", "request_id"} or not {"code", "message", "details"} <= set(
            body.get("error") or {}):
        raise AssertionError(f"not the error envelope: {body!r}")
    if "Traceback" in response.text:
        raise AssertionError("a stack trace in the response")
    return None
