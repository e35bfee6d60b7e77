"""Job control in the CLI (issue 16): ``submit --time/--hold/--after/--array``,
``workloads hold|release``, ``list --array``, ``cancel --array`` and how
``describe`` and ``list -o wide`` show them."""

from __future__ import annotations

import json

import pytest

from apportion.domain.errors import ValidationError
from apportion.domain.jobcontrol import parse_array, parse_dependency, parse_time_limit
from tests.cli.conftest import Org, seed_org, wait_for


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90 * 60), ("90:30", 90 * 60 + 30), ("1:02:03", 3723), ("2-5", 2 * 86400 + 5 * 3600),
    ("2-05:30", 2 * 86400 + 5 * 3600 + 1800), ("1-00:00:10", 86410), ("4h", 14400),
    ("90m", 5400), ("2d", 172800), ("1h30m", 5400), ("45s", 45), (" 4H ", 14400),
])
def test_time_limits_take_slurm_formats(text: str, seconds: int) -> None:
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "1:2:3:4", "-1", "1-", "4x", "1.5h", "0", "0:00"])
def test_bad_time_limits_name_the_formats(text: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_time_limit(text, "--time")
    assert "--time" in str(err.value)


def test_array_and_dependency_syntax() -> None:
    a = parse_array("0-99%10")
    assert (len(a.indexes), a.limit) == (100, 10)
    assert parse_array("1,3,5-7").indexes == (1, 3, 5, 6, 7)
    assert parse_array("0-8:4").indexes == (0, 4, 8)
    assert str(parse_dependency("12")) == "12:ok"
    assert str(parse_dependency("12:notok")) == "12:notok"
    with pytest.raises(ValidationError, match="10000"):
        parse_array("0-10000")
    with pytest.raises(ValidationError, match="ok, any, notok"):
        parse_dependency("12:later")


def test_submit_with_job_control_flags_and_describe_them(org: Org) -> None:
    seed_org(org)
    out = org.ok("submit", "first", "--team", "nlp", "--gpus", "1", "--hold", "-o", "json")
    first = json.loads(out)
    assert first["held"] is True
    out = org.ok("submit", "second", "--team", "nlp", "--gpus", "1", "--time", "1-02:00",
                 "--after", f"{first['id']}:any", "--requeue-on-timeout", "-o", "json")
    second = json.loads(out)
    assert second["spec"]["time_limit"] == 26 * 3600
    assert second["spec"]["after"] == [{"id": first["id"], "condition": "any"}]
    text = org.ok("workloads", "describe", str(second["id"]))
    assert "time limit: 1d2h (93600 s), requeued when reached" in text
    assert f"after:      {first['id']}:any" in text
    wait_for(lambda: (org.admin.get_workload(second["id"])["reason"] or {}).get("code")
             == "DEPENDENCY", 10, "second waits for first")
    assert "held:       yes" in org.ok("workloads", "describe", str(first["id"]))
    assert "HELD" in org.ok("workloads", "get", str(first["id"]), "-o", "wide")
    assert f"{first['id']} 'first' released" in org.ok("workloads", "release",
                                                       str(first["id"]))
    org.wait_status(first["id"], "Starting", "Running")


def test_hold_release_refusals_are_clear(org: Org) -> None:
    seed_org(org)
    w = json.loads(org.ok("submit", "x", "--team", "nlp", "--gpus", "1", "-o", "json"))
    org.wait_status(w["id"], "Starting")
    result = org.cli("workloads", "hold", str(w["id"]))
    assert result.exit_code != 0 and "only Pending or Queued" in result.stderr


def test_arrays_from_the_cli(org: Org) -> None:
    seed_org(org)
    out = org.ok("submit", "sweep", "--team", "nlp", "--gpus", "1", "--array", "0-5%2")
    assert "array" in out and "6 members" in out
    aid = org.admin.list_workloads(name="sweep[0]").items[0]["array_id"]
    rows = org.ok("workloads", "list", "--array", str(aid), "-o", "wide").splitlines()
    assert len(rows) == 7 and f"{aid}_5" in rows[-1]
    wait_for(lambda: sum(w["status"] == "Starting" for w in org.admin.list_workloads(
        array=aid).items) == 2, 10, "two members start")
    assert "array" in org.ok("workloads", "describe", str(aid))
    out = org.ok("workloads", "cancel", "--array", str(aid))
    assert f"array {aid}: 6 of 6 members cancelled" in out
    assert {w["status"] for w in org.admin.list_workloads(array=aid).items} == {"Cancelled"}


@pytest.mark.parametrize(("flags", "text"), [
    (["--time", "soon"], "--time"), (["--after", "x"], "--after"),
    (["--array", "0-20000"], "--array"),
])
def test_bad_job_control_flags_are_usage_errors(org: Org, flags: list[str], text: str) -> None:
    seed_org(org)
    result = org.cli("submit", "bad", "--team", "nlp", "--gpus", "1", *flags)
    assert result.exit_code == 2 and text in result.stderr
    assert org.admin.list_workloads().items == []


def test_pools_show_prints_the_time_limits(org: Org) -> None:
    seed_org(org)
    assert "time limits" not in org.ok("pools", "show", "main")
    org.admin.update_pool("main", {"default_time_limit": 7200, "max_time_limit": 14400})
    out = org.ok("pools", "show", "main")
    assert "time limits: default time limit 2h, max time limit 4h" in out
    result = org.cli("submit", "long", "--team", "nlp", "--gpus", "1", "--time", "5h")
    assert result.exit_code != 0 and "max_time_limit (14400 s)" in result.stderr
