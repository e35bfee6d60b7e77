"""The API as a contract (issue 20): no 5xx for any input, strict numbers,
one error format with a did-you-mean, every enumerated filter checked alike,
ids out of range are 404s, Swagger UI served from the package."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import apportion.api
from tests.api.conftest import Api

BIG_ID = 2**63  # one past the largest BIGINT


def _err(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "request_id"}
    err: dict[str, Any] = body["error"]
    assert "Traceback" not in r.text
    return err


def _submit(api: Api, **body: Any) -> Any:
    return api.call("POST", "/v1/workloads", json={"name": "w", "team": "nlp", **body})


@pytest.mark.parametrize("gpus", [1e308, 1e20, -1, 1025, 0.3])
def test_huge_or_bad_gpu_numbers_are_a_422_naming_gpus(api: Api, gpus: float) -> None:
    api.org()
    err = _err(_submit(api, gpus=gpus), 422)
    assert err["code"] == "VALIDATION_ERROR"
    assert err["details"]["field"] == "gpus"
    assert "0.25, 0.5, 0.75" in err["details"]["allowed"]
    assert api.ok("GET", "/v1/workloads") == []


def test_json_infinity_1e400_is_a_422_not_a_500(api: Api) -> None:
    api.org()
    raw = b'{"name": "w", "team": "nlp", "gpus": 1e400}'
    r = api.client.post("/v1/workloads", content=raw,
                        headers={**api.admin, "Content-Type": "application/json"})
    err = _err(r, 422)
    assert err["details"]["field"] == "gpus" and "finite" in err["message"]


@pytest.mark.parametrize("value", [True, "0.5", "1", None])
def test_gpus_must_be_a_json_number(api: Api, value: object) -> None:
    api.org()
    r = _submit(api, gpus=value)
    err = _err(r, 422)
    assert err["details"]["field"] == "gpus"
    if value is not None:
        assert f"must be a number, got {value!r}" in err["message"]


@pytest.mark.parametrize(("field", "value"), [
    ("pods", 2**70), ("pods", True), ("priority", "50"), ("duration", 2**64),
    ("gpu_memory_mib", 10**30), ("memory_mib", 1e300), ("cpu", float("1e300")),
    ("gang", "yes"), ("requeue_on_preemption", 1),
])
def test_every_number_and_flag_has_a_type_and_a_range(api: Api, field: str, value: object
                                                     ) -> None:
    api.org()
    err = _err(_submit(api, gpus=1, **{field: value}), 422)
    assert err["details"]["field"] == field, err


def test_a_command_string_is_split_as_a_shell_would(api: Api) -> None:
    api.org()
    w = api.submit(team="nlp", gpus=1, command="python train.py --note 'two words'")
    assert w["spec"]["command"] == ["python", "train.py", "--note", "two words"]
    err = _err(_submit(api, gpus=1, command="echo 'unbalanced"), 422)
    assert err["details"]["field"] == "command"


def test_unknown_fields_say_did_you_mean_like_the_scenario_parser(api: Api) -> None:
    api.org()
    err = _err(_submit(api, gpus=1, priorty=5), 422)
    assert err["details"]["field"] == "priorty"
    assert err["message"].startswith("priorty: unknown key; did you mean 'priority'?")
    assert "priority" in err["details"]["allowed"]
    err = _err(_submit(api, gpus=1, topology={"levl": "rack"}), 422)
    assert err["details"]["field"] == "topology.levl"
    assert "did you mean 'level'?" in err["message"]
    err = _err(api.call("POST", "/v1/teams", json={"slug": "x", "burst_limit": 5}), 422)
    assert "did you mean 'burst_limit_percent'?" in err["message"]


@pytest.mark.parametrize("suffix", ["", "/why", "/events", "/logs"])
def test_ids_beyond_bigint_are_404(api: Api, suffix: str) -> None:
    api.org()
    err = _err(api.call("GET", f"/v1/workloads/{BIG_ID}{suffix}"), 404)
    assert err["code"] == "NOT_FOUND" and err["details"]["kind"] == "workload"
    assert _err(api.call("GET", f"/v1/workloads/abc{suffix}"), 404)["code"] == "NOT_FOUND"


def test_cancel_of_an_id_beyond_bigint_is_404(api: Api) -> None:
    api.org()
    _err(api.call("POST", f"/v1/workloads/{BIG_ID}/cancel"), 404)
    err = _err(api.call("GET", f"/v1/events?workload_id={BIG_ID}"), 400)
    assert err["details"]["field"] == "workload_id"
    err = _err(api.call("GET", "/v1/events/stream?follow=false",
                        {**api.admin, "Last-Event-ID": str(BIG_ID)}), 400)
    assert err["details"]["field"] == "Last-Event-ID"


@pytest.mark.parametrize(("path", "field", "allowed"), [
    ("/v1/nodes?state=bogus", "state", "ready, cordoned, down, unknown"),
    ("/v1/workloads?status=Runing", "status", "Running"),
    ("/v1/workloads?class=reserve", "class", "reserved, elastic"),
    ("/v1/events?type=workload.stat", "type", "workload.status"),
    ("/v1/audit?outcome=fine", "outcome", "ok, denied, ignored"),
])
def test_enumerated_filters_are_checked_alike(api: Api, path: str, field: str, allowed: str
                                              ) -> None:
    api.org()
    err = _err(api.call("GET", path), 400)
    assert err["code"] == "BAD_REQUEST" and err["details"]["field"] == field
    assert allowed in err["details"]["allowed"]


@pytest.mark.parametrize(("path", "field"), [
    ("/v1/workloads?submitted_after=nan", "submitted_after"),
    ("/v1/workloads?submitted_after=1e400", "submitted_after"),
    ("/v1/workloads?submitted_before=-1e400", "submitted_before"),
    ("/v1/workloads?submitted_after=1e308", "submitted_after"),
    ("/v1/workloads?submitted_after=-1", "submitted_after"),
    ("/v1/audit?after=inf", "after"),
    ("/v1/audit?before=yesterday", "before"),
])
def test_a_time_filter_out_of_range_is_a_400_naming_it(api: Api, path: str, field: str
                                                       ) -> None:
    # nan, infinity and 1e308 used to be taken as times and answer 200 with nothing
    err = _err(api.call("GET", path), 400)
    assert err["code"] == "BAD_REQUEST" and err["details"]["field"] == field
    assert err["details"]["allowed"] == "RFC 3339 or epoch seconds 0..253402300799"
    assert err["message"].startswith(f"{field}: ")


def test_a_time_filter_in_range_still_filters(api: Api) -> None:
    api.org()
    wid = _submit(api, gpus=1).json()["data"]["id"]
    assert [w["id"] for w in api.ok("GET", "/v1/workloads?submitted_after=0")] == [wid]
    assert api.ok("GET", "/v1/workloads?submitted_after=9999-12-31T23:59:59Z") == []


def test_a_close_enumerated_value_gets_a_did_you_mean(api: Api) -> None:
    err = _err(api.call("GET", "/v1/workloads?status=Runing"), 400)
    assert "did you mean 'Running'?" in err["message"]


@pytest.mark.parametrize("path", [
    "/v1/workloads?team=nlx", "/v1/nodes?pool=mian", "/v1/reservations?team=nlx",
    "/v1/reservations?pool=mian", "/v1/teams?parent=reserch", "/v1/capacity/teams?team=nlx",
    "/v1/capacity/teams?pool=mian",
])
def test_unknown_team_or_pool_filter_is_a_404_with_did_you_mean(api: Api, path: str) -> None:
    api.org()
    err = _err(api.call("GET", path), 404)
    assert err["code"] == "NOT_FOUND"
    assert "did you mean" in err["message"], err


def test_token_lists_never_carry_the_secret_and_creation_does(api: Api) -> None:
    made = api.ok("POST", "/v1/tokens", json={"name": "v", "role": "viewer"})
    assert made["token"].startswith("apt_")
    assert all("token" not in t for t in api.ok("GET", "/v1/tokens"))


def test_openapi_documents_the_error_envelope_and_strict_bodies(api: Api) -> None:
    spec = api.client.get("/openapi.json").json()
    submit = spec["paths"]["/v1/workloads"]["post"]
    assert {"400", "401", "403", "404", "409", "422", "429"} <= set(submit["responses"])
    create = spec["components"]["schemas"]["WorkloadCreate"]
    assert create["additionalProperties"] is False
    gpus = create["properties"]["gpus"]["anyOf"][0]
    assert gpus["maximum"] == 1024


def test_swagger_ui_is_served_from_the_package(api: Api) -> None:
    html = api.client.get("/docs").text
    assert "/docs/static/swagger-ui-bundle.js" in html and "/docs/static/swagger-ui.css" in html
    assert "cdn" not in html.lower() and "https://" not in html
    static = Path(apportion.api.__file__).parent / "static"
    record = json.loads((static / "VENDOR.json").read_text())
    for entry in record["files"]:
        r = api.client.get(f"/docs/static/{entry['file']}")
        assert r.status_code == 200
        assert hashlib.sha256(r.content).hexdigest() == entry["sha256"]
        assert entry["package"] == "swagger-ui-dist" and entry["license"] == "Apache-2.0"
        assert (static / entry["license_file"]).is_file()
    on_disk = {p.name for p in static.iterdir()} - {"VENDOR.json"}
    recorded = {e["file"] for e in record["files"]} | {e["license_file"] for e in record[
        "files"]} | {e["notice_file"] for e in record["files"]}
    assert on_disk == recorded


def test_setting_a_zero_reservation_where_there_is_none_is_not_a_500(api: Api) -> None:
    """Found by schemathesis: ``PUT /v1/reservations/T/P {"gpus": 0}`` with no reservation."""
    api.org()
    assert api.ok("PUT", "/v1/reservations/nlp/main", json={"gpus": 0})["gpus"] == 0
    assert api.ok("GET", "/v1/reservations") == []
    api.ok("PUT", "/v1/reservations/production/main", json={"gpus": 2})
    api.ok("PUT", "/v1/reservations/production/main", json={"gpus": 0})
    assert api.ok("GET", "/v1/reservations") == []


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "w\u0000"}, "name"),
    ({"labels": {"k": "v\u0000"}}, "labels.k"),
    ({"command": ["sh", "-c", "x\u0000"]}, "command[2]"),
    ({"env": {"A\u0000": "1"}}, "env.A\u0000"),
])
def test_a_nul_character_is_a_422_on_every_backend(api: Api, body: dict[str, Any],
                                                    field: str) -> None:
    # PostgreSQL cannot store NUL in text (schemathesis found a 500 there)
    api.org()
    err = _err(_submit(api, gpus=1, **body), 422)
    assert err["details"]["field"] == field
    assert "NUL" in err["message"] and "NUL" in err["details"]["allowed"]
    assert api.ok("GET", "/v1/workloads") == []


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("PATCH", "/v1/teams/nlp", '{"burst_limit_percent": 1e400}', "burst_limit_percent"),
    ("POST", "/v1/nodes/n1/cordon", '{"version": 1e400}', "version"),
    ("POST", "/v1/workloads", '{"name": "w", "team": "nlp", "gpus": 1, "pods": 1e400}',
     "pods"),
])
def test_infinity_in_an_integer_field_is_said_in_our_words(api: Api, method: str, path: str,
                                                           body: str, field: str) -> None:
    # was Pydantic's "Input should be a finite number"
    api.org()
    r = api.client.request(method, path, content=body.encode(),
                           headers={**api.admin, "content-type": "application/json"})
    err = _err(r, 422)
    assert err["message"].startswith(f"{field}: must be "), err
    assert "Input should" not in err["message"]
    assert err["details"]["field"] == field


@pytest.mark.parametrize(("method", "path", "body", "field", "hint"), [
    ("POST", "/v1/workloads", {"name": "w", "team": "nlx", "gpus": 1}, "team", "nlp"),
    ("PATCH", "/v1/teams/nlp", {"parent": "reserch"}, "parent", "research"),
    ("POST", "/v1/teams", {"slug": "x", "parent": "reserch"}, "parent", "research"),
    ("POST", "/v1/tokens", {"name": "t", "role": "member", "teams": ["visoin"]}, "teams[0]",
     "vision"),
])
def test_an_unknown_team_in_a_body_is_a_422_with_did_you_mean(
        api: Api, method: str, path: str, body: dict[str, Any], field: str, hint: str) -> None:
    api.org()
    before = api.ok("GET", "/v1/teams")
    err = _err(api.call(method, path, json=body), 422)
    assert err["details"]["field"] == field
    assert f"did you mean {hint!r}?" in err["message"], err
    assert api.ok("GET", "/v1/teams") == before  # nothing changed
