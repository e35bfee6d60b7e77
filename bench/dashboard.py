"""Render time of each dashboard page, and how fast a change reaches an open page.

Fills an SQLite store through the service layer: ``--teams`` teams (a
two-level tree), one pool of ``--nodes`` nodes x 8 GPUs (zones and racks),
``--workloads`` workloads of 1/4 to 8 GPUs (more than the pool holds, so
some wait), then runs a scheduling cycle and has the agent report the
started ones Running. Each page is then fetched as a logged-in admin through
the app in this process (FastAPI TestClient, no network), ``--runs`` times;
the figure is the median. The baseline is the REST call a page's table is
closest to, ``GET /v1/workloads?limit=50``, measured the same way in the
same process: the machine is shared, so ``ratio`` (page / baseline) is the
comparable figure.

Live update: with the server also on a real socket, a browser-like client
holds ``/ui/live`` open; a workload is submitted; ``live_update_ms`` is the
time until the ``changed`` signal arrives (median of ``--live-runs``; it
includes the server's debounce of 0.3 s).

    python bench/dashboard.py [--workloads 5000 --teams 200 --nodes 1000] [--quick]

Prints one JSON object as its last line: ``pages`` (per view: median_ms,
ratio), ``baseline_ms``, ``live_update_ms``, ``sizes``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from apportion.api.app import create_app  # noqa: E402
from apportion.service import workloads as wl_svc  # noqa: E402
from apportion.service.commands import Result, execute  # noqa: E402
from apportion.service.context import Ctx  # noqa: E402
from apportion.service.control import ControlPlane  # noqa: E402
from apportion.service.settings import Settings  # noqa: E402

TOKEN = "apt_dashbench001_" + "d" * 32
HEAD = {"Authorization": f"Bearer {TOKEN}"}
SIZES = [0.25, 0.5, 1, 1, 2, 2, 4, 8]


def api(client: TestClient, method: str, path: str, headers: dict[str, str] | None = None,
        json_body: Any = None) -> Any:
    r = client.request(method, path, headers=headers or HEAD, json=json_body)
    if r.status_code >= 300:
        raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:300]}")
    return r.json()["data"]


def fill(client: TestClient, cp: ControlPlane, teams: int, nodes: int, workloads: int,
         rng: random.Random) -> dict[str, Any]:
    """The organization, the pool and its nodes, the workloads; one cycle; reports."""
    api(client, "POST", "/v1/pools", json_body={"name": "main", "topology": ["zone", "rack"],
                                                "preemption_grace": 0})
    agent = {"Authorization": "Bearer " + api(client, "POST", "/v1/tokens", json_body={
        "name": "agent-main", "role": "agent", "pool": "main"})["token"]}
    api(client, "POST", "/v1/agent/heartbeat", agent, {"nodes": [
        {"name": f"n{i:04d}", "gpus": 8,
         "labels": {"zone": f"z{i % 2}", "rack": f"r{i // 40:02d}"}} for i in range(nodes)]})
    tops = max(1, teams // 10)
    leaves: list[str] = []
    for t in range(tops):
        api(client, "POST", "/v1/teams", json_body={"slug": f"org{t:02d}"})
        for c in range(teams // tops - 1):
            slug = f"org{t:02d}-team{c}"
            api(client, "POST", "/v1/teams", json_body={"slug": slug, "parent": f"org{t:02d}"})
            leaves.append(slug)
    for t in range(tops):  # a third of the leaves reserve 8 GPUs, their parents the sum
        reserving = [s for s in leaves if s.startswith(f"org{t:02d}-")][:3]
        api(client, "PUT", f"/v1/reservations/org{t:02d}/main",
            json_body={"gpus": 8 * len(reserving)})
        for slug in reserving:
            api(client, "PUT", f"/v1/reservations/{slug}/main", json_body={"gpus": 8})
    ctx = Ctx(cp.tokens.verify(TOKEN), "bench")
    bodies = [{"name": f"w{i}", "team": rng.choice(leaves), "gpus": rng.choice(SIZES),
               "pods": rng.choice((1, 1, 1, 2)),
               "class": "reserved" if i % 10 == 0 else "elastic"} for i in range(workloads)]
    for start in range(0, workloads, 500):
        chunk = bodies[start:start + 500]
        execute(cp.db, ctx, None, lambda s, c=chunk: Result(201, [
            wl_svc.submit(s, ctx, wl_svc.parse_spec(b)) for b in c]))
    cp.loop.tick()
    cursor, reported = 0, 0
    while True:
        page = client.get(f"/v1/agent/decisions?limit=100&cursor={cursor}", headers=agent).json()
        if not page["data"]:
            break
        for d in page["data"]:
            if d["kind"] == "start":
                api(client, "POST", "/v1/agent/reports", agent, {
                    "workload_id": d["workload_id"], "attempt": d["attempt"],
                    "run_id": d["run_id"], "status": "running"})
                reported += 1
        cursor = int(page["metadata"]["next_token"])
    return {"leaves": leaves, "running": reported}


def login(app: Any) -> TestClient:
    client = TestClient(app, follow_redirects=False)
    nonce = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert nonce is not None
    r = client.post("/login", data={"token": TOKEN, "csrf": nonce.group(1), "next": "/"})
    assert r.status_code == 303, r.text
    return client


def median_ms(fn: Any, runs: int) -> tuple[float, float]:
    """(median of ``runs`` renders, the first render: templates compiled, caches cold)."""
    started = time.perf_counter()
    fn()
    first = round((time.perf_counter() - started) * 1000, 1)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1), first


def pages(web: TestClient, wid: int, waiting: int) -> dict[str, Any]:
    csrf = re.search(r'name="csrf" value="([^"]+)"', web.get("/submit").text)
    assert csrf is not None
    body = {"csrf": csrf.group(1), "name": "preview", "team": "org00-team0", "gpus": "1"}

    def get(path: str) -> Any:
        def fn() -> None:
            r = web.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:300])
        return fn

    def post_preview() -> None:
        r = web.post("/submit/preview", data=body)
        assert r.status_code == 200, r.text[:300]

    return {"overview": get("/"), "teams": get("/teams"), "workloads": get("/workloads"),
            "workload": get(f"/workloads/{wid}"), "waiting_workload": get(f"/workloads/{waiting}"),
            "pool_map": get("/pools/main"), "queue": get("/pools/main/queue"),
            "submit": get("/submit"), "dry_run_preview": post_preview,
            "events": get("/events"), "usage": get("/usage")}


def live_update_ms(app: Any, web: TestClient, api_client: TestClient, runs: int) -> float:
    """Median time from a submission to the ``changed`` signal on an open /ui/live."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    cookies = {"apportion_session": web.cookies.get("apportion_session") or ""}
    times = []
    try:
        with httpx.Client(base_url=url, cookies=cookies, timeout=30) as browser:
            for i in range(runs):
                with browser.stream("GET", "/ui/live") as stream:
                    lines = stream.iter_lines()
                    next(lines)  # "retry: ..." once the stream is open
                    time.sleep(0.3)  # past the first poll
                    started = time.perf_counter()
                    api(api_client, "POST", "/v1/workloads",
                        json_body={"name": f"live-{i}", "team": "org00-team0", "gpus": 1})
                    for line in lines:
                        if line.startswith("event: changed"):
                            break
                    times.append((time.perf_counter() - started) * 1000)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    return round(statistics.median(times), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", type=int, default=5000)
    ap.add_argument("--teams", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--live-runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes: checks the script")
    args = ap.parse_args()
    if args.quick:
        args.workloads, args.teams, args.nodes, args.runs, args.live_runs = 300, 20, 40, 3, 2
    rng = random.Random(13)
    with tempfile.TemporaryDirectory(prefix="apportion-dash-bench-") as tmp:
        cp = ControlPlane(Settings(database_url=f"sqlite:///{tmp}/bench.db",
                                   bootstrap_token=TOKEN, run_scheduler=False, rate_limit=0.0))
        cp.start()
        try:
            app = create_app(control=cp)
            with TestClient(app) as client:
                started = time.perf_counter()
                info = fill(client, cp, args.teams, args.nodes, args.workloads, rng)
                fill_s = round(time.perf_counter() - started, 1)
                running = api(client, "GET", "/v1/workloads?status=Running&limit=1")
                waiting = api(client, "GET", "/v1/workloads?status=Queued&limit=1")
                web = login(app)
                baseline, _ = median_ms(lambda: api(client, "GET", "/v1/workloads?limit=50"),
                                        args.runs)
                figures = {}
                views = pages(web, running[0]["id"], waiting[0]["id"])
                views["rest_dry_run"] = lambda: api(client, "POST", "/v1/workloads/dry-run",
                                                    json_body={"name": "preview", "gpus": 1,
                                                               "team": "org00-team0"})
                for name, fn in views.items():
                    # a dry run is a whole scheduling cycle: fewer runs at full size
                    runs = args.runs if "dry_run" not in name else min(args.runs, 2)
                    ms, first = median_ms(fn, runs)
                    figures[name] = {"median_ms": ms, "ratio": round(ms / baseline, 1),
                                     "first_ms": first}
                    print(f"{name:18} {ms:8.1f} ms  ({figures[name]['ratio']}x the API call; "
                          f"first {first} ms)", flush=True)
                live = live_update_ms(app, web, client, args.live_runs)
        finally:
            cp.stop()
    slowest = max((k for k in figures if k != "rest_dry_run"),
                  key=lambda k: figures[k]["median_ms"])
    print(json.dumps({
        "pages": figures, "baseline_ms": baseline, "baseline": "GET /v1/workloads?limit=50",
        "slowest": slowest, "slowest_ms": figures[slowest]["median_ms"],
        "live_update_ms": live, "fill_s": fill_s,
        "sizes": {"workloads": args.workloads, "teams": args.teams, "nodes": args.nodes,
                  "running": info["running"], "runs": args.runs},
    }))


if __name__ == "__main__":
    main()
