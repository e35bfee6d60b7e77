"""Page-level checks where a browser adds nothing: status codes, redirects,
cookies, CSRF, roles, audit, escaping, bad query values. On a copy of the demo
database (SQLite); every page also renders on PostgreSQL (``any_site``)."""

from __future__ import annotations

import html

import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import Site, csrf_of, login
from tests.web.demo import ADMIN_TOKEN, bearer

PAGES = ["/", "/teams", "/workloads", "/pools/main", "/pools/main/queue", "/submit", "/events",
         "/usage", "/workloads?status=Running&class=elastic&q=half&sort=-age",
         "/teams?pool=main&collapsed=research", "/events?type=workload.status&team=nlp",
         "/usage?hours=1"]


def _audit(site: Site, action: str) -> list[dict[str, object]]:
    r = site.api.get(f"/v1/audit?action={action}&limit=100", headers=bearer(ADMIN_TOKEN))
    assert r.status_code == 200, r.text
    data: list[dict[str, object]] = r.json()["data"]
    return data


def test_every_page_renders_for_an_admin(any_site: Site) -> None:
    site = any_site
    client = site.as_admin()
    for path in [*PAGES, f"/workloads/{site.demo.ids['nlp-half']}"]:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:500])
        assert "text/html" in r.headers["content-type"]
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert "Traceback" not in r.text


def test_live_refresh_renders_only_the_live_region(ro_site: Site) -> None:
    site = ro_site
    client = site.as_admin()
    r = client.get("/workloads", headers={"HX-Request": "true", "HX-Target": "live"})
    assert r.status_code == 200
    assert r.text.lstrip().startswith('<div id="live"') and "<header" not in r.text


