"""The scheduler's lease and fencing token, and version-checked plan commits,
against SQLite and a real PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apportion.service import agents, inputs, pools, workloads
from apportion.service import org as org_svc
from apportion.service import tokens as tok
from apportion.service.context import Ctx, Role
from apportion.service.control import ControlPlane
from apportion.service.errors import LostLease, StaleSnapshot
from apportion.service.scheduler import Scheduler, _run, default_holder
from apportion.service.settings import Settings
from apportion.service.snapshots import load_snapshot
from apportion.store.db import Database
from apportion.store.models import CycleRow
from apportion.store.repos import security as sec_repo
from apportion.store.repos import workloads as wl_repo
from tests.chaos.figures import record
from tests.timing import wait_until


@dataclass
class World:
    db: Database
    admin: Ctx
    org_id: int

    def submit(self, name: str, gpus: float = 1) -> int:
        with self.db.write() as s:
            spec = workloads.parse_spec({"name": name, "team": "t", "gpus": gpus})
            return int(workloads.submit(s, self.admin, spec)["id"])

    def statuses(self) -> dict[int, str]:
        with self.db.read() as s:
            return {w.id: w.status for w in wl_repo.active_workloads(s, self.org_id)}


@pytest.fixture
def world(backend_url: str) -> Iterator[World]:
    db = Database(backend_url)
    db.migrate()
    secret = tok.bootstrap(db, "default", None)
    assert secret is not None
    verifier = tok.TokenVerifier(db)
    admin = Ctx(verifier.verify(secret), "test")
    with db.write() as s:
        pools.create_pool(s, admin, inputs.PoolSettings(name="main"))
        agent_tok = tok.create_token(
            s, admin, inputs.TokenNew(name="ag", role=Role.AGENT, pool="main"))
        org_svc.create_team(s, admin, inputs.TeamNew(slug="t"))
    agent = Ctx(verifier.verify(agent_tok["token"]), "test")
    with db.write() as s:
        agents.heartbeat(s, agent, inputs.HeartbeatIn(
            nodes=tuple(inputs.NodeReport(name=f"n{i}", gpus=8) for i in range(4))))
    try:
        yield World(db, admin, admin.org_id)
    finally:
        db.dispose()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_paused_leader_cannot_commit(world: World) -> None:
    clock = Clock()
    a = Scheduler(world.db, "a", lease_ttl=10, clock=clock)
    b = Scheduler(world.db, "b", lease_ttl=10, clock=clock)
    wid = world.submit("w")
    assert a.acquire() and not b.acquire()
    with world.db.read() as s:
        loaded = load_snapshot(s, world.org_id, clock())
    plan = _run(loaded)  # a computes a plan ... and pauses past its lease
    clock.now += 11
    assert b.acquire() and b.token == 2
    with pytest.raises(LostLease), world.db.write() as s:
        a._commit(s, world.org_id, loaded, plan, time.perf_counter())
    assert world.statuses()[wid] == "Pending"  # nothing of a's plan was written
    assert not a.acquire()  # and it cannot take the lease back while b holds it
    assert b.run_org(world.org_id).committed
    assert world.statuses()[wid] == "Starting"
    with world.db.read() as s:
        assert [(c.holder, c.fencing_token) for c in sec_repo.list_cycles(s)] == [("b", 2)]


def test_stale_snapshot_is_refused_then_recomputed(world: World) -> None:
    s1 = Scheduler(world.db, "solo")
    assert s1.acquire()
    first = world.submit("first")
    with world.db.read() as s:
        loaded = load_snapshot(s, world.org_id, time.time())
    plan = _run(loaded)
    second = world.submit("second")  # the snapshot is now out of date
    with pytest.raises(StaleSnapshot), world.db.write() as s:
        s1._commit(s, world.org_id, loaded, plan, time.perf_counter())
    assert world.statuses() == {first: "Pending", second: "Pending"}
    assert s1.run_org(world.org_id).committed
    assert world.statuses() == {first: "Starting", second: "Starting"}


def test_two_schedulers_never_both_commit(world: World) -> None:
    """Two instances race for the lease with a short TTL and random pauses
    longer than it, while work arrives. Commits must form one history: fencing
    tokens never go backwards, and each token belongs to one holder."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def scheduler_thread(name: str, pause_every: int) -> None:
        sched = Scheduler(world.db, name, lease_ttl=0.3)
        n = 0
        while not stop.is_set():
            n += 1
            try:
                if sched.acquire():
                    for _ in range(3):
                        if not sched.run_org(world.org_id).committed:
                            break
                if n % pause_every == 0:
                    time.sleep(0.45)  # a pause longer than the lease
            except LostLease:
                pass
            except BaseException as exc:
                errors.append(exc)
                return
            time.sleep(0.01)

    threads = [threading.Thread(target=scheduler_thread, args=("a", 5)),
               threading.Thread(target=scheduler_thread, args=("b", 7))]
    def committed() -> list[CycleRow]:
        with world.db.read() as s:
            return list(sec_repo.list_cycles(s, world.org_id))

    def handed_over() -> bool:
        """The premise of the test: both instances committed, under >= 3 tokens."""
        cycles = committed()
        return (len({c.holder for c in cycles}) == 2
                and len({c.fencing_token for c in cycles}) >= 3)

    for t in threads:
        t.start()
    # Work arrives until the lease has changed hands (bounded: a loaded machine
    # only makes this take longer, it cannot make the test pass without it).
    deadline = time.monotonic() + 60
    i = 0
    try:
        while not handed_over() and not errors:
            assert time.monotonic() < deadline, "the lease never changed hands in 60 s"
            for _ in range(5):
                world.submit(f"w{i}", gpus=0.25)
                i += 1
                time.sleep(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors, errors
    cycles = committed()
    assert len({c.holder for c in cycles}) == 2  # both instances led at some point
    tokens = [c.fencing_token for c in cycles]
    assert tokens == sorted(tokens), "a fenced-out leader committed after a newer one"
    holders: dict[int, set[str]] = {}
    for c in cycles:
        holders.setdefault(c.fencing_token, set()).add(c.holder)
    assert all(len(h) == 1 for h in holders.values())
    versions = [c.snapshot_version for c in cycles]
    assert len(set(versions)) == len(versions), "two plans committed from one snapshot"


def test_a_restarted_scheduler_takes_its_own_lease_at_once_and_fences_the_old_one(
    world: World,
) -> None:
    """Issue 18: a crashed sole server waited a whole lease (12-14 s) before
    scheduling again. A process with the same holder identity that has never
    held the lease takes it at once, with a new token: a commit of the previous
    incarnation (paused, not dead) is refused, and it cannot take the lease back."""
    clock = Clock()
    old = Scheduler(world.db, "box:data-dir", lease_ttl=15, clock=clock)
    wid = world.submit("w")
    assert old.acquire() and old.token == 1
    with world.db.read() as s:
        loaded = load_snapshot(s, world.org_id, clock())
    plan = _run(loaded)
    clock.now += 1  # "crash" and restart, far within the 15 s lease
    new = Scheduler(world.db, "box:data-dir", lease_ttl=15, clock=clock)
    assert new.acquire() and new.token == 2
    with pytest.raises(LostLease), world.db.write() as s:
        old._commit(s, world.org_id, loaded, plan, time.perf_counter())
    assert world.statuses()[wid] == "Pending"  # nothing of the stale plan was written
    assert not old.acquire()  # the old incarnation waits for expiry like anyone else
    assert new.acquire() and new.token == 2  # renewing keeps the token
    assert new.run_org(world.org_id).committed
    assert world.statuses()[wid] == "Starting"
    other = Scheduler(world.db, "another-host", lease_ttl=15, clock=clock)
    assert not other.acquire()  # a different holder still waits for the lease to expire


def test_the_holder_identity_is_kept_per_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'apportion.db'}"
    first = default_holder(url)
    assert default_holder(url) == first  # the same after a restart
    assert (tmp_path / "apportion.db.holder").read_text().strip() == first
    assert default_holder(f"sqlite:///{tmp_path / 'other.db'}") != first
    assert default_holder("sqlite:///:memory:") != default_holder("sqlite:///:memory:")


