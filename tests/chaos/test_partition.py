"""Agent partition (issue 18, part 4): a real agent (sim executor, in this
process) talks to a real `apportion server` process through a TCP proxy on
127.0.0.1 that the test controls. Round after round work runs and completes;
then the proxy cuts the agent off for longer than the server's agent silence
timeout (``APPORTION_AGENT_TIMEOUT``, 2 s here) while, on the agent's side,
runs go on and complete, and on the server's side the scheduler preempts
(inside the silence window the nodes are still ready), a workload is
cancelled and new work arrives; then traffic flows again. Two ways of being
cut off alternate: ``reset`` (every connection, open or new, is reset, as a
refused or broken link) and ``blackhole`` (nothing passes either way and
nothing is closed: requests hang, and resume when the link heals, as TCP
does). Every other round the server is SIGKILLed and restarted during the
partition. Afterwards:

- no workload started twice: each (workload, attempt) has one start decision,
  a new attempt is decided only after a stop of the previous one, the executor
  started every run id once, and its journal never shows two attempts of one
  workload alive at once nor a device holding more than a whole device;
- none lost: every acknowledged workload ends Completed (the one cancelled
  during the partition: Cancelled);
- every attempt the control plane ended while the agent was cut off (a stop
  decision it had not fetched) and that the agent was running is reported by
  the agent after the partition, refused, and audited
  (``GET /v1/audit?action=agent.report&outcome=ignored``);
- the nodes went ``unknown`` during the partition (the premise) and are
  ``ready`` again after it.

CI runs 2 rounds per backend (each backend cuts the link both ways and is
restarted once; together they run all four kinds); ``APPORTION_CHAOS_LONG=1``
runs 12 (every kind three times) on each. The figures
are printed for docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from apportion.agent.executors.sim import SimExecutor
from apportion.agent.loop import Agent, AgentOptions
from apportion.agent.model import NodeInfo, Observed, Run, RunStatus
from apportion.agent.state import StateFile
from apportion.client import ApportionClient
from tests.api.test_processes import TOKEN, _port, server
from tests.chaos.figures import record
from tests.netutil import bound_socket, port_of
from tests.pgfixture import backend_url, pg_server  # noqa: F401
from tests.timing import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

#: the server's agent silence timeout (APPORTION_AGENT_TIMEOUT), seconds
AGENT_TIMEOUT = 2.0
#: how long each partition lasts, seconds: the test's input (well past the
#: silence timeout plus the sweep's period, so the nodes go unknown)
PARTITION = 4.0
#: the pool's preemption grace and the sim's stop delay, seconds
GRACE = 1
IS_LONG = bool(os.environ.get("APPORTION_CHAOS_LONG"))
ROUNDS = 12 if IS_LONG else 2
#: a round: (how the link is cut, whether the server is restarted meanwhile)
KINDS = [("reset", False), ("blackhole", False), ("reset", True), ("blackhole", True)]
#: CI's two rounds per backend: each backend cuts the link both ways and is
#: restarted once, and the two backends together run every kind
SHORT_KINDS = {"sqlite": [KINDS[0], KINDS[3]], "postgresql": [KINDS[1], KINDS[2]]}


def kinds_for(backend: str) -> list[tuple[str, bool]]:
    """The rounds' kinds on ``backend``, in order."""
    if IS_LONG:
        return [KINDS[k % len(KINDS)] for k in range(ROUNDS)]
    return SHORT_KINDS[backend]
NODES = [NodeInfo(f"n{i}", 8, "h100", 81920, {"rack": "r1"}) for i in (1, 2)]
END = {"Completed", "Failed", "Preempted", "Cancelled"}


# -- the link -------------------------------------------------------------------------------


