"""``apportion up`` end to end: a subprocess on a free port, polled through the API
until workloads run and a preemption has happened, then stopped with Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from apportion.client import ApportionClient
from tests.timing import SLACK, wait_until

ENTRY = "from apportion.cli.main import main; main()"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_banner(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """URL and admin token from the banner (stdout read by a thread, bounded wait)."""
    lines: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    timeout *= SLACK  # a loaded machine (xdist, other runs) starts the stack slower
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        text = "".join(list(lines))
        url = re.search(r"URL\s+(http://\S+)", text)
        token = re.search(r"admin token\s+(apt_\S+)", text)
        if url and token:
            return url.group(1), token.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no banner within {timeout} s: {''.join(lines)!r}")


def _count(client: ApportionClient, status: str) -> int:
    return client.list_workloads(status=status, limit=1).total_count or 0


def test_up_runs_workloads_preempts_and_stops_cleanly(tmp_path: Path) -> None:
    port = _free_port()
    stderr = (tmp_path / "stderr.txt").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "up", "--port", str(port), "--duration", "90",
         "--speed", "20", "--data-dir", str(tmp_path / "up"), "--quiet"],
        stdout=subprocess.PIPE, stderr=stderr, text=True,
    )
    try:
        url, token = _read_banner(proc, timeout=30)
        assert url == f"http://127.0.0.1:{port}"
        with ApportionClient(url, token, timeout=10) as client:
            end = time.monotonic() + 45
            while time.monotonic() < end:
                if _count(client, "Running") and _count(client, "Preempted"):
                    break
                time.sleep(0.25)
            statuses = [(w["id"], w["name"], w["status"], (w.get("reason") or {}).get("code"))
                         for w in client.list_workloads(limit=100).items]
            log = (tmp_path / "up" / "apportion.log").read_text()[-3000:]
            assert _count(client, "Running") > 0, (statuses, log)
            assert _count(client, "Preempted") > 0, (statuses, log)
            _shows_every_behaviour(client, statuses)
            pool = client.get_pool("demo")
            assert pool["capacity"] == 128 and pool["agent"]["status"] == "connected"
        _dashboard_opens(url, token)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        stderr.close()
    assert (tmp_path / "up" / "apportion.db").exists()  # --data-dir is kept
    # agent HTTP calls are logged at debug only (590 KB in 15 minutes at info)
    assert "HTTP Request" not in (tmp_path / "up" / "apportion.log").read_text()


def _shows_every_behaviour(client: ApportionClient, statuses: object) -> None:
    """Within its first minute the demo has shown bursting, reclaim (a whole
    preemption and a shrink), fractions, gangs and required topology, and
    nothing it submitted can never run."""
    def seen() -> dict[str, bool]:
        events = list(client.list_events(type="workload.status", limit=100).items)
        work = list(client.list_workloads(limit=100).items)
        started = [w for w in work if w["started_at"]]
        batches = [w for w in started if w["name"].startswith("production-batch-")]
        return {
            "shrink": any("shrunk" in (e.get("message") or "") for e in events),
            "fractions": any(w["spec"]["gpus"] in (0.25, 0.5) for w in started),
            "gang": any(w["pods"] > 1 and w["spec"].get("gang") for w in started),
            "topology": any((w["spec"].get("topology") or {}).get("mode") == "required"
                            for w in started),
            # production's elastic batches ran past its reservation of 32 GPUs
            "bursting": sum(w["gpus"] or 0 for w in batches) > 32,
        }

    end = time.monotonic() + 60
    while not all((shown := seen()).values()) and time.monotonic() < end:
        time.sleep(0.5)
    assert all(shown.values()), (shown, statuses)
    never = {"RESERVATION_TOO_SMALL", "NO_ELIGIBLE_POOL", "TOPOLOGY_UNSATISFIABLE"}
    work = list(client.list_workloads(limit=100).items)
    assert not [w["name"] for w in work if (w.get("reason") or {}).get("code") in never]


def test_up_sigterm_removes_its_temporary_directory(tmp_path: Path) -> None:
    """The banner says the temporary directory is removed on exit: on SIGTERM too.
    With ``--log-level debug`` the log has the agent's HTTP requests (at info it
    has none: the main test's log)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "up", "--port", "0", "--no-demo", "--log-level", "debug"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        _read_banner(proc, timeout=30)
        made = list(tmp_path.glob("apportion-up-*"))
        assert len(made) == 1
        log = made[0] / "apportion.log"
        wait_until(lambda: "HTTP Request" in log.read_text(), timeout=30,
                   what="an access line at debug")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert list(tmp_path.glob("apportion-up-*")) == []


