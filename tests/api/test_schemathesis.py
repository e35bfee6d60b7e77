"""Schemathesis against the live app (uvicorn on a free port, real HTTP), on
SQLite and PostgreSQL: every operation with schema-valid and schema-invalid
input, then the stateful chain of the OpenAPI links (create team →
reservation → submit → get / why / events / cancel). Checks: no 5xx, status
codes and bodies as documented, content types as documented, and every 4xx is
the error envelope. The example counts are bounded so the run stays short;
the counts run are printed (docs/api.md records them)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from apportion.api.app import create_app
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings
from tests.netutil import bound_socket, port_of
from tests.pgfixture import backend_url, pg_server  # noqa: F401
from tests.timing import wait_until

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

TOKEN = "apt_schemathesis_" + "z" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: examples per operation and generation mode, and stateful scenarios
POSITIVE, NEGATIVE, SCENARIOS = 5, 3, 15


def envelope_on_errors(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx (and 5xx) body is ``{"error": {code, message, details}, "request_id"}``."""
    if response.status_code < 400:
        return None
    body = response.json()
    assert set(body) == {"error", "request_id"}, body
    assert {"code", "message", "details"} <= set(body["error"]), body
    assert "Traceback" not in response.text
    return None


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, envelope_on_errors]


@pytest.fixture
def live(backend_url: str) -> Iterator[str]:  # noqa: F811
    """The server on ``backend_url`` with an organization to act on: pool ``main``
    with two nodes, teams research/{nlp, vision} and production, a reservation, a
    workload."""
    control = ControlPlane(Settings(database_url=backend_url, bootstrap_token=TOKEN,
                                    run_scheduler=False, rate_limit=0.0))
    control.start()
    sock = bound_socket()  # handed to uvicorn: no window for another process to take it
    port = port_of(sock)
    server = uvicorn.Server(uvicorn.Config(create_app(control=control), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=20, what="the server")
    url = f"http://127.0.0.1:{port}"
    try:
        _seed(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        control.stop()


def _seed(url: str) -> None:
    import httpx

    with httpx.Client(base_url=url, headers=AUTH, timeout=10) as c:
        def ok(method: str, path: str, **kw: Any) -> Any:
            r = c.request(method, path, **kw)
            assert r.status_code < 300, r.text
            return r.json()["data"]

        ok("POST", "/v1/pools", json={"name": "main"})
        agent = ok("POST", "/v1/tokens", json={"name": "agent", "role": "agent", "pool": "main"})
        r = c.post("/v1/agent/heartbeat", headers={"Authorization": f"Bearer {agent['token']}"},
                   json={"nodes": [{"name": f"n{i}", "gpus": 8} for i in (1, 2)]})
        assert r.status_code == 200, r.text
        for body in ({"slug": "research"}, {"slug": "nlp", "parent": "research"},
                     {"slug": "vision", "parent": "research"}, {"slug": "production"}):
            ok("POST", "/v1/teams", json=body)
        ok("PUT", "/v1/reservations/research/main", json={"gpus": 4})
        ok("PUT", "/v1/reservations/nlp/main", json={"gpus": 2})
        ok("POST", "/v1/workloads", json={"name": "seed", "team": "nlp", "gpus": 1})


def test_every_operation_keeps_the_contract(live: str) -> None:
    schema = schemathesis.openapi.from_url(f"{live}/openapi.json")
    ran: Counter[str] = Counter()
    operations = [result.ok() for result in schema.get_all_operations()]
    for op in operations:
        for mode, count in ((GenerationMode.POSITIVE, POSITIVE),
                            (GenerationMode.NEGATIVE, NEGATIVE)):
            if op.path.endswith("/stream") and mode is GenerationMode.POSITIVE:
                continue  # an endless SSE stream: covered by tests/api/test_events.py
            _run_operation(live, op, mode, count, ran)
    print(f"\nschemathesis stateless: {len(ran)} operations, {sum(ran.values())} examples")
    assert len(operations) >= 40 and len(ran) == len(operations)


def _run_operation(live: str, op: Any, mode: Any, count: int, ran: Counter[str]) -> None:
    @settings(max_examples=count, deadline=None, database=None, derandomize=True,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        case.headers = {**(case.headers or {}), **AUTH}
        if op.path.endswith("/decisions"):
            case.query = {**(case.query or {}), "wait": 0}
        response = case.call(base_url=live, timeout=30)
        case.validate_response(response, checks=CHECKS)
        ran[op.label] += 1

    try:
        run()
    except Unsatisfiable:
        # nothing of this operation can be made schema-invalid (no body, no
        # constrained parameter): its positive examples cover it
        assert mode is GenerationMode.NEGATIVE, op.label


#: What the chain fixes in the generated bodies so that each step can succeed
#: and hand its answer on (the rest of each body is schemathesis' own data).
SUBMIT_FIXED = {"class": "reserved", "gpus": 1, "pods": 1}
SUBMIT_DROPPED = ("gpu_memory_mib", "min_pods", "priority", "cpu", "memory_mib", "topology",
                  "pool", "gpu_type", "node_selector", "gang",
                  # job control: `after` names ids that need not exist (a 422 by design),
                  # `array` a syntax the schema cannot express (a 422 when it is not)
                  "after", "array")


def test_the_linked_chain_keeps_the_contract(live: str) -> None:
    """The OpenAPI links as a scenario: create a team → reserve GPUs for it →
    submit reserved work to it → get, why, events → cancel (and cancel again:
    409) → release the reservation → delete the team. Bodies are generated by
    schemathesis from the schema; the ids and names each step hands on come
    from the previous answer (the links' expressions). Draws never depend on
    the server's answers, so Hypothesis replays stay consistent."""
    schema = schemathesis.openapi.from_url(f"{live}/openapi.json")
    ops = {r.ok().label: r.ok() for r in schema.get_all_operations()}
    calls: Counter[str] = Counter()
    team_links = ops["POST /v1/teams"].definition.raw["responses"]["201"]["links"]
    assert "SetReservation" in team_links  # the chain below is what the links say

    def call(case: Any) -> Any:
        case.headers = {**(case.headers or {}), **AUTH}
        response = case.call(base_url=live, timeout=30)
        case.validate_response(response, checks=CHECKS)
        calls[f"{case.operation.label} {response.status_code}"] += 1
        return response

    @settings(max_examples=SCENARIOS, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def chain(data: st.DataObject) -> None:
        team_case = data.draw(ops["POST /v1/teams"].as_strategy())
        team_case.body = {k: v for k, v in team_case.body.items() if k != "parent"}
        gpus = data.draw(st.integers(1, 2))
        submit_case = data.draw(ops["POST /v1/workloads"].as_strategy())
        reads = [data.draw(ops[label].as_strategy()) for label in (
            "GET /v1/workloads/{workload_id}", "GET /v1/workloads/{workload_id}/why",
            "GET /v1/workloads/{workload_id}/events")]
        cancel_case = data.draw(ops["POST /v1/workloads/{workload_id}/cancel"].as_strategy())
        cancel_case.body = None
        # headers the chain must not carry: If-Match (a version) and
        # Idempotency-Key (a replay) would change what each step answers
        for case in (team_case, submit_case, cancel_case):
            case.headers = {}
        team = call(team_case)
        if team.status_code != 201:
            return
        slug = team.json()["data"]["slug"]
        reservation = ops["PUT /v1/reservations/{team}/{pool}"].Case(
            path_parameters={"team": slug, "pool": "main"}, body={"gpus": gpus},
            media_type="application/json")
        assert call(reservation).status_code == 200
        body = {k: v for k, v in submit_case.body.items() if k not in SUBMIT_DROPPED}
        if isinstance(body.get("command"), str):
            # a string command is split as a shell would, and a generated string
            # may not split (an unclosed quote: a 422 naming `command`, by design,
            # tests/domain/test_error_messages.py); as a one-element list it always submits
            body["command"] = [body["command"]]
        submit_case.body = {**body, **SUBMIT_FIXED, "team": slug}
        if "\\u0000" in json.dumps(submit_case.body):
            return  # a NUL character is refused with a 422 (test_contract), not submitted
        submitted = call(submit_case)
        assert submitted.status_code == 201, submitted.text
        wid = submitted.json()["data"]["id"]
        for case in reads:
            case.path_parameters = {"workload_id": wid}
            case.query = {}
            assert call(case).status_code == 200
        cancel_case.path_parameters = {"workload_id": wid}
        assert call(cancel_case).status_code == 200
        assert call(cancel_case).status_code == 409  # already terminal
        # hand the GPUs back and remove the team, so the next scenario finds room
        release = ops["PUT /v1/reservations/{team}/{pool}"].Case(
            path_parameters={"team": slug, "pool": "main"}, body={"gpus": 0},
            media_type="application/json")
        assert call(release).status_code == 200
        remove = ops["DELETE /v1/teams/{slug}"].Case(path_parameters={"slug": slug})
        assert call(remove).status_code == 200

    chain()
    print(f"\nschemathesis stateful: {SCENARIOS} scenarios, {sum(calls.values())} calls: "
          f"{sorted(calls.items())}")
    assert calls["POST /v1/workloads/{workload_id}/cancel 200"] > 0, sorted(calls.items())
