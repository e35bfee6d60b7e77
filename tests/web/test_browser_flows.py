"""What a user does, in headless Chromium against a real server: log in and
out, submit through the form after a dry-run preview and see the workload
appear in other open pages without reloading, watch a preemption arrive on
the victim's page, hit the limits of a role, and get a field error."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.web.demo import bearer
from tests.web.test_browser_views import log_in, shot


def _stays_loaded(page: Any) -> None:
    """Mark the document; a reload or navigation would lose the mark."""
    page.evaluate("window.__notReloaded = true")


def _was_not_reloaded(page: Any) -> None:
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"


def test_login_logout_and_a_bad_token(page: Any, live: Any) -> None:
    page.goto("/workloads?status=Running")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.fill("#token", "apt_nosuchtoken1_" + "x" * 32)
    page.click("button[type=submit]")
    expect(page.locator(".error")).to_contain_text("login failed: unknown token")
    page.fill("#token", live.demo.tokens.get("agent-main", ""))
    page.click("button[type=submit]")
    expect(page.locator(".error")).to_contain_text("agent tokens cannot log in")
    log_in(page, target="/workloads?status=Running")
    expect(page).to_have_url(re.compile(r"/workloads\?status=Running$"))
    expect(page.locator("header .who")).to_contain_text("org_admin")
    page.click("text=Log out")
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/")
    expect(page.locator("h1")).to_have_text("Log in")


def test_submit_with_preview_appears_live_in_table_and_map(page: Any, live: Any) -> None:
    log_in(page, target="/workloads")
    table = page
    pool_map = page.context.new_page()
    pool_map.goto("/pools/main")
    for p in (table, pool_map):
        expect(p.locator("body.is-live")).to_have_count(1)
        _stays_loaded(p)
    form = page.context.new_page()
    form.goto("/submit")
    form.fill("#f-name", "from-the-form")
    form.fill("#f-team", "vision")
    form.fill("#f-gpus", "1/4")
    form.fill("#f-pods", "2")
    form.fill("#f-command", "python train.py --epochs 3")
    form.click("text=Preview (dry run)")
    preview = form.locator("#preview")
    expect(preview.locator("[data-k=pool]")).to_have_text("main")
    expect(preview.locator("[data-k=starts]")).to_have_text("start now")
    expect(preview.locator("[data-k=victims]")).to_have_text("nothing")
    shot(form, "submit")
    before = live.api("GET", "/v1/workloads")
    assert len(before) == 3  # the preview stored nothing
    form.click("button.primary")
    expect(form.locator("h1")).to_contain_text("from-the-form")
    wid = int(re.search(r"/workloads/(\d+)$", form.url).group(1))  # type: ignore[union-attr]
    row = table.locator(f"table.workloads tr[data-id='{wid}']")
    expect(row).to_contain_text("from-the-form")
    expect(row).to_contain_text("1/4 × 2")
    expect(pool_map.locator(f"a.share[data-workload='{wid}']")).to_have_count(2)
    _was_not_reloaded(table)
    _was_not_reloaded(pool_map)


def test_preemption_appears_live_on_the_victims_page(page: Any, live: Any) -> None:
    sweep = live.demo.submit("sweep", team="nlp", gpus=8, priority=50)
    live.wait_for("the sweep to run", lambda: live.api(
        "GET", f"/v1/workloads/{sweep}")["status"] == "Running")
    log_in(page, target=f"/workloads/{sweep}")
    expect(page.locator("h1 .st")).to_have_text("Running")
    expect(page.locator("body.is-live")).to_have_count(1)
    _stays_loaded(page)
    urgent = live.demo.submit("urgent", team="vision", gpus=8, priority=75)
    expect(page.locator("h1 .st")).to_have_text("Preempted")
    link = page.locator(".why .preempted a")
    expect(link).to_have_text(f"workload {urgent}")
    expect(page.locator("ol.timeline")).to_contain_text("Preempted")
    _was_not_reloaded(page)
    link.click()
    expect(page.locator("h1")).to_contain_text("urgent")
    expect(page.locator(".why .victims")).to_contain_text(f"workload {sweep} (sweep, nlp")


def test_viewer_sees_no_cancel_and_is_refused(page: Any, live: Any) -> None:
    token = live.demo.token("watcher", "viewer")
    wid = live.demo.ids["nlp-half"]
    log_in(page, token, target=f"/workloads/{wid}")
    expect(page.locator("h1 .st")).to_have_text("Running")
    expect(page.locator("button", has_text="Cancel")).to_have_count(0)
    page.goto("/workloads")
    expect(page.locator("table.workloads tbody tr")).to_have_count(3)
    expect(page.locator("button", has_text="Cancel")).to_have_count(0)
    csrf = page.locator("form[action='/logout'] input[name=csrf]").get_attribute("value")
    r = page.request.post(f"/workloads/{wid}/cancel", form={"csrf": csrf or ""})
    assert r.status == 403 and "workload.cancel" in r.text()
    assert live.api("GET", f"/v1/workloads/{wid}")["status"] == "Running"


def test_member_of_another_team_sees_only_its_own(page: Any, live: Any) -> None:
    token = live.demo.token("vision-dev", "member", ["vision"])
    log_in(page, token, target="/workloads")
    rows = page.locator("table.workloads tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("vision-huge")
    expect(rows.first.locator("button", has_text="Cancel")).to_have_count(0)  # not its own
    page.goto(f"/workloads/{live.demo.ids['nlp-half']}")
    expect(page.locator("h1")).to_contain_text("403")
    page.goto("/pools/main")
    share = page.locator(".share").first
    expect(share).to_have_attribute("title", re.compile(r"^team "))  # no workload named
    mine = live.demo.submit("mine", bearer(token), team="vision", gpus=1)
    page.goto("/workloads")
    expect(page.locator(f"tr[data-id='{mine}'] button", has_text="Cancel")).to_have_count(1)
    page.locator(f"tr[data-id='{mine}'] button", has_text="Cancel").click()
    expect(page.locator(f"tr[data-id='{mine}'] .st")).to_have_text("Cancelled")


def test_bad_form_value_shows_its_field_error_and_stores_nothing(page: Any, live: Any
                                                                 ) -> None:
    log_in(page, target="/submit")
    page.fill("#f-name", "bad-one")
    page.fill("#f-team", "nlp")
    page.fill("#f-gpus", "0.3")
    page.click("text=Preview (dry run)")
    expect(page.locator("#err-gpus")).to_contain_text("gpus")
    page.click("button.primary")
    expect(page.locator("#err-gpus")).to_contain_text("gpus")
    expect(page.locator("#f-gpus")).to_have_value("0.3")
    expect(page.locator("#f-gpus")).to_have_attribute("aria-invalid", "true")
    assert [w["name"] for w in live.api("GET", "/v1/workloads")] == [
        "prod-train", "nlp-half", "vision-huge"]


def test_submit_with_gpu_types_cpu_and_memory_shows_them_on_the_workload_page(
    page: Any, live: Any
) -> None:
    log_in(page, target="/submit")
    page.fill("#f-name", "typed")
    page.fill("#f-team", "nlp")
    page.fill("#f-gpus", "1")
    page.fill("#f-gpu_type", "v100-32g, v100-16g")
    page.fill("#f-cpu", "8")
    page.fill("#f-memory_mib", "64Gi")
    page.click("text=Preview (dry run)")
    # no node of the demo pool has either type: the preview says so, nothing stored
    expect(page.locator("#preview [data-k=reason]")).to_contain_text("NO_ELIGIBLE_POOL")
    assert [w["name"] for w in live.api("GET", "/v1/workloads")] == [
        "prod-train", "nlp-half", "vision-huge"]
    page.click("button.primary")
    expect(page.locator("h1")).to_contain_text("typed")
    expect(page.locator("[data-k=gpu-type]")).to_have_text("v100-16g or v100-32g")
    expect(page.locator("[data-k=host]")).to_have_text("8 CPU / 64Gi")
    (typed,) = [w for w in live.api("GET", "/v1/workloads") if w["name"] == "typed"]
    assert typed["spec"]["gpu_type"] == ["v100-16g", "v100-32g"]
    assert (typed["spec"]["cpu"], typed["spec"]["memory_mib"]) == (8, 65536)
    page.goto("/submit")
    page.fill("#f-name", "bad-types")
    page.fill("#f-team", "nlp")
    page.fill("#f-gpu_type", "a,,b")
    page.click("button.primary")
    expect(page.locator("#err-gpu_type")).to_contain_text("an empty type name")
    expect(page.locator("#f-gpu_type")).to_have_value("a,,b")