def _dashboard_opens(url: str, token: str) -> None:
    """The printed URL is the dashboard: it asks to log in, takes the admin token,
    and shows the demo pool."""
    with httpx.Client(base_url=url, timeout=10, follow_redirects=False) as web:
        assert web.get("/").headers["location"] == "/login?next=%2F"
        nonce = re.search(r'name="csrf" value="([^"]+)"', web.get("/login").text)
        assert nonce is not None
        r = web.post("/login", data={"token": token, "csrf": nonce.group(1), "next": "/"})
        assert r.status_code == 303
        page = web.get("/")
        assert page.status_code == 200 and "Pool demo" in page.text


def test_up_stops_by_itself_after_its_duration(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "up", "--port", "0", "--duration", "4", "--no-demo"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "admin token" in done.stdout
    assert time.monotonic() - started < 40


def test_up_prints_workload_names() -> None:
    from apportion.cli.up_cmd import status_line

    event = {"id": 9, "type": "workload.status", "at": "2026-01-01T12:00:03Z", "workload_id": 12,
             "status": "Preempted", "message": "preempted by nlp-train-15 (id 15)",
             "data": {"name": "vision-sweep-12"}}
    line = status_line(event)
    assert line is not None and line.startswith("12:00:03  vision-sweep-12 ")
    assert "workload 12" not in line and line.endswith("- preempted by nlp-train-15 (id 15)")
    assert status_line({**event, "data": {}}) is not None  # older events: the id
    assert "#12" in (status_line({**event, "data": {}}) or "")


class _Recorder:
    """Stands in for the client: records what the demo submits; nothing waits."""

    def __init__(self) -> None:
        self.specs: list[dict[str, object]] = []

    def submit_workload(self, spec: dict[str, object]) -> dict[str, object]:
        self.specs.append(spec)
        return {"id": len(self.specs)}

    def list_workloads(self, **_: object) -> object:
        return SimpleNamespace(items=[], total_count=0)


class _NoWait:
    """A stop event whose waits return at once (the opening's pauses cost nothing)."""

    def wait(self, timeout: float | None = None) -> bool:
        return False

    def is_set(self) -> bool:
        return False


@pytest.mark.parametrize("shape", ["local", "4x4x8", "2x2x8", "1x4x8", "2x4x4",
                                   # a rack of one node: the opening's rack gang asked 2
                                   "16x1x8",
                                   # one 8-GPU node: production's cap (3) is under a node
                                   "1x1x8"])
def test_every_demo_workload_fits_its_reservation_cap_and_rack(shape: str) -> None:
    """The demo stream stalled with vision-gang-* jobs (3 x 8 GPUs) that never fit
    vision's reservation of 16: every template must be able to run."""
    from apportion.agent.demo import DemoShape, DemoStream, demo_reservations
    from apportion.agent.inventory import parse_shape

    if shape == "local":  # one 8-GPU machine in rack r1, the demo in 1-GPU units
        racks, per_rack, node_gpus, rack_gpus = 1, 1, 1, 8
    else:
        racks, per_rack, node_gpus = parse_shape(shape)
        rack_gpus = per_rack * node_gpus
    capacity = racks * rack_gpus
    recorder = _Recorder()
    stream = DemoStream(recorder, DemoShape(capacity, node_gpus, shape == "local",
                                            rack_gpus=None if shape == "local" else rack_gpus),
                        seed=3)  # type: ignore[arg-type]
    stream._opening(_NoWait())  # type: ignore[arg-type]
    for _ in range(500):
        stream._one_more()
    reservations = demo_reservations(capacity)
    kinds = set()
    for spec in recorder.specs:
        gpus, pods = float(spec["gpus"]), int(spec["pods"])  # type: ignore[arg-type]
        total, team = gpus * pods, str(spec["team"])
        assert gpus <= node_gpus, spec
        if spec["class"] == "reserved":
            assert total <= reservations[team], (spec, reservations)
        else:
            assert total <= min(capacity, stream.cap(team)), spec
        if (spec.get("topology") or {}).get("mode") == "required":  # type: ignore[union-attr]
            assert total <= rack_gpus, spec
        kinds.add((spec["class"], gpus < 1, pods > 1))
    if capacity >= 64 or shape == "local":
        # reserved and elastic work, fractions and multi-pod work all appear
        assert {k[0] for k in kinds} == {"reserved", "elastic"}
        assert any(k[1] for k in kinds) and any(k[2] for k in kinds)
