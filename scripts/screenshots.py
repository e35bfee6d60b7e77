"""Screenshots of every dashboard view for docs/images/ (1280 px wide PNGs).

Starts ``apportion up`` (sim executor, the demo organization and its stream
of workloads that burst and get preempted) on a free port, waits until work
runs, waits and has been preempted, then opens each view in headless Debian
chromium (the browser the tests drive) as the admin and saves it.

    python scripts/screenshots.py [--out docs/images] [--settle 40]
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_up(data: Path) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from apportion.cli.main import main; main()", "up",
         "--port", str(free_port()), "--speed", "20", "--data-dir", str(data), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True).start()
    end = time.monotonic() + 60
    while time.monotonic() < end:
        text = "".join(lines)
        url, token = re.search(r"URL\s+(http://\S+)", text), re.search(r"admin token\s+(\S+)",
                                                                         text)
        if url and token:
            return proc, url.group(1), token.group(1)
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("apportion up printed no banner within 60 s")


def settle(url: str, token: str, seconds: float) -> int:
    """Wait until something was preempted and work waits (at most ``seconds``);
    returns a preempted workload's id (or a running one's)."""
    head = {"Authorization": f"Bearer {token}"}
    end = time.monotonic() + seconds
    with httpx.Client(base_url=url, headers=head, timeout=10) as api:
        while True:
            def ids(status: str) -> list[int]:
                data = api.get(f"/v1/workloads?status={status}&limit=100").json()["data"]
                return [w["id"] for w in data]
            preempted, waiting = ids("Preempted"), ids("Queued") + ids("Pending")
            if (preempted and waiting) or time.monotonic() > end:
                return (preempted or ids("Running") or [1])[-1]
            time.sleep(1)


def shoot(page: Page, out: Path, name: str, path: str) -> None:
    page.goto(path)
    expect(page.locator("body.is-live")).to_have_count(1, timeout=15_000)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / f"{name}.png"))
    print(f"  {name}: {path}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    ap.add_argument("--settle", type=float, default=40.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="apportion-shots-") as tmp:
        proc, url, token = start_up(Path(tmp) / "up")
        try:
            victim = settle(url, token, args.settle)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                            args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 800},
                                        base_url=url)
                page.goto("/login")
                page.fill("#token", token)
                page.click("button[type=submit]")
                for name, path in (("overview", "/?hours=1"), ("teams", "/teams"),
                                   ("workloads", "/workloads?status=Running,Queued,Preempted"),
                                   ("workload", f"/workloads/{victim}"),
                                   ("pool-map", "/pools/demo"), ("queue", "/pools/demo/queue"),
                                   ("events", "/events?type=workload.status"),
                                   ("usage", "/usage?hours=1")):
                    shoot(page, args.out, name, path)
                page.goto("/submit?name=sweep&team=nlp&gpus=1/2&pods=4&priority=40")
                page.click("text=Preview (dry run)")
                expect(page.locator("#preview [data-k=pool]")).to_be_visible()
                page.screenshot(path=str(args.out / "submit.png"))
                print("  submit: /submit with its preview", flush=True)
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
