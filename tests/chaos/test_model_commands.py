"""Model-based commands (issue 18, part 1): Hypothesis drives the real service
(the FastAPI app, its ControlPlane and a real store, SQLite and PostgreSQL)
through random sequences of what users, agents and operators do — submit every
kind of work, cancel, agent reports (running, completed, failed), nodes going
down and coming back, cordons, reservation changes, scheduling cycles and
server restarts — and after every step checks what the SPEC promises:

- no 5xx, ever; every refusal is the error envelope;
- no GPU device over its capacity, no pod on a node that is down or not in
  the workload's pool;
- reserved work is never preempted; a running gang holds all its pods;
- every acknowledged (201) workload is still there, and at the end each one's
  status history, attempt by attempt, is a path of the lifecycle's allowed moves
  and replaying it gives the stored attempt and status.

``APPORTION_CHAOS_EXAMPLES`` / ``APPORTION_CHAOS_STEPS`` make a run longer
(CI: 10 examples of up to 40 steps per backend).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from apportion.domain.lifecycle import ALLOWED, Status
from tests.api.conftest import Api, make_api
from tests.chaos.figures import record
from tests.pgfixture import PgServer, pg_server  # noqa: F401

pytestmark = pytest.mark.chaos

EXAMPLES = int(os.environ.get("APPORTION_CHAOS_EXAMPLES", "10"))
STEPS = int(os.environ.get("APPORTION_CHAOS_STEPS", "40"))

#: pool main: rack r1 (n1, n2) and r2 (n3), 4 GPUs each (small: work contends, so
#: reserved and higher-priority work reclaims)
NODES = {"n1": "r1", "n2": "r1", "n3": "r2"}
TEAMS = ("nlp", "vision", "production")
RESERVATIONS = {"research": 4, "production": 4, "nlp": 2}  # parents first
NODE_GPUS = 4


class Commands(RuleBasedStateMachine):
    """One control plane on one database; ``url_of`` makes a fresh database."""

    url_of: Callable[[], tuple[str, Callable[[], None]]]
    #: what the examples of a run reached, summed (the test asserts its premise)
    seen: dict[str, int]

    def __init__(self) -> None:
        super().__init__()
        self.url, self._drop = type(self).url_of()
        self._session: Iterator[Api] | None = None
        self.api = self._open()
        self.acked: dict[int, dict[str, Any]] = {}
        self.up: set[str] = set(NODES)
        self.cursor = 0
        self.reported: set[tuple[int, int]] = set()
        self.agent: dict[str, str] = {}
        self.restarts = 0

    # -- plumbing ---------------------------------------------------------------------
    def _open(self) -> Api:
        self._session = make_api(self.url)
        return next(self._session)

    def _close(self) -> None:
        if self._session is not None:
            self._session.close()  # leaves make_api's block: the control plane stops
            self._session = None

    def teardown(self) -> None:
        try:
            if self.acked:
                self._check_histories()
                self.seen["restarts"] += self.restarts
        finally:
            self._close()
            self._drop()

    def call(self, method: str, path: str, headers: dict[str, str] | None = None,
             **kw: Any) -> Any:
        r = self.api.call(method, path, headers, **kw)
        assert r.status_code < 500, f"{method} {path}: {r.status_code} {r.text}"
        if r.status_code >= 400:
            err = r.json().get("error")
            assert err and err.get("code") and err.get("message"), r.text
        return r

    def heartbeat(self) -> None:
        nodes = [{"name": n, "gpus": NODE_GPUS, "labels": {"rack": NODES[n]}}
                 for n in sorted(self.up)]
        r = self.call("POST", "/v1/agent/heartbeat", self.agent, json={"nodes": nodes})
        assert r.status_code == 200, r.text

    # -- the organization -------------------------------------------------------------
    @initialize()
    def organization(self) -> None:
        self.call("POST", "/v1/pools", json={"name": "main", "topology": ["rack"],
                                             "preemption_grace": 0})
        self.agent = self.api.token("agent-main", "agent", pool="main")
        self.heartbeat()
        for body in ({"slug": "research"}, {"slug": "nlp", "parent": "research"},
                     {"slug": "vision", "parent": "research"}, {"slug": "production"}):
            assert self.call("POST", "/v1/teams", json=body).status_code == 201
        for team, gpus in RESERVATIONS.items():
            r = self.call("PUT", f"/v1/reservations/{team}/main", json={"gpus": gpus})
            assert r.status_code in (200, 201), r.text

    # -- what users do ----------------------------------------------------------------
    @rule(specs=st.lists(st.fixed_dictionaries({
        "team": st.sampled_from(TEAMS), "reserved": st.booleans(),
        "gpus": st.sampled_from([0.25, 0.5, 0.75, 1, 2, 4]), "pods": st.integers(1, 3),
        "gang": st.booleans(), "priority": st.sampled_from([20, 50, 75]),
        "requeue_on_preemption": st.booleans(), "rack": st.booleans()}),
        min_size=1, max_size=4))
    def submit(self, specs: list[dict[str, Any]]) -> None:
        """Users submit work of every kind (1-4 workloads)."""
        for drawn in specs:
            spec = {"name": f"w{len(self.acked)}", **drawn}
            if spec.pop("reserved"):
                spec["class"] = "reserved"
                del spec["priority"]
            if spec.pop("rack"):
                spec["topology"] = {"level": "rack", "mode": "required"}
            r = self.call("POST", "/v1/workloads", json=spec)
            assert r.status_code == 201, r.text
            self.acked[int(r.json()["data"]["id"])] = spec
            self.seen["submitted"] += 1

    @precondition(lambda self: bool(self.acked))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(sorted(self.acked)))
        r = self.call("POST", f"/v1/workloads/{wid}/cancel", json={})
        assert r.status_code in (200, 409), r.text

    # -- what the scheduler and the agent do ------------------------------------------
    @rule()
    def cycle(self) -> None:
        self.api.cycle()

    @rule()
    def tick(self) -> None:
        """A cycle, the agent's reports of what it started, and the next cycle."""
        self.api.cycle()
        self.report_starts()
        self.api.cycle()

    @rule()
    def report_starts(self) -> None:
        """The agent reports every new start decision as running."""
        while True:
            r = self.call("GET", f"/v1/agent/decisions?limit=100&cursor={self.cursor}",
                          self.agent)
            page = r.json()["data"]
            if not page:
                return
            self.cursor = max(int(d["id"]) for d in page)
            for d in page:
                key = (int(d["workload_id"]), int(d["attempt"]))
                if d["kind"] != "start" or key in self.reported:
                    continue
                self.reported.add(key)
                self.call("POST", "/v1/agent/reports", self.agent, json={
                    "workload_id": key[0], "attempt": key[1], "run_id": d["run_id"],
                    "status": "running"})

    @rule(data=st.data(), outcome=st.sampled_from(["completed", "failed"]))
    def finish(self, data: st.DataObject, outcome: str) -> None:
        """A run ends: one of the workloads placed now reports its outcome."""
        placed = sorted(int(w["id"]) for w in self._live()
                        if w["status"] in ("Starting", "Running"))
        if not placed:
            return
        wid = data.draw(st.sampled_from(placed))
        attempt = int(self.call("GET", f"/v1/workloads/{wid}").json()["data"]["attempt"])
        r = self.call("POST", "/v1/agent/reports", self.agent, json={
            "workload_id": wid, "attempt": attempt, "run_id": f"w{wid}-a{attempt}",
            "status": outcome})
        assert r.status_code == 200, r.text

    @precondition(lambda self: bool(self.acked))
    @rule(data=st.data(), outcome=st.sampled_from(["completed", "failed", "running"]))
    def stale_report(self, data: st.DataObject, outcome: str) -> None:
        """A report for any workload and an attempt that may be over (an agent
        behind the times): applied, or ignored and audited; a workload that was
        never in this agent's pool is refused (403, the error envelope)."""
        wid = data.draw(st.sampled_from(sorted(self.acked)))
        attempt = data.draw(st.integers(1, 3))
        r = self.call("POST", "/v1/agent/reports", self.agent, json={
            "workload_id": wid, "attempt": attempt, "run_id": f"w{wid}-a{attempt}",
            "status": outcome})
        assert r.status_code in (200, 403), r.text

    # -- what operators do ------------------------------------------------------------
    @rule(node=st.sampled_from(sorted(NODES)), up=st.booleans())
    def node_health(self, node: str, up: bool) -> None:
        """The agent's inventory loses a node (down) or has it again."""
        (self.up.add if up else self.up.discard)(node)
        self.heartbeat()

    @rule(node=st.sampled_from(sorted(NODES)), cordon=st.booleans())
    def cordon(self, node: str, cordon: bool) -> None:
        r = self.call("POST", f"/v1/nodes/{node}/{'cordon' if cordon else 'uncordon'}",
                      json={})
        assert r.status_code == 200, r.text

    @rule(team=st.sampled_from(("research", *TEAMS)), gpus=st.sampled_from([0, 2, 4, 6, 8]))
    def reservation(self, team: str, gpus: int) -> None:
        r = self.call("PUT", f"/v1/reservations/{team}/main", json={"gpus": gpus})
        assert r.status_code in (200, 201, 409, 422), r.text

    @rule()
    def restart(self) -> None:
        """The server process is replaced: a new ControlPlane on the same database."""
        self._close()
        self.api = self._open()
        self.restarts += 1

    # -- what must hold after every step ----------------------------------------------
    def _live(self) -> list[dict[str, Any]]:
        """Every workload, through the paged list (all statuses)."""
        out: list[dict[str, Any]] = []
        cursor = ""
        while True:
            body = self.call("GET", f"/v1/workloads?limit=100{cursor}").json()
            out += body["data"]
            token = body["metadata"]["next_token"]
            if not token:
                return out
            cursor = f"&next_token={token}"

    @invariant()
    def promises_hold(self) -> None:
        if not self.agent:
            return
        self.seen["checks"] += 1
        workloads = {int(w["id"]): w for w in self._live()}
        assert set(self.acked) <= set(workloads), sorted(set(self.acked) - set(workloads))
        used: dict[tuple[str, int], int] = defaultdict(int)
        nodes = {n["name"]: n for n in self.call("GET", "/v1/nodes").json()["data"]}
        for wid, w in workloads.items():
            if w["class"] == "reserved":
                assert w["status"] != "Preempted", w
                assert all(a["status"] != "Preempted" for a in w["attempts"]), w
            if w["status"] not in ("Starting", "Running"):
                continue
            for pod in w["placement"]:
                node = nodes.get(pod["node"])
                assert node is not None and node["pool"] == w["pool"], (w, node)
                assert node["state"] != "down", (wid, node)
                for d in pod["devices"]:
                    assert 0 <= d["index"] < node["gpus"], (wid, pod)
                    used[(pod["node"], d["index"])] += d["milli"]
            if w["spec"]["gang"]:
                assert len(w["placement"]) == w["pods"], w
        over = {k: v for k, v in used.items() if v > 1000}
        assert not over, over

    def _check_histories(self) -> None:
        for wid in self.acked:
            events = self.call("GET", f"/v1/workloads/{wid}/events").json()["data"]
            by_attempt: dict[int, list[Status]] = defaultdict(list)
            for e in events:
                if e["type"] == "workload.status":
                    by_attempt[int(e["attempt"])].append(Status(e["status"]))
                    self.seen[e["status"]] += 1
            assert by_attempt.get(1, [None])[0] is Status.PENDING, (wid, by_attempt)
            for attempt, path in by_attempt.items():
                assert path[0] is Status.PENDING, (wid, attempt, path)
                for a, b in itertools.pairwise(path):
                    assert (a, b) in ALLOWED, (wid, attempt, path)
            # the stored state is what replaying its event log gives: the latest
            # attempt, in the status its last event names
            stored = self.call("GET", f"/v1/workloads/{wid}").json()["data"]
            last = max(by_attempt)
            assert (stored["attempt"], stored["status"]) == (last, by_attempt[last][-1].value), (
                wid, stored["attempt"], stored["status"], dict(by_attempt))


