"""OpenAPI links: how the answer of one operation feeds the next, so a client
(and the schemathesis stateful run in CI) can walk create team → reservation
→ submit → get / why / events / cancel. The pool is ``main`` in those links:
the organization the contract tests seed has one pool of that name."""

from __future__ import annotations

from typing import Any

_ID = "$response.body#/data/id"

TEAM_CREATED: dict[str, Any] = {
    "SetReservation": {
        "operationId": "set_reservation_v1_reservations__team___pool__put",
        "parameters": {"team": "$response.body#/data/slug", "pool": "main"},
        "description": "reserve GPUs for the new team",
    },
    "GetTeam": {
        "operationId": "get_team_v1_teams__slug__get",
        "parameters": {"slug": "$response.body#/data/slug"},
    },
}
RESERVATION_SET: dict[str, Any] = {
    "SubmitReserved": {
        "operationId": "submit_v1_workloads_post",
        "requestBody": {"name": "linked", "team": "$response.body#/data/team",
                        "class": "reserved", "gpus": 1},
        "description": "submit reserved work to the team that holds the reservation",
    },
}
WORKLOAD_SUBMITTED: dict[str, Any] = {
    name: {"operationId": op, "parameters": {"workload_id": _ID}}
    for name, op in (
        ("GetWorkload", "get_workload_v1_workloads__workload_id__get"),
        ("Why", "why_v1_workloads__workload_id__why_get"),
        ("Events", "workload_events_v1_workloads__workload_id__events_get"),
        ("Cancel", "cancel_v1_workloads__workload_id__cancel_post"),
    )
}
