"""Where a submission's CPU goes: ``POST /v1/workloads`` under cProfile, in process.

Builds the app on a fresh SQLite database (or ``--database-url``), sets up the
same organization as ``bench/api.py`` (a pool of 64 nodes, four teams), then
sends ``--count`` submissions one after another through the ASGI app (httpx's
ASGI transport: the whole FastAPI stack, without uvicorn's socket and HTTP
parsing) with the scheduler loop off, so only the request path is measured.
FastAPI runs sync routes and dependencies in a thread pool, which cProfile
would not see: here they run in the profiled thread instead (one request at a
time, so nothing else changes). Prints the CPU time per submission and the
functions with the most cumulative and own time; the last line is a JSON
summary.

    python bench/profile_api.py [--count 500] [--top 25] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import httpx
from fastapi.testclient import TestClient

from apportion.api.app import create_app
from apportion.service.control import ControlPlane
from apportion.service.settings import Settings

TOKEN = "apt_profileprof1_" + "p" * 32
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def setup(client: TestClient) -> None:
    def ok(method: str, path: str, headers: dict[str, str] = HEADERS, **kw: Any) -> Any:
        r = client.request(method, f"/v1{path}", headers=headers, **kw)
        r.raise_for_status()
        return r.json()["data"]

    ok("POST", "/pools", json={"name": "main"})
    agent = ok("POST", "/tokens", json={"name": "agent", "role": "agent", "pool": "main"})
    ok("POST", "/agent/heartbeat", {"Authorization": f"Bearer {agent['token']}"},
       json={"nodes": [{"name": f"n{i:03d}", "gpus": 8} for i in range(64)]})
    for slug in ("a", "b", "c", "d"):
        ok("POST", "/teams", json={"slug": slug})


async def _inline(func: Callable[[], Any], *args: Any, **_kw: Any) -> Any:
    """``anyio.to_thread.run_sync`` in the calling thread (so cProfile sees it)."""
    return func(*args)


async def _submit_all(app: Any, count: int, prof: cProfile.Profile) -> float:
    bodies = [json.dumps({"name": f"p-{i}", "team": "abcd"[i % 4], "gpus": 0.25,
                          "priority": i % 90}) for i in range(count)]
    head = {**HEADERS, "Content-Type": "application/json"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        cpu0 = time.process_time()
        prof.enable()
        for body in bodies:
            r = await client.post("/v1/workloads", content=body, headers=head)
            if r.status_code != 201:
                raise RuntimeError(r.text)
        prof.disable()
        return time.process_time() - cpu0


def profile(url: str, count: int) -> tuple[pstats.Stats, float]:
    control = ControlPlane(Settings(database_url=url, bootstrap_token=TOKEN,
                                    run_scheduler=False, rate_limit=0.0))
    control.start()
    try:
        app = create_app(control=control)
        with TestClient(app) as client:
            setup(client)
        prof = cProfile.Profile()
        threaded = anyio.to_thread.run_sync
        anyio.to_thread.run_sync = _inline  # type: ignore[assignment]
        try:
            cpu = asyncio.run(_submit_all(app, count, prof))
        finally:
            anyio.to_thread.run_sync = threaded
    finally:
        control.stop()
    return pstats.Stats(prof), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500, help="submissions (1-20000)")
    parser.add_argument("--top", type=int, default=25, help="functions listed")
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    args = parser.parse_args()
    count = max(1, min(20000, args.count))
    tmp = tempfile.mkdtemp(prefix="apportion-profile-")
    try:
        stats, cpu = profile(args.database_url or f"sqlite:///{tmp}/profile.db", count)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats(key).print_stats(args.top)
        print(f"== by {key}\n" + out.getvalue().split("\n\n", 2)[-1], file=sys.stderr)
    per = cpu * 1000 / count
    print(f"{count} submissions, {per:.2f} ms CPU each (the in-process client's share "
          "included; cProfile slows it)", file=sys.stderr)
    print(json.dumps({"submissions": count, "cpu_ms_per_submit_profiled": round(per, 3)}))


if __name__ == "__main__":
    main()
