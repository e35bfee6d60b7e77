"""Soak (issue 18, part 5): an `apportion server` process (SQLite) and a sim
agent (in this process) under a steady load — a workload submitted every
``1 / RATE`` s, each running ``DURATION`` s — for ``SOAK`` seconds (60 in CI,
600 with ``APPORTION_CHAOS_LONG=1``). Every ``SAMPLE`` s the test reads the
server's resident memory (``VmRSS`` of /proc/PID/status), its open file
descriptors (/proc/PID/fd), the queue depth (Pending + Queued through the
API) and the mean scheduling cycle over the interval (the
``apportion_cycle_duration_seconds`` histogram of /metrics). After a warm-up
it fits a least-squares line to each series and asserts the slope stays under
a bound chosen from measurements with a wide margin (see ``BOUNDS``); the
measured slopes are printed for docs/reliability.md. The premise: the agent
really completed work at the submission rate all along.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from apportion.agent.executors.sim import SimExecutor
from apportion.agent.loop import Agent, AgentOptions
from apportion.agent.model import NodeInfo
from apportion.agent.state import StateFile
from apportion.client import ApportionClient
from tests.api.test_processes import TOKEN, _port, server
from tests.chaos.figures import record
from tests.timing import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

#: seconds of load (the test's input), and the part of it that is warm-up
SOAK = 600.0 if os.environ.get("APPORTION_CHAOS_LONG") else 60.0
WARM_UP = SOAK / 4
#: seconds between two samples
SAMPLE = 2.0
#: submissions per second and each workload's run time (s): ~RATE x DURATION run at once
RATE = 5.0
DURATION = 2
NODES = [NodeInfo(f"n{i}", 8, "h100", 81920, {"rack": "r1"}) for i in (1, 2)]

#: upper bounds on the least-squares slope of each series after the warm-up, per
#: minute, each well above what was measured (SQLite, 2 cores at load 5-6):
#: CI (60 s): RSS +3.4 MiB/min (+2.1 at 4/s of 1 s; a 45 s window still sees the allocator
#: settle: 106-109 MiB), fds 0 and +2.7 (17, or 17 -> 19 once), queue 0 to +0.3
#: (0-2 waiting), cycle -0.3 to +5.1 ms/min (means 4-23 ms); long (600 s): RSS +0.6 MiB/min
#: (112-117 MiB), fds 0 (19), queue -0.02 (0-3), cycle -0.24 ms/min (3-35 ms).
BOUNDS = {
    "rss_mib": 3.0 if SOAK >= 600 else 8.0,  # MiB of resident memory per minute
    # open file descriptors per minute: in a 45 s window one step of 17 -> 19
    # (the long run holds 19, flat, after its warm-up) fits a slope of +2.7; a
    # leak of one fd per request or cycle would be hundreds per minute
    "fds": 1.0 if SOAK >= 600 else 10.0,
    "queue": 10.0,  # Pending + Queued workloads per minute
    "cycle_ms": 20.0,  # ms of mean cycle duration per minute
}


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def cycle_totals(admin: ApportionClient) -> tuple[float, float]:
    """(sum of seconds, count) of the server's cycle duration histogram."""
    total = count = 0.0
    for line in admin.metrics().splitlines():
        if line.startswith("apportion_cycle_duration_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("apportion_cycle_duration_seconds_count"):
            count = float(line.split()[-1])
    return total, count


@dataclass
class Load:
    submitted: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _submitter(admin_url: str, load: Load, stop: threading.Event) -> None:
    """One submission every 1 / RATE s, on a fixed schedule (not after each answer)."""
    c = ApportionClient(admin_url, TOKEN, timeout=30.0)
    try:
        start = time.monotonic()
        i = 0
        while not stop.is_set():
            try:
                w = c.submit_workload({"name": f"s{i}", "team": "t", "gpus": 1,
                                       "duration": DURATION})
                load.submitted.append(int(w["id"]))
            except Exception as err:  # recorded; asserted empty below
                load.errors.append(repr(err))
            i += 1
            stop.wait(max(0.0, start + i / RATE - time.monotonic()))
    finally:
        c.close()


@pytest.mark.timeout(int(SOAK) + 240)  # the long soak outlives the suite's 300 s
def test_a_steady_load_leaks_nothing(tmp_path: Path) -> None:
    port = _port()
    url = f"http://127.0.0.1:{port}"
    with server(f"sqlite:///{tmp_path}/soak.db", port) as proc:
        admin = ApportionClient(url, TOKEN, timeout=30.0)
        admin.create_pool("main")
        admin.create_team("t")
        token = admin.create_token("agent-main", "agent", pool="main")["token"]
        api = ApportionClient(url, token, timeout=30.0)
        sim = SimExecutor(NODES)
        agent = Agent(api, sim, StateFile(tmp_path / "agent-main.json"), "main",
                      AgentOptions(poll_interval=0.2, heartbeat_interval=2.0, max_backoff=0.5))
        stop_agent, stop_load = threading.Event(), threading.Event()
        agent_thread = threading.Thread(target=agent.run, args=(stop_agent,), daemon=True)
        agent_thread.start()
        load = Load()
        feeder = threading.Thread(target=_submitter, args=(url, load, stop_load), daemon=True)
        try:
            wait_until(lambda: admin.get_pool("main")["capacity"] == 16, timeout=20,
                       what="the agent's nodes registered")
            feeder.start()
            began = time.monotonic()
            samples: dict[str, list[float]] = {k: [] for k in ("t", *BOUNDS)}
            last = cycle_totals(admin)
            next_at = began + SAMPLE
            while time.monotonic() - began < SOAK:
                time.sleep(max(0.0, next_at - time.monotonic()))  # the sampling period
                next_at += SAMPLE
                now = cycle_totals(admin)
                cycles = now[1] - last[1]
                assert cycles > 0, "no scheduling cycle in a sampling period"
                samples["t"].append(time.monotonic() - began)
                samples["rss_mib"].append(rss_mib(proc.pid))
                samples["fds"].append(float(len(os.listdir(f"/proc/{proc.pid}/fd"))))
                depth = admin.list_workloads(status=["Pending", "Queued"], limit=1).total_count
                samples["queue"].append(float(depth or 0))
                samples["cycle_ms"].append(1000 * (now[0] - last[0]) / cycles)
                last = now
        finally:
            stop_load.set()
            feeder.join(30)
        completed = admin.list_workloads(status="Completed", limit=1).total_count or 0
        submitted = len(load.submitted)
        stop_agent.set()
        agent_thread.join(15)
        api.close()
        admin.close()
    assert not load.errors, load.errors[:5]
    # the premise: work really flowed at the submission rate all along
    assert submitted >= 0.8 * RATE * SOAK, submitted
    assert completed >= submitted - 2 * RATE * (DURATION + 5), (completed, submitted)
    keep = [i for i, t in enumerate(samples["t"]) if t >= WARM_UP]
    assert len(keep) >= 10, "too few samples after the warm-up"
    xs = [samples["t"][i] / 60 for i in keep]  # minutes
    slopes = {k: slope(xs, [samples[k][i] for i in keep]) for k in BOUNDS}
    print(f"\nsoak: {SOAK:g} s at {RATE:g} submissions/s ({DURATION} s each), {submitted} "
          f"submitted, {completed} completed, {len(keep)} samples after a {WARM_UP:g} s "
          "warm-up; slopes per minute (bound): "
          + ", ".join(f"{k} {slopes[k]:+.3f} ({BOUNDS[k]:g})" for k in BOUNDS)
          + "; ranges: " + ", ".join(
              f"{k} {min(samples[k][i] for i in keep):.1f}-{max(samples[k][i] for i in keep):.1f}"
              for k in BOUNDS))
    record("5. soak", "sqlite",
           f"{SOAK:g} s at {RATE:g} submissions/s, {submitted} submitted, {completed} "
           "completed; slopes per minute: " + ", ".join(
               f"{k} {slopes[k]:+.2f} (bound {BOUNDS[k]:g})" for k in BOUNDS),
           submitted=submitted, completed=completed, **{f"slope_{k}": v for k, v in slopes.items()})
    over = {k: round(v, 3) for k, v in slopes.items() if v > BOUNDS[k]}
    assert not over, f"growing: {over} (bounds per minute: {BOUNDS})"