def test_without_a_session_pages_redirect_to_login(ro_site: Site) -> None:
    site = ro_site
    r = site.api.get("/workloads?status=Running", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/login?next=%2Fworkloads%3Fstatus%3DRunning"
    r = site.api.get("/", headers={"HX-Request": "true"}, follow_redirects=False)
    assert r.status_code == 204 and r.headers["HX-Redirect"].startswith("/login")
    assert site.api.get("/login").status_code == 200


def test_session_cookie_is_signed_httponly_and_strict(ro_site: Site) -> None:
    site = ro_site
    client = login(site.app, ADMIN_TOKEN)
    page = client.get("/login")
    nonce = csrf_of(page.text)
    r = client.post("/login", data={"token": ADMIN_TOKEN, "csrf": nonce, "next": "/teams"})
    assert r.status_code == 303 and r.headers["location"] == "/teams"
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie"
                  and v.startswith("apportion_session="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    value = cookie.split(";")[0].split("=", 1)[1].strip('"')
    assert value.count(".") >= 2 and ADMIN_TOKEN not in value  # payload.time.signature
    flipped = value[:-3] + ("A" if value[-3] != "A" else "B") + value[-2:]
    for bad in (value + "x", flipped, "forged"):
        forged = TestClient(site.app, follow_redirects=False)
        forged.cookies.set("apportion_session", bad)
        assert forged.get("/").status_code == 303
    good = TestClient(site.app, follow_redirects=False)
    good.cookies.set("apportion_session", value)
    assert good.get("/").status_code == 200


def test_login_rejects_bad_tokens_agents_and_missing_nonce(site: Site) -> None:
    client = login(site.app, ADMIN_TOKEN)
    client.cookies.clear()
    page = client.get("/login")
    nonce = csrf_of(page.text)
    r = client.post("/login", data={"token": "apt_nosuchtoken1_" + "x" * 32, "csrf": nonce})
    assert r.status_code == 401 and "login failed" in r.text
    r = client.post("/login", data={"token": site.demo.tokens["agent-main"],
                                    "csrf": csrf_of(r.text)})
    assert r.status_code == 401 and "agent tokens cannot log in" in r.text
    fresh = login(site.app, ADMIN_TOKEN)
    fresh.cookies.clear()
    r = fresh.post("/login", data={"token": ADMIN_TOKEN, "csrf": "made-up"})
    assert r.status_code == 403 and "apportion_session" not in r.headers.get("set-cookie", "")


def test_logout_needs_csrf_and_ends_the_session(site: Site) -> None:
    client = site.as_admin()
    page = client.get("/")
    assert client.post("/logout", data={}).status_code == 403
    r = client.post("/logout", data={"csrf": csrf_of(page.text)})
    assert r.status_code == 303 and r.headers["location"] == "/login"
    assert client.get("/").status_code == 303


def test_cancel_needs_the_csrf_token_and_is_audited_like_rest(site: Site) -> None:
    client = site.as_admin()
    wid = site.demo.ids["nlp-half"]
    page = client.get(f"/workloads/{wid}")
    assert f'action="/workloads/{wid}/cancel"' in page.text
    for data in ({}, {"csrf": "0" * 64}):
        r = client.post(f"/workloads/{wid}/cancel", data=data)
        assert r.status_code == 403 and "CSRF" in r.text
    assert site.api.get(f"/v1/workloads/{wid}", headers=bearer(ADMIN_TOKEN)).json()[
        "data"]["status"] == "Running"
    r = client.post(f"/workloads/{wid}/cancel", data={"csrf": csrf_of(page.text)})
    assert r.status_code == 303 and r.headers["location"] == f"/workloads/{wid}"
    w = site.api.get(f"/v1/workloads/{wid}", headers=bearer(ADMIN_TOKEN)).json()["data"]
    assert w["status"] == "Cancelled"
    entries = [a for a in _audit(site, "workload.cancel") if a["object"] == f"workload/{wid}"]
    assert entries and entries[0]["actor"] == "default-admin" and entries[0]["outcome"] == "ok"
    r = client.post(f"/workloads/{wid}/cancel", data={"csrf": csrf_of(page.text)})
    assert r.status_code == 409 and "already Cancelled" in r.text


def test_viewer_sees_no_cancel_and_gets_403_when_posting(site: Site) -> None:
    client = site.as_token("watcher", "viewer")
    wid = site.demo.ids["nlp-half"]
    page = client.get(f"/workloads/{wid}")
    assert page.status_code == 200 and "/cancel" not in page.text
    assert "/cancel" not in client.get("/workloads").text
    r = client.post(f"/workloads/{wid}/cancel", data={"csrf": csrf_of(page.text)})
    assert r.status_code == 403 and "workload.cancel" in r.text
    denied = [a for a in _audit(site, "workload.cancel") if a["outcome"] == "denied"]
    assert denied and denied[0]["actor"] == "watcher"
    r = client.post("/submit", data={"csrf": csrf_of(page.text), "name": "x", "team": "nlp",
                                     "gpus": "1"})
    assert r.status_code == 403


def test_member_sees_only_its_team_and_other_orgs_ids_are_404(site: Site) -> None:
    client = site.as_token("nlp-dev", "member", ["nlp"])
    listing = client.get("/workloads").text
    assert "nlp-half" in listing and "vision-huge" not in listing and "prod-train" not in listing
    assert client.get(f"/workloads/{site.demo.ids['vision-huge']}").status_code == 403
    other = site.api.post("/v1/organizations", headers=bearer(ADMIN_TOKEN),
                          json={"slug": "acme", "name": "Acme"}).json()["data"]
    acme = login(site.app, other["admin_token"]["token"])
    assert acme.get(f"/workloads/{site.demo.ids['nlp-half']}").status_code == 404
    assert acme.get("/pools/main").status_code == 404


def test_submit_form_stores_and_audits_like_rest(site: Site) -> None:
    client = site.as_token("nlp-dev", "member", ["nlp"])
    form = client.get("/submit")
    r = client.post("/submit", data={"csrf": csrf_of(form.text), "name": "from-form",
                                     "team": "nlp", "gpus": "1/4", "pods": "2",
                                     "command": "python train.py --lr 3e-4",
                                     "cpu": "500m", "memory_mib": "4096",
                                     "requeue_on_preemption": "on"})
    assert r.status_code == 303, r.text
    wid = int(r.headers["location"].rsplit("/", 1)[1])
    w = site.api.get(f"/v1/workloads/{wid}", headers=bearer(ADMIN_TOKEN)).json()["data"]
    assert w["submitted_by"] == "nlp-dev" and w["spec"]["gpus"] == 0.25
    assert w["spec"]["pods"] == 2 and w["spec"]["requeue_on_preemption"] is True
    assert w["spec"]["command"] == ["python", "train.py", "--lr", "3e-4"]
    assert w["spec"]["cpu"] == 0.5 and w["spec"]["memory_mib"] == 4096
    assert any(a["object"] == f"workload/{wid}" for a in _audit(site, "workload.submit"))


@pytest.mark.parametrize(("field", "value", "text"), [
    pytest.param("gpus", "lots", "gpus: must be a number", id="gpus-not-a-number"),
    pytest.param("gpus", "0.3", "gpus", id="gpus-not-a-valid-fraction"),
    pytest.param("pods", "two", "pods: must be an integer", id="pods-not-an-integer"),
    pytest.param("team", "research", "leaf teams only", id="team-not-a-leaf"),
    pytest.param("cpu", "-1", "cpu: must be a multiple of 0.001", id="cpu-negative"),
    pytest.param("memory_mib", "lots", "memory_mib: must be MiB or a size such as 64Gi",
                 id="memory-not-a-size"),
])
def test_bad_form_value_shows_its_field_error_and_stores_nothing(
    site: Site, field: str, value: str, text: str
) -> None:
    client = site.as_admin()
    before = site.api.get("/v1/workloads", headers=bearer(ADMIN_TOKEN)).json()["metadata"]
    data = {"csrf": csrf_of(client.get("/submit").text), "name": "bad", "team": "nlp",
            "gpus": "1", field: value}
    r = client.post("/submit", data=data)
    assert r.status_code == 422
    error = r.text.split(f'id="err-{field}">', 1)[1].split("</span>", 1)[0]
    assert text in error, error
    after = site.api.get("/v1/workloads", headers=bearer(ADMIN_TOKEN)).json()["metadata"]
    assert after["total_count"] == before["total_count"]


def test_preview_is_a_dry_run_that_stores_nothing(ro_site: Site) -> None:
    site = ro_site
    client = site.as_admin()
    csrf = csrf_of(client.get("/submit").text)
    r = client.post("/submit/preview", data={"csrf": csrf, "name": "p", "team": "nlp",
                                             "gpus": "2"})
    assert r.status_code == 200
    assert 'data-k="pool">main' in r.text and "start now" in r.text
    r = client.post("/submit/preview", data={"csrf": csrf, "name": "p", "team": "nlp",
                                             "gpus": "x"})
    assert 'id="err-gpus" hx-swap-oob="true">gpus: must be a number' in r.text
    assert client.post("/submit/preview", data={"name": "p", "team": "nlp"}).status_code == 403
    total = site.api.get("/v1/workloads", headers=bearer(ADMIN_TOKEN)).json()["metadata"]
    assert total["total_count"] == 3


def test_hostile_names_are_escaped(site: Site) -> None:
    hostile = "<script>alert(1)</script>"
    site.api.patch("/v1/teams/nlp", headers=bearer(ADMIN_TOKEN), json={"name": hostile})
    r = site.api.post("/v1/workloads", headers=bearer(ADMIN_TOKEN),
                      json={"name": '<img src=x onerror="alert(2)">', "team": "nlp", "gpus": 1})
    wid = r.json()["data"]["id"]
    client = site.as_admin()
    for path in ("/teams", "/workloads", f"/workloads/{wid}", "/events"):
        body = client.get(path).text
        assert "<script>alert" not in body and "<img src=x" not in body, path
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in client.get("/teams").text
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in client.get("/workloads").text


@pytest.mark.parametrize(("path", "text"), [
    pytest.param("/?hours=abc", "hours: 'abc' is not a number", id="hours"),
    pytest.param("/usage?hours=9999", "hours: 9999 is out of range", id="hours-range"),
    pytest.param("/workloads?status=Sleeping", "status: 'Sleeping' is not a status", id="status"),
    pytest.param("/workloads?class=gold", "class: 'gold' is not a class", id="class"),
    pytest.param("/workloads?next_token=zzz", "next_token", id="cursor"),
    pytest.param("/workloads?sort=colour", "sort: 'colour' is not a column", id="sort"),
    pytest.param("/events?workload=abc", "workload: 'abc' is not a workload id", id="event-wl"),
    pytest.param("/workloads/abc", "workload id: 'abc' is not a whole number", id="wl-id"),
    pytest.param("/workloads?limit=500", "limit: 500 is out of range", id="limit"),
    pytest.param("/pools/main/queue?limit=x", "limit: 'x' is not a whole number", id="q-limit"),
])
def test_bad_query_values_get_a_400_page_naming_the_field(ro_site: Site, path: str,
                                                          text: str) -> None:
    r = ro_site.as_admin().get(path)
    assert r.status_code == 400 and text in html.unescape(r.text)
    assert "Traceback" not in r.text


def test_unknown_objects_are_404_pages(ro_site: Site) -> None:
    site = ro_site
    client = site.as_admin()
    for path in ("/workloads/999999", "/pools/nope", "/pools/nope/queue"):
        r = client.get(path)
        assert r.status_code == 404 and "not found" in r.text, path


def test_usage_csv_has_a_row_per_team(ro_site: Site) -> None:
    site = ro_site
    r = site.as_admin().get("/usage.csv?hours=1")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    lines = r.text.strip().splitlines()
    assert lines[0] == ("team,reserved_gpu_hours,elastic_gpu_hours,gpu_hours,preemptions,"
                        "lost_gpu_hours")
    assert {line.split(",")[0] for line in lines[1:]} == {"production", "nlp"}


def test_workload_logs_show_what_the_agent_shipped(site: Site) -> None:
    import base64

    wid = site.demo.ids["nlp-half"]
    agent = bearer(site.demo.tokens["agent-main"])
    text = "epoch 1 loss 0.5 <b>not bold</b>\n"
    r = site.api.post("/v1/agent/logs", headers=agent, json={
        "workload_id": wid, "attempt": 1, "pod": 0, "offset": 0,
        "data": base64.b64encode(text.encode()).decode()})
    assert r.status_code == 200, r.text
    client = site.as_admin()
    page = client.get(f"/workloads/{wid}")
    assert f'hx-get="/workloads/{wid}/logs"' in page.text
    logs = client.get(f"/workloads/{wid}/logs")
    assert logs.status_code == 200
    assert "epoch 1 loss 0.5 &lt;b&gt;not bold&lt;/b&gt;" in logs.text
    other = site.as_token("vision-dev", "member", ["vision"])
    assert other.get(f"/workloads/{wid}/logs").status_code == 403


def _cell(html_text: str, key: str, wid: int | None = None) -> str:
    """The text of the element marked ``data-k=key`` (in the queue row of
    ``wid`` when given), tags stripped."""
    import re

    scope = html_text
    if wid is not None:
        row = re.search(rf'<tr data-id="{wid}">(.*?)</tr>', html_text, re.S)
        assert row, f"no queue row for workload {wid}"
        scope = row.group(1)
    m = re.search(rf'data-k="{key}"[^>]*>(.*?)</(?:dd|p|td)>', scope, re.S)
    assert m, f"no data-k={key!r} on the page"
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()


def test_workload_pages_show_time_limit_hold_dependencies_array_and_estimate(
        site: Site) -> None:
    """Issue 16 on the dashboard: a running job's limit and when it is reached; a
    waiting job's start estimate (what it waits for, on which basis), also as a
    column of the queue; a held dependent; an array member and its siblings."""
    demo = site.demo
    filler = demo.submit("filler", team="nlp", gpus=8, time_limit=1800)
    site.cycle()
    waiter = demo.submit("waiter", team="nlp", gpus=8)
    dependent = demo.submit("dependent", team="nlp", gpus=0.25, hold=True,
                            after=[{"id": filler, "condition": "ok"}])
    r = site.api.post("/v1/workloads", headers=bearer(ADMIN_TOKEN), json={
        "name": "sweep", "team": "nlp", "gpus": 0.25, "array": "0-2%1"})
    assert r.status_code == 201, r.text
    array_id = r.json()["data"]["array_id"]
    site.cycle()
    client = site.as_admin()

    limit = _cell(client.get(f"/workloads/{filler}").text, "time-limit")
    assert limit.startswith("30m 00s, reached ") and "(in " in limit, limit

    page = client.get(f"/workloads/{waiter}").text
    eta = _cell(page, "eta")
    assert eta.startswith("Estimated start: ") and "unknown" not in eta, eta
    assert f"workload {filler} (filler)" in eta and "(time_limit)" in eta, eta
    assert f'href="/workloads/{filler}"' in page
    assert _cell(page, "time-limit") == "none"

    queue = client.get("/pools/main/queue").text
    assert _cell(queue, "eta", waiter).startswith("in "), _cell(queue, "eta", waiter)

    page = client.get(f"/workloads/{dependent}").text
    assert _cell(page, "held").startswith("yes")
    assert _cell(page, "after") == f"workload {filler} (ok)"

    members = site.api.get(f"/v1/workloads?array={array_id}", headers=bearer(ADMIN_TOKEN))
    ids = [w["id"] for w in members.json()["data"]]
    assert len(ids) == 3
    page = client.get(f"/workloads/{ids[1]}").text
    assert _cell(page, "array") == f"array {array_id}, index 1, at most 1 at once"
    listed = client.get(f"/workloads?array={array_id}").text
    assert all(f'href="/workloads/{i}"' in listed for i in ids)
    assert f'href="/workloads/{filler}"' not in listed
    bad = client.get("/workloads?array=x")
    assert bad.status_code == 400 and "array: &#39;x&#39; is not a whole number" in bad.text