def test_a_crashed_and_restarted_server_schedules_again_within_5_s(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'apportion.db'}",
                        bootstrap_token="apt_leasetests01_" + "a" * 32, lease_ttl=15.0,
                        cycle_interval=5.0, rate_limit=0.0)
    crashed = ControlPlane(settings)
    crashed.start()
    wait_until(lambda: crashed.loop.is_leader, timeout=10, what="the first server leads")
    crashed.loop._stop.set()  # it dies: the loop ends, the lease is NOT released
    crashed.loop._wake.set()
    assert crashed.loop._thread is not None
    crashed.loop._thread.join(timeout=10)
    crashed.db.dispose()
    restarted = ControlPlane(settings)
    began = time.monotonic()
    restarted.start()
    try:
        wait_until(lambda: restarted.loop.is_leader and restarted.loop.last_cycle_at,
                   timeout=20, what="the restarted server schedules")
        assert time.monotonic() - began < 5.0
        assert restarted.loop.scheduler.token == 2  # a new token: the old one is fenced
    finally:
        restarted.stop()


def test_a_frozen_leader_s_plan_is_refused_every_round(world: World) -> None:
    """Issue 18, split brain, 50 rounds: the leader computes a plan and freezes
    past its lease; the other takes the lease and commits; the woken leader
    commits its stale plan and is refused by the fencing token, every time.
    (tests/chaos/test_split_brain.py does the same to real processes.)"""
    clock = Clock()
    schedulers = [Scheduler(world.db, "a", lease_ttl=10, clock=clock),
                  Scheduler(world.db, "b", lease_ttl=10, clock=clock)]
    refused = 0
    for k in range(50):
        old, new = schedulers[k % 2], schedulers[(k + 1) % 2]
        wid = world.submit(f"w{k}", gpus=0.25)
        assert old.acquire(), k
        with world.db.read() as s:
            loaded = load_snapshot(s, world.org_id, clock())
        plan = _run(loaded)
        assert any(d.workload_id == wid for d in plan.decisions), k  # it would start w
        clock.now += 11  # frozen past its lease
        assert new.acquire() and new.token == k + 2, (k, new.token)
        assert new.run_org(world.org_id).committed
        with pytest.raises(LostLease), world.db.write() as s:
            old._commit(s, world.org_id, loaded, plan, time.perf_counter())
        refused += 1
        assert world.statuses()[wid] == "Starting"
        clock.now += 11  # the new leader's lease runs out before the next round
    assert refused == 50
    record("3. split brain (in process)", world.db.backend,
           f"50 frozen leaders committed their stale plan; {refused} refused by the fencing "
           f"token", attempted=50, refused=refused)
    with world.db.read() as s:
        cycles = sec_repo.list_cycles(s, world.org_id)
    tokens = [c.fencing_token for c in cycles]
    assert tokens == sorted(tokens) and len(set(tokens)) == 50
    assert all(c.holder == ("b" if c.fencing_token % 2 == 0 else "a") for c in cycles)


def test_a_control_plane_cycled_by_hand_hands_its_lease_back_on_stop(tmp_path: Path) -> None:
    """A control plane without a scheduler thread (cycles run by hand with
    ``loop.tick()``) took the lease; stopping it must release it, or the next
    process with another holder identity waits a whole ``lease_ttl``."""
    base = dict(bootstrap_token="apt_leasetests02_" + "b" * 32, lease_ttl=600.0,
                run_scheduler=False, rate_limit=0.0)
    first = ControlPlane(Settings(database_url=f"sqlite:///{tmp_path / 'a.db'}", **base))
    first.start()
    first.loop.tick()
    assert first.loop.is_leader
    first.stop()
    # a copy of the file (another holder identity), as the dashboard tests make
    (tmp_path / "b.db").write_bytes((tmp_path / "a.db").read_bytes())
    second = ControlPlane(Settings(database_url=f"sqlite:///{tmp_path / 'b.db'}", **base))
    second.start()
    try:
        second.loop.tick()
        assert second.loop.is_leader  # at once, not after 600 s
    finally:
        second.stop()
