"""Following the event stream for ``-w/--watch`` and ``logs -f``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from apportion.client import ApportionClient

WORKLOAD_EVENT_TYPES = frozenset({"workload.status", "workload.reason"})


def workload_events(
    client: ApportionClient, *, after: int | None = None, timeout: float | None = None,
    workload_id: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield workload events (the Event JSON) newer than ``after`` (default: now) as they
    arrive, optionally for one workload; stop after ``timeout`` seconds if given."""
    cursor = client.latest_event_id() if after is None else after
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return
        # Keep-alives come every 15 s; a read timeout a bit longer than that means the
        # connection is gone, so reconnect from the cursor.
        read_timeout = 20.0 if remaining is None else min(20.0, remaining)
        got_any = False
        for event in client.stream_events(last_event_id=cursor, read_timeout=read_timeout):
            got_any = True
            data = event.data if isinstance(event.data, dict) else {}
            if "id" in data:
                cursor = int(data["id"])
            if data.get("type") not in WORKLOAD_EVENT_TYPES:
                continue
            if workload_id is not None and data.get("workload_id") != workload_id:
                continue
            yield data
            if deadline is not None and time.monotonic() >= deadline:
                return
        if not got_any and deadline is None:
            time.sleep(0.5)