class Proxy:
    """127.0.0.1:``port`` → 127.0.0.1:``upstream``, one thread per direction of each
    connection. :meth:`cut` with ``reset`` resets every open connection and each
    new one at once; with ``blackhole`` it forwards nothing and closes nothing
    (connections are accepted by the kernel and wait; bytes read meanwhile wait
    in the pump) until :meth:`heal`, which lets everything flow again."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self._listener = bound_socket()
        self._listener.listen(128)
        self._listener.settimeout(0.2)
        self.port = port_of(self._listener)
        self.mode = "open"
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = threading.Event()
        self.counts: Counter[str] = Counter()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut(self, mode: str) -> None:
        assert mode in ("reset", "blackhole")
        with self._lock:
            self.mode = mode
            self._flowing.clear()
            if mode == "reset":
                for s in list(self._open):
                    self._reset(s)
                self._open.clear()

    def heal(self) -> None:
        with self._lock:
            self.mode = "open"
            self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._thread.join(5)
        self._listener.close()
        with self._lock:
            for s in list(self._open):
                self._reset(s)

    def _reset(self, s: socket.socket) -> None:
        with contextlib.suppress(OSError):
            # linger 0: close sends RST, as a broken link does
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                if self.mode == "reset":
                    self.counts["connections reset"] += 1
                    self._reset(conn)
                    continue
                if self.mode == "blackhole":
                    self.counts["connections held"] += 1
                self._open.add(conn)
            threading.Thread(target=self._connect, args=(conn,), daemon=True).start()

    def _connect(self, conn: socket.socket) -> None:
        self._flowing.wait()
        try:
            up = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
        except OSError:  # the server is down (restarting): the client sees a reset
            with self._lock:
                self._open.discard(conn)
            self._reset(conn)
            return
        up.settimeout(None)
        with self._lock:
            if conn not in self._open:  # reset while connecting
                self._reset(up)
                return
            self._open.add(up)
        self.counts["connections"] += 1
        for src, dst in ((conn, up), (up, conn)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            # nothing passes while cut off, not even the end of a connection
            self._flowing.wait()
            with self._lock:
                if src not in self._open or dst not in self._open:
                    return  # reset by a cut
            if not data:
                with self._lock:
                    for s in (src, dst):
                        self._open.discard(s)
                        self._reset(s)
                return
            try:
                dst.sendall(data)
            except OSError:
                data = b""


# -- the executor's journal -------------------------------------------------------------------


@dataclass
class Entry:
    seq: int
    at: float
    kind: str  # "start" | "end"
    run: Run
    status: str = ""


class JournalSim(SimExecutor):
    """The sim executor, recording every start and every end it observes, in order
    (the agent's thread is the only caller)."""

    def __init__(self) -> None:
        super().__init__(NODES, stop_delay=GRACE)
        self.journal: list[Entry] = []
        self._ended: set[str] = set()

    def start(self, run: Run) -> None:
        is_new = run.run_id not in self.runs
        super().start(run)
        if is_new:
            self.journal.append(Entry(len(self.journal), time.time(), "start", run))

    def poll(self) -> list[Observed]:
        out = super().poll()
        for o in out:
            if o.status.is_final and o.run_id not in self._ended:
                self._ended.add(o.run_id)
                self.journal.append(Entry(len(self.journal), time.time(), "end",
                                          self.runs[o.run_id].run, o.status.value))
        return out


def check_journal(journal: list[Entry]) -> None:
    """No two attempts of one workload alive at once; no device over a whole one;
    no run started twice."""
    alive: dict[str, Run] = {}
    started: Counter[str] = Counter()
    for e in journal:
        rid = e.run.run_id
        if e.kind == "start":
            started[rid] += 1
            twins = [r for r in alive.values() if r.workload_id == e.run.workload_id]
            assert not twins, f"{rid} started while {twins[0].run_id} was alive"
            alive[rid] = e.run
            held: Counter[tuple[str, int]] = Counter()
            for r in alive.values():
                for i, pod in enumerate(r.placement):
                    if i not in r.stopped:
                        for d in pod.devices:
                            held[(pod.node, d.index)] += d.milli
            over = {k: v for k, v in held.items() if v > 1000}
            assert not over, f"devices over capacity when {rid} started: {over}"
        else:
            alive.pop(rid, None)
    twice = {rid: n for rid, n in started.items() if n > 1}
    assert not twice, f"runs started twice: {twice}"


# -- the control plane ------------------------------------------------------------------------


class ServerProcess:
    """An `apportion server` process on a fixed port, restartable (SIGKILL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.port = _port()
        self.env = {"APPORTION_AGENT_TIMEOUT": str(AGENT_TIMEOUT),
                    "APPORTION_HOLDER": "partition-test", "APPORTION_LEASE_TTL": "5"}
        self._stack = contextlib.ExitStack()
        self.restarts = 0

    def start(self) -> None:
        self._stack.enter_context(server(self.url, self.port, **self.env))

    def kill_and_restart(self) -> None:
        self._stack.close()  # SIGKILL (server() kills what is still alive)
        self._stack = contextlib.ExitStack()
        self.start()
        self.restarts += 1

    def stop(self) -> None:
        self._stack.close()


@dataclass
class World:
    srv: ServerProcess
    admin: ApportionClient
    agent_api: ApportionClient  # straight to the server, for reading decisions
    proxy: Proxy
    sim: JournalSim
    agent: Agent
    acked: dict[int, str] = field(default_factory=dict)  # id -> expected end status
    counts: Counter[str] = field(default_factory=Counter)
    windows: list[tuple[float, float]] = field(default_factory=list)
    round_s: list[float] = field(default_factory=list)
    recovery: list[float] = field(default_factory=list)  # heal -> nodes ready, s
    drained: list[float] = field(default_factory=list)  # heal -> every workload ended, s

    def submit(self, name: str, **spec: Any) -> int:
        body = {"name": name, "team": "a", "class": "elastic",
                "requeue_on_preemption": True, **spec}
        wid = int(self.admin.submit_workload(body)["id"])
        self.acked[wid] = "Completed"
        return wid

    def status(self, wid: int) -> str:
        return str(self.admin.get_workload(wid)["status"])

    def statuses(self, ids: list[int]) -> dict[int, str]:
        return {wid: self.status(wid) for wid in ids}

    def nodes(self) -> set[str]:
        return {n["health"] for n in self.admin.list_nodes(pool="main").items}

    def decisions(self, after: int = 0) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self.agent_api.agent_decisions(after, limit=100)
            out.extend(page.items)
            if len(page.items) < 100:
                return out
            after = int(page.next_token or out[-1]["id"])

    def audit_ignored(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        token = None
        while True:
            page = self.admin.list_audit(action="agent.report", outcome="ignored", limit=100,
                                         next_token=token)
            out.extend(page.items)
            token = page.next_token
            if token is None:
                return out


def _round(w: World, k: int, mode: str, restart: bool) -> None:
    # 1. work runs and completes
    quick = [w.submit(f"r{k}-quick{i}", gpus=1, duration=1) for i in range(2)]
    wait_until(lambda: all(s == "Completed" for s in w.statuses(quick).values()),
               timeout=20, what=f"round {k}: quick work completed")
    # 2. work that lives across the partition: the victims are still running when
    # the preemptor arrives (and end on the agent during the partition), the
    # finishers end during it, one is cancelled during it
    victims = [w.submit(f"r{k}-victim{i}", gpus=4, priority=10, duration=3) for i in range(2)]
    finishers = [w.submit(f"r{k}-finisher{i}", gpus=2, priority=50, duration=3)
                 for i in range(2)]
    doomed = w.submit(f"r{k}-cancelled", gpus=1, priority=50, duration=60)
    w.acked[doomed] = "Cancelled"
    live = [*victims, *finishers, doomed]
    wait_until(lambda: all(s == "Running" for s in w.statuses(live).values()),
               timeout=20, what=f"round {k}: work running before the partition")

    cut_at = time.time()
    w.proxy.cut(mode)
    # inside the silence window the nodes are still ready: the scheduler can
    # preempt the victims, and neither the stop nor the start reaches the agent
    # (of another team: fair share lets it take team a's lowest priority work)
    w.submit(f"r{k}-preemptor", team="b", gpus=8, priority=90, duration=2)
    wait_until(lambda: w.nodes() == {"unknown"}, timeout=10,
               what=f"round {k}: nodes unknown after {AGENT_TIMEOUT:g} s of silence")
    w.counts["nodes went unknown"] += 1
    if restart:
        w.srv.kill_and_restart()
        assert w.nodes() == {"unknown"}
    w.admin.cancel_workload(doomed)
    late = w.submit(f"r{k}-late", gpus=1, duration=1)  # waits: its nodes are unknown
    time.sleep(max(0.0, PARTITION - (time.time() - cut_at)))  # the partition's length
    assert w.status(late) in ("Pending", "Queued"), "work placed on unknown nodes"
    assert w.nodes() == {"unknown"}
    missed = [d for d in w.decisions(w.agent.state.cursor or 0) if d["kind"] == "stop"]
    heal_at = time.time()
    w.proxy.heal()
    w.windows.append((cut_at, heal_at))
    w.counts["cut " + mode] += 1

    # 3. afterwards: nodes ready, every workload at its end
    wait_until(lambda: w.nodes() == {"ready"}, timeout=20,
               what=f"round {k}: nodes ready after the partition")
    w.recovery.append(time.time() - heal_at)
    mine = [wid for wid, name in w.acked.items() if wid >= quick[0]]
    wait_until(lambda: all(s in END for s in w.statuses(mine).values()), timeout=40,
               what=f"round {k}: every workload ended")
    w.drained.append(time.time() - heal_at)
    got = w.statuses(mine)
    wrong = {wid: s for wid, s in got.items() if s != w.acked[wid]}
    assert not wrong, f"round {k}: workloads not at their expected end: {wrong}"
    # every ended attempt the agent was running when cut off is reported, refused, audited
    started = {e.run.run_id for e in w.sim.journal if e.kind == "start"}
    ignored = {(a["after"]["workload_id"], a["after"]["attempt"]) for a in w.audit_ignored()
               if isinstance(a.get("after"), dict) and "attempt" in a["after"]}
    for d in missed:
        if d["run_id"] in started:
            w.counts["stops missed while cut off"] += 1
            assert (d["workload_id"], d["attempt"]) in ignored, (
                f"round {k}: {d['run_id']} was ended while cut off; its report was not "
                f"refused and audited")


@contextlib.contextmanager
def world(url: str, tmp: Any) -> Iterator[World]:
    srv = ServerProcess(url)
    srv.start()
    admin = ApportionClient(f"http://127.0.0.1:{srv.port}", TOKEN, timeout=30.0)
    admin.create_pool("main", preemption_grace=GRACE)
    admin.create_team("a")
    admin.create_team("b")
    token = admin.create_token("agent-main", "agent", pool="main")["token"]
    agent_api = ApportionClient(f"http://127.0.0.1:{srv.port}", token, timeout=30.0)
    proxy = Proxy(srv.port)
    # the agent's requests time out after 5 s (a black-holed request then fails,
    # like any dead link); its long poll for decisions waits 0.1 s
    api = ApportionClient(f"http://127.0.0.1:{proxy.port}", token, timeout=5.0)
    sim = JournalSim()
    agent = Agent(api, sim, StateFile(tmp / "agent-main.json"), "main",
                  AgentOptions(poll_interval=0.1, heartbeat_interval=0.5, max_backoff=0.5))
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: admin.get_pool("main")["capacity"] == 16, timeout=20,
                   what="the agent's nodes registered")
        yield World(srv, admin, agent_api, proxy, sim, agent)
    finally:
        stop.set()
        thread.join(15)
        proxy.close()
        api.close()
        agent_api.close()
        admin.close()
        srv.stop()
    assert not thread.is_alive()


@pytest.mark.timeout(60 * ROUNDS + 120)
def test_a_partitioned_agent_loses_and_doubles_nothing(backend_url: str,  # noqa: F811
                                                       tmp_path: Any) -> None:
    began = time.monotonic()
    backend = backend_url.split(":", 1)[0].split("+")[0]
    with world(backend_url, tmp_path) as w:
        kinds = kinds_for(backend)
        for k, (mode, restart) in enumerate(kinds):
            t0 = time.monotonic()
            _round(w, k, mode, restart)
            w.round_s.append(time.monotonic() - t0)
        decisions = w.decisions()
        ignored = w.audit_ignored()
        journal = list(w.sim.journal)
        restarts = w.srv.restarts
        proxy_counts = dict(w.proxy.counts)
        assert w.sim.adopted == []
    # the control plane's decisions: one start per attempt, a new attempt only
    # after a stop of the one before
    starts = Counter((d["workload_id"], d["attempt"]) for d in decisions if d["kind"] == "start")
    assert all(n == 1 for n in starts.values()), {k: n for k, n in starts.items() if n > 1}
    first_start = {(d["workload_id"], d["attempt"]): d["id"] for d in reversed(decisions)
                   if d["kind"] == "start"}
    stops: dict[tuple[int, int], int] = {}
    for d in decisions:
        if d["kind"] == "stop":
            stops.setdefault((d["workload_id"], d["attempt"]), d["id"])
    for (wid, attempt), did in first_start.items():
        if attempt > 1:
            assert stops.get((wid, attempt - 1), did) < did, (
                f"attempt {attempt} of workload {wid} decided before attempt {attempt - 1} "
                f"was stopped")
    assert set(starts) == {(e.run.workload_id, e.run.attempt) for e in journal
                           if e.kind == "start"}, "the executor and the decisions disagree"
    # the executor's record
    check_journal(journal)
    ended_cut_off = sum(
        1 for e in journal if e.kind == "end" and e.status == RunStatus.COMPLETED
        and e.run.exec.duration is not None
        and any(a <= e.run.started_at + e.run.exec.duration <= b for a, b in w.windows))
    by_workload: defaultdict[int, int] = defaultdict(int)
    for wid, _attempt in starts:
        by_workload[wid] += 1
    # the premises: every partition outlived the silence timeout, runs ended and
    # attempts were ended while the agent was cut off, the restarts happened
    assert w.counts["nodes went unknown"] == ROUNDS
    assert ended_cut_off >= ROUNDS
    assert w.counts["stops missed while cut off"] >= ROUNDS
    assert restarts == sum(1 for _mode, restart in kinds if restart)
    record("4. agent partition", backend,
           f"{ROUNDS} rounds of {PARTITION:g} s cut off ({restarts} with a server restart), "
           f"{len(w.acked)} workloads, {len(starts)} starts, {ended_cut_off} runs ended and "
           f"{w.counts['stops missed while cut off']} attempts ended while cut off, "
           f"{len(ignored)} late reports ignored and audited; 0 started twice, 0 lost, "
           f"0 devices overcommitted", rounds=ROUNDS, starts=len(starts),
           ignored=len(ignored))
    print(f"\nagent partition ({backend}): {ROUNDS} rounds of {PARTITION:g} s cut off on a "
          f"{AGENT_TIMEOUT:g} s silence timeout ({w.counts['cut reset']} reset, "
          f"{w.counts['cut blackhole']} black-holed, {restarts} with a server restart), "
          f"{len(w.acked)} workloads, {len(starts)} starts "
          f"({sum(1 for n in by_workload.values() if n > 1)} workloads on a second attempt), "
          f"{ended_cut_off} runs ended while cut off, "
          f"{w.counts['stops missed while cut off']} attempts ended while cut off, "
          f"{len(ignored)} reports ignored and audited, proxy {proxy_counts}; "
          f"0 started twice, 0 lost, 0 devices overcommitted "
          f"(rounds of {', '.join(f'{s:.0f}' for s in w.round_s)} s; nodes ready "
          f"{', '.join(f'{s:.1f}' for s in w.recovery)} s and all ended "
          f"{', '.join(f'{s:.1f}' for s in w.drained)} s after the heal; "
          f"{time.monotonic() - began:.0f} s in all)")