def _run(url_of: Callable[[], tuple[str, Callable[[], None]]], backend: str) -> None:
    seen: dict[str, int] = defaultdict(int)
    machine = type("CommandsOn", (Commands,), {"url_of": staticmethod(url_of), "seen": seen})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, derandomize=True,
        suppress_health_check=list(HealthCheck), database=None))
    record("1. model-based commands", backend,
           f"{EXAMPLES} sequences of up to {STEPS} steps, {seen['checks']} states checked, "
           f"{seen['submitted']} submissions, {seen['restarts']} server restarts; reached "
           f"{seen['Running']} Running, {seen['Preempted']} Preempted, {seen['Failed']} Failed, "
           f"{seen['Cancelled']} Cancelled; 0 invariants broken", **dict(seen))
    # the premise: the sequences reached what the checks are about
    for what in ("Running", "Preempted", "Completed", "Failed", "Cancelled", "restarts"):
        assert seen[what] > 0, f"{what} never reached: {dict(seen)}"


def test_model_commands_on_sqlite() -> None:
    def url_of() -> tuple[str, Callable[[], None]]:
        folder = tempfile.TemporaryDirectory(prefix="apportion-chaos-")
        return f"sqlite:///{folder.name}/apportion.db", folder.cleanup

    _run(url_of, "sqlite")


def test_model_commands_on_postgresql(pg_server: PgServer) -> None:  # noqa: F811
    def url_of() -> tuple[str, Callable[[], None]]:
        url = pg_server.create_database()
        return url, lambda: pg_server.drop_database(url)

    _run(url_of, "postgresql")
