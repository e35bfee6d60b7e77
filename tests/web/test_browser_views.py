"""Each view, in headless Chromium against a real server, shows the right
figures for the demo state (see demo.py). Nothing here changes the state, so
the tests share one server. With APPORTION_SCREENSHOTS=<dir>
the tests also save a screenshot of each view there (scripts/screenshots)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.web.demo import ADMIN_TOKEN


def log_in(page: Any, token: str = ADMIN_TOKEN, target: str = "/") -> None:
    page.goto(target)
    expect(page.locator("h1")).to_have_text("Log in")
    page.fill("#token", token)
    page.click("button[type=submit]")
    expect(page.locator("header .who")).to_be_visible()


def shot(page: Any, name: str) -> None:
    """Save a 1280 px wide screenshot when APPORTION_SCREENSHOTS names a directory."""
    where = os.environ.get("APPORTION_SCREENSHOTS")
    if where:
        expect(page.locator("body.is-live")).to_have_count(1)
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"{name}.png"))


def test_overview_shows_pool_figures_and_chart(page: Any, shared: Any) -> None:
    log_in(page)
    card = page.locator(".pool-card[data-pool=main]")
    for key, text in (("total", "24"), ("healthy", "24"), ("allocated", "4 1/2"),
                      ("idle", "19 1/2"), ("reserved", "4"), ("elastic", "1/2"),
                      ("running", "2"), ("waiting", "1"), ("preempted", "0")):
        expect(card.locator(f"[data-k={key}]")).to_have_text(text)
    expect(card.locator(".reasons")).to_contain_text("GANG_WAITING")
    expect(card.locator(".chart canvas").first).to_be_visible()
    expect(card.locator(".u-legend")).to_contain_text("production")
    expect(card).to_contain_text("1 cordoned")
    shot(page, "overview")


def test_teams_tree_figures_and_collapse(page: Any, shared: Any) -> None:
    log_in(page, target="/teams")
    prod = page.locator("tr[data-team=production][data-pool=main]")
    expect(prod.locator("[data-k=reservation]")).to_have_text("8")
    expect(prod.locator("[data-k=reserved_in_use]")).to_have_text("4")
    expect(prod.locator("[data-k=flags]")).to_have_text("")
    vision = page.locator("tr[data-team=vision][data-pool=main]")
    expect(vision.locator("[data-k=entitlement]")).to_have_text("19 1/2")
    expect(vision.locator("[data-k=flags]")).to_contain_text("owed 19 1/2")
    nlp = page.locator("tr[data-team=nlp][data-pool=main]")
    expect(nlp.locator("[data-k=elastic_in_use]")).to_have_text("1/2")
    expect(nlp.locator("[data-k=flags]")).to_contain_text("borrowing 1/2")
    research = page.locator("tr[data-team=research][data-pool=main]")
    expect(research.locator("[data-k=elastic_in_use]")).to_have_text("1/2")
    shot(page, "teams")
    research.locator("a.toggle").click()
    expect(page).to_have_url(re.compile(r"collapsed=research"))
    expect(page.locator("tr[data-team=nlp]")).to_have_count(0)
    expect(page.locator("tr[data-team=research]")).to_contain_text("2 child teams hidden")
    page.locator("tr[data-team=research] a.toggle").click()
    expect(page.locator("tr[data-team=nlp]")).to_have_count(1)


def test_workloads_table_filters_live_in_the_url(page: Any, shared: Any) -> None:
    log_in(page, target="/workloads")
    rows = page.locator("table.workloads tbody tr")
    expect(rows).to_have_count(3)
    half = page.locator(f"tr[data-id='{shared.demo.ids['nlp-half']}']")
    expect(half).to_contain_text("1/2")
    expect(half).to_contain_text("1 / 1")
    expect(half.locator("button", has_text="Cancel")).to_be_visible()
    huge = page.locator(f"tr[data-id='{shared.demo.ids['vision-huge']}']")
    expect(huge).to_contain_text("8 × 3")
    expect(huge).to_contain_text("0 / 3")
    expect(huge).to_contain_text("GANG_WAITING")
    shot(page, "workloads")
    page.check("input[name=status][value=Running]")
    page.click("form.wl-filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"status=Running"))
    expect(rows).to_have_count(2)
    page.goto(page.url + "&class=reserved")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("prod-train")


def test_workload_page_says_why_it_waits(page: Any, shared: Any) -> None:
    wid = shared.demo.ids["vision-huge"]
    log_in(page, target=f"/workloads/{wid}")
    expect(page.locator("h1")).to_contain_text("vision-huge")
    expect(page.locator("h1 .st")).to_have_text("Queued")
    expect(page.locator("[data-k=why]")).to_contain_text("GANG_WAITING")
    expect(page.locator(".why table")).to_contain_text("vision")
    expect(page.locator("ol.timeline")).to_contain_text("Queued")
    expect(page.locator("pre.spec")).to_contain_text('"pods": 3')
    shot(page, "workload")
    page.goto(f"/workloads/{shared.demo.ids['nlp-half']}")
    expect(page.locator("h1 .st")).to_have_text("Running")
    placement = page.locator("section.card", has=page.locator("h2", has_text="Placement"))
    expect(placement.locator("tbody tr")).to_have_count(1)
    expect(placement.locator("tbody tr")).to_contain_text(re.compile(r"n\d\s*GPU \d: 1/2"))


def test_pool_map_shows_devices_shares_and_cordoned_nodes(page: Any, shared: Any) -> None:
    log_in(page, target="/pools/main")
    expect(page.locator(".domain h2")).to_have_text(["rack=r1 2 nodes", "rack=r2 1 nodes"])
    expect(page.locator(".node[data-node=n3] .nstate")).to_have_text("CORDONED")
    expect(page.locator(".dev")).to_have_count(24)
    prod = page.locator(f"a.share[data-workload='{shared.demo.ids['prod-train']}']")
    expect(prod).to_have_count(4)
    half = page.locator(f"a.share[data-workload='{shared.demo.ids['nlp-half']}']")
    expect(half).to_have_attribute("title", re.compile(r"nlp-half · team nlp · pod 0 · 1/2 GPU"))
    shot(page, "pool-map")
    half.click()
    expect(page).to_have_url(re.compile(rf"/workloads/{shared.demo.ids['nlp-half']}$"))


def test_queue_lists_waiting_work_in_order(page: Any, shared: Any) -> None:
    log_in(page, target="/queue")
    expect(page).to_have_url(re.compile(r"/pools/main/queue$"))
    rows = page.locator("table.queue tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("1")
    expect(rows.first).to_contain_text("vision-huge")
    expect(rows.first).to_contain_text("GANG_WAITING")
    shot(page, "queue")


def test_events_feed_filters(page: Any, shared: Any) -> None:
    log_in(page, target="/events")
    expect(page.locator("table.events")).to_contain_text("node n3 cordoned")
    shot(page, "events")
    page.fill("input[name=team]", "nlp")
    page.click("form.filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"team=nlp"))
    statuses = page.locator("table.events tbody tr .st")
    expect(statuses).to_have_text(["Running", "Starting", "Queued", "Pending"])


def test_usage_table_chart_and_csv(page: Any, shared: Any) -> None:
    log_in(page, target="/usage?hours=1")
    rows = page.locator("table.usage tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("data-team", "production")
    expect(page.locator(".chart canvas").first).to_be_visible()
    shot(page, "usage")
    with page.expect_download() as info:
        page.locator("a", has_text="Download CSV").click()
    text = Path(info.value.path()).read_text()
    assert text.splitlines()[0].startswith("team,reserved_gpu_hours")
    assert {line.split(",")[0] for line in text.strip().splitlines()[1:]} == {"production",
                                                                              "nlp"}
