"""Each view in a real browser shows the right figures for the demo state."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.web.demo import ADMIN_TOKEN


def log_in(page: Any, token: str = ADMIN_TOKEN, target: str = "/") -> None:
    page.goto(target)
    expect(page.locator("h1")).to_have_text("Log in")
    page.fill("#token", token)
    page.click("button[type=submit]")
    expect(page.locator("header .who")).to_be_visible()


def test_overview_shows_pool_figures(page: Any, live: Any) -> None:
    log_in(page)
    card = page.locator(".pool-card[data-pool=main]")
    expect(card.locator("[data-k=total]")).to_have_text("24")
    expect(card.locator("[data-k=healthy]")).to_have_text("24")
    expect(card.locator("[data-k=allocated]")).to_have_text("4 1/2")
    expect(card.locator("[data-k=idle]")).to_have_text("19 1/2")
    expect(card.locator("[data-k=reserved]")).to_have_text("4")
    expect(card.locator("[data-k=elastic]")).to_have_text("1/2")
    expect(card.locator("[data-k=running]")).to_have_text("2")
    expect(card.locator("[data-k=waiting]")).to_have_text("1")
    expect(card.locator(".chart canvas")).to_be_visible()
    page.screenshot(path="/tmp/shot-overview.png")
