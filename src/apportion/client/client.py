"""``ApportionClient``: the typed, synchronous client of the v1 REST API (docs/api.md).

Shared by the CLI, the agent and the tests. It returns the API objects unchanged (plain
``dict`` values, :class:`Page` for lists) and raises :class:`ApiError` with the server's
``status``, ``code``, ``message``, ``details`` and ``request_id``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator, Mapping
from typing import Any

from apportion.client.admin import AdminEndpoints, _idem, _seg
from apportion.client.base import Page
from apportion.client.sse import SseEvent

TERMINAL_STATUSES = frozenset({"Completed", "Failed", "Preempted", "Cancelled"})


class ApportionClient(AdminEndpoints):
    """All endpoints of docs/api.md. Use as a context manager or call :meth:`close`."""

    # -- workloads --------------------------------------------------------------------------

    def submit_workload(self, spec: Mapping[str, Any], *,
                        idempotency_key: str | None = None) -> dict[str, Any]:
        """POST the submit body (SPEC 3); returns the Workload (status ``Pending``)."""
        return self.obj("POST", "/v1/workloads", json=dict(spec),
                         headers=_idem(idempotency_key))

    def dry_run_workload(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """What would happen if ``spec`` were submitted now: pool, starts_now, reason,
        victims, placement. Nothing is stored."""
        return self.obj("POST", "/v1/workloads/dry-run", json=dict(spec))

    def list_workloads(
        self, *, status: list[str] | str | None = None, team: str | None = None,
        class_: str | None = None, pool: str | None = None, submitted_by: str | None = None,
        submitted_after: str | None = None, submitted_before: str | None = None,
        name: str | None = None, limit: int | None = None, next_token: str | None = None,
        array: int | None = None,
    ) -> Page:
        return self.page("/v1/workloads", {
            "status": status, "team": team, "class": class_, "pool": pool,
            "submitted_by": submitted_by, "submitted_after": submitted_after,
            "submitted_before": submitted_before, "name": name, "limit": limit,
            "next_token": next_token, "array": array,
        })

    # -- job control (issue 16) ---------------------------------------------------------
    def hold_workload(self, workload_id: int) -> dict[str, Any]:
        """Hold a Pending or Queued workload (it waits with reason HELD)."""
        return self.obj("POST", f"/v1/workloads/{_seg(workload_id)}/hold")

    def release_workload(self, workload_id: int) -> dict[str, Any]:
        return self.obj("POST", f"/v1/workloads/{_seg(workload_id)}/release")

    def cancel_array(self, array_id: int, *, message: str | None = None) -> dict[str, Any]:
        """Cancel every member of an array that has not ended:
        ``{array_id, members, cancelled: [ids]}``."""
        body = {"message": message} if message is not None else {}
        return self.obj("POST", f"/v1/arrays/{_seg(array_id)}/cancel", json=body)

    def get_workload(self, workload_id: int) -> dict[str, Any]:
        return self.obj("GET", f"/v1/workloads/{_seg(workload_id)}")

    def cancel_workload(self, workload_id: int, *, message: str | None = None,
                        version: int | None = None) -> dict[str, Any]:
        body = {k: v for k, v in {"message": message, "version": version}.items()
                if v is not None}
        return self.obj("POST", f"/v1/workloads/{_seg(workload_id)}/cancel", json=body)

    def workload_events(self, workload_id: int, *, limit: int | None = None,
                        next_token: str | None = None) -> Page:
        return self.page(f"/v1/workloads/{_seg(workload_id)}/events",
                         {"limit": limit, "next_token": next_token})

    def workload_logs(
        self, workload_id: int, *, attempt: int | None = None, pod: int | None = None,
        offset: int | None = None, limit: int | None = None,
    ) -> bytes:
        """The program's output (one attempt, default the latest; every pod, each
        line prefixed ``[pod i] ``, unless ``pod`` is given)."""
        params = {"attempt": attempt, "pod": pod, "offset": offset, "limit": limit}
        return self.raw("GET", f"/v1/workloads/{workload_id}/logs", params=params)

    def follow_workload_logs(
        self, workload_id: int, *, attempt: int | None = None, pod: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[bytes]:
        """Stream the output as it arrives until the attempt ends (or ``timeout``
        seconds have passed; checked whenever output arrives, and after at most
        ``timeout`` seconds of silence)."""
        params = {"attempt": attempt, "pod": pod, "follow": "true"}
        deadline = None if timeout is None else time.monotonic() + timeout
        for chunk in self.stream_bytes(f"/v1/workloads/{workload_id}/logs", params,
                                       read_timeout=timeout):
            yield chunk
            if deadline is not None and time.monotonic() > deadline:
                return

    def workload_victims(self, workload_id: int) -> list[dict[str, Any]]:
        """The workloads this one preempted: ``[{workload_id, name, team, attempt}]``."""
        data: list[dict[str, Any]] = self.data("GET", f"/v1/workloads/{_seg(workload_id)}/victims")
        return data

    def why_workload(self, workload_id: int) -> dict[str, Any]:
        """``{"workload_id", "status", "reason": {"code", "message"} | None, "explanation"}``."""
        return self.obj("GET", f"/v1/workloads/{_seg(workload_id)}/why")

    def workload_eta(self, workload_id: int) -> dict[str, Any]:
        """The estimated start: ``{start, pool, waits_for, basis, assumption, ...}``."""
        return self.obj("GET", f"/v1/workloads/{_seg(workload_id)}/eta")

    def etas(self, *, pool: str | None = None) -> dict[str, Any]:
        """Estimates of all waiting work (of ``pool``): ``{estimates: [...], ...}``."""
        return self.obj("GET", "/v1/eta", params={"pool": pool})

    def usage(self, *, since: str | None = None, until: str | None = None,
              team: str | None = None, user: str | None = None, pool: str | None = None,
              group_by: str | None = None) -> dict[str, Any]:
        """GPU-hours, preemptions and wait times over a window (docs/api.md)."""
        return self.obj("GET", "/v1/usage", params={
            "since": since, "until": until, "team": team, "user": user, "pool": pool,
            "group_by": group_by})

    # -- capacity ---------------------------------------------------------------------------

    def pool_capacity(self) -> list[dict[str, Any]]:
        return list(self.data("GET", "/v1/capacity/pools") or [])

    def team_capacity(self, *, pool: str | None = None,
                      team: str | None = None) -> list[dict[str, Any]]:
        return list(self.data("GET", "/v1/capacity/teams",
                              params={"pool": pool, "team": team}) or [])

    # -- events -----------------------------------------------------------------------------

    def list_events(
        self, *, workload_id: int | None = None, type: str | None = None,
        after: int | None = None, limit: int | None = None, next_token: str | None = None,
    ) -> Page:
        return self.page("/v1/events", {"workload_id": workload_id, "type": type,
                                        "after": after, "limit": limit,
                                        "next_token": next_token})

    def stream_events(
        self, *, last_event_id: int | str | None = None, follow: bool = True,
        read_timeout: float | None = None,
    ) -> Iterator[SseEvent]:
        """Events from ``/v1/events/stream`` as they happen; ``follow=False`` ends after
        the backlog. Each :class:`SseEvent` carries the Event JSON in ``data``."""
        params = {"follow": follow}
        return self.sse("/v1/events/stream", params, last_event_id=last_event_id,
                        read_timeout=read_timeout)

    def latest_event_id(self) -> int:
        """The id of the newest event visible to this token (0 when there is none).

        The API has no "newest first" order, so this searches with ``after=`` and
        ``limit=1`` (about 2 x log2(id) small requests): used to follow the stream from
        "now" without replaying the whole backlog.
        """
        def exists_after(after: int) -> int | None:
            items = self.list_events(after=after, limit=1).items
            return int(items[0]["id"]) if items else None

        first = exists_after(0)
        if first is None:
            return 0
        low, step = first, 1
        while (found := exists_after(low + step)) is not None:
            low, step = found, step * 2
        high = low + step  # invariant: ``low`` exists, no id is above ``high``
        while high - low > 1:
            mid = (low + high) // 2
            found = exists_after(mid)
            if found is None:
                high = mid
            else:
                low = found
        last = exists_after(low)  # the id ``high`` itself may exist
        return low if last is None else last

    # -- agent protocol ---------------------------------------------------------------------

    def agent_heartbeat(
        self, pool: str, nodes: list[dict[str, Any]], *, agent_version: str = "",
        runs: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Register or refresh the pool's inventory; returns ``{"pool", "nodes",
        "decisions_cursor", "heartbeat_timeout"}``."""
        body: dict[str, Any] = {"pool": pool, "agent_version": agent_version, "nodes": nodes}
        if runs is not None:
            body["runs"] = runs
        return self.obj("POST", "/v1/agent/heartbeat", json=body)

    def agent_decisions(self, cursor: int = 0, *, limit: int | None = None,
                        wait: float | None = None, live: bool = False) -> Page:
        """Decisions with id > ``cursor``; ``Page.next_token`` is the new cursor.
        ``live``: only starts of attempts still Starting/Running, plus stops."""
        params = {"cursor": cursor, "limit": limit, "wait": wait,
                  "live": "true" if live else None}
        result = self.call("GET", "/v1/agent/decisions", params=params,
                           timeout=None if not wait else wait + 30.0)
        return Page(items=list(result.data or []),
                    next_token=result.metadata.get("next_token"),
                    total_count=result.metadata.get("total_count"),
                    request_id=result.request_id)

    def agent_report(
        self, workload_id: int, attempt: int, run_id: str, status: str, *,
        message: str | None = None, exit_code: int | None = None,
        pods_running: int | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"workload_id": workload_id, "attempt": attempt,
                                "run_id": run_id, "status": status}
        if pods_running is not None:
            body["pods_running"] = pods_running
        if message is not None:
            body["message"] = message
        if exit_code is not None:
            body["exit_code"] = exit_code
        return self.obj("POST", "/v1/agent/reports", json=body)

    def agent_log(
        self, workload_id: int, attempt: int, run_id: str, pod: int, offset: int, data: bytes,
    ) -> dict[str, Any]:
        """Ship ``data`` of a pod's log from byte ``offset``; returns ``{"accepted",
        "next_offset", "note", ...}``: continue from ``next_offset``."""
        body = {"workload_id": workload_id, "attempt": attempt, "run_id": run_id, "pod": pod,
                "offset": offset, "data": base64.b64encode(data).decode()}
        return self.obj("POST", "/v1/agent/logs", json=body)

    # -- other ------------------------------------------------------------------------------

    def healthz(self) -> dict[str, Any]:
        return self.obj("GET", "/healthz")

    def metrics(self) -> str:
        return self.text("/metrics")
