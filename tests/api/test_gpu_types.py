"""A workload's ``gpu_type`` as one type or a list of acceptable types (SPEC 3)
through the REST API, on SQLite and PostgreSQL: what is stored and shown, what
is refused (a 422 naming ``gpu_type`` and the allowed values, nothing stored),
and what the OpenAPI schema says about it; and the reason codes the schema
lists (SPEC 7, HOST_RESOURCES included)."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.domain.reasons import ReasonCode
from tests.api.conftest import Api

ALLOWED = "a GPU type name, or a list of 1-16 of them"


def _submit(api: Api, **body: Any) -> Any:
    return api.call("POST", "/v1/workloads", json={"name": "w", "team": "nlp", "gpus": 1,
                                                    **body})


def test_a_list_of_types_round_trips_sorted_and_one_type_stays_a_string(api: Api) -> None:
    api.org()
    many = api.submit(team="nlp", gpus=1, gpu_type=["v100-32g", "v100-16g"])
    assert many["spec"]["gpu_type"] == ["v100-16g", "v100-32g"]
    assert api.workload(many["id"])["spec"]["gpu_type"] == ["v100-16g", "v100-32g"]
    listed = {w["id"]: w for w in api.ok("GET", "/v1/workloads")}
    assert listed[many["id"]]["spec"]["gpu_type"] == ["v100-16g", "v100-32g"]
    one = api.submit(team="nlp", gpus=1, gpu_type="h100")
    assert api.workload(one["id"])["spec"]["gpu_type"] == "h100"
    # a list of one is that type; repeated names count once
    single = api.submit(team="nlp", gpus=1, gpu_type=["a100", "a100"])
    assert api.workload(single["id"])["spec"]["gpu_type"] == "a100"
    anything = api.submit(team="nlp", gpus=1)
    assert api.workload(anything["id"])["spec"]["gpu_type"] is None


def test_dry_run_takes_a_list_of_types(api: Api) -> None:
    api.org()  # its nodes report no GPU type: a named type matches no pool
    answer = api.ok("POST", "/v1/workloads/dry-run",
                    json={"name": "w", "team": "nlp", "gpus": 1, "gpu_type": ["x1", "x2"]})
    assert answer["starts_now"] is False
    assert answer["reason"]["code"] == "NO_ELIGIBLE_POOL"


@pytest.mark.parametrize(("value", "words"), [
    pytest.param([""], "non-empty string", id="empty-name"),
    pytest.param(["  "], "non-empty string", id="blank-name"),
    pytest.param([f"t{i}" for i in range(17)], "1-16 types, got 17", id="17-types"),
    pytest.param([], "1-16 types, got 0", id="empty-list"),
    pytest.param(5, "a type or a list of types", id="a-number"),
    pytest.param(["h100", 3], "non-empty string", id="a-number-in-the-list"),
    pytest.param(["x" * 256], "at most 255 characters", id="too-long"),
])
def test_a_bad_gpu_type_is_a_422_naming_the_field_and_nothing_is_stored(
    api: Api, value: object, words: str
) -> None:
    api.org()
    before = api.ok("GET", "/v1/workloads")
    r = _submit(api, gpu_type=value)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"]["field"] == "gpu_type", err
    assert words in err["message"], err["message"]
    assert err["details"]["allowed"] == ALLOWED
    assert err["message"].startswith("gpu_type: ") and ALLOWED in err["message"]
    assert "Traceback" not in r.text
    assert api.ok("GET", "/v1/workloads") == before
    # the dry run refuses it alike
    r = api.call("POST", "/v1/workloads/dry-run",
                 json={"name": "w", "team": "nlp", "gpus": 1, "gpu_type": value})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "gpu_type"


def test_openapi_says_gpu_type_is_a_type_or_a_list_and_lists_every_reason(api: Api) -> None:
    schemas = api.client.get("/openapi.json").json()["components"]["schemas"]
    submitted = schemas["WorkloadCreate"]["properties"]["gpu_type"]["anyOf"]
    kinds = submitted[0]["anyOf"]
    assert {k["type"] for k in kinds} == {"string", "array"}
    array = next(k for k in kinds if k["type"] == "array")
    assert (array["minItems"], array["maxItems"]) == (1, 16)
    assert array["items"]["minLength"] == 1
    shown = schemas["WorkloadSpecRead"]["properties"]["gpu_type"]["anyOf"]
    assert {k["type"] for k in shown} == {"string", "array", "null"}
    assert schemas["WorkloadRead"]["properties"]["spec"]["$ref"].endswith("WorkloadSpecRead")
    reason = schemas["ReasonModel"]["properties"]["code"]
    codes = schemas[reason["$ref"].rsplit("/", 1)[1]]["enum"] if "$ref" in reason \
        else reason["enum"]
    assert "HOST_RESOURCES" in codes
    assert codes == [c.value for c in ReasonCode]


def test_a_start_decision_tells_the_agent_the_types_and_host_resources(api: Api) -> None:
    """What an executor needs to tell a node scheduler (docs/kubernetes.md):
    the pod's cpu and memory, and the acceptable GPU types."""
    api.ok("POST", "/v1/pools", json={"name": "main", "preemption_grace": 0})
    agent = api.token("agent-main", "agent", pool="main")
    api.ok("POST", "/v1/agent/heartbeat", agent, json={"nodes": [
        {"name": "v1", "gpus": 4, "gpu_type": "v100-32g", "cpu": 32, "memory_mib": 262144}]})
    api.ok("POST", "/v1/teams", json={"slug": "nlp"})
    w = api.submit(team="nlp", gpus=1, gpu_type=["v100-16g", "v100-32g"], cpu=8,
                   memory_mib=65536)
    api.cycle()
    assert api.workload(w["id"])["status"] == "Starting"
    (start,) = [d for d in api.ok("GET", "/v1/agent/decisions", agent) if d["kind"] == "start"]
    assert start["exec"]["gpu_type"] == ["v100-16g", "v100-32g"]
    assert (start["exec"]["cpu"], start["exec"]["memory_mib"]) == (8, 65536)
