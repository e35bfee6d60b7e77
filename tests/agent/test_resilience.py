"""Agent restarts and control-plane outages: no duplicate start, no lost result."""

from __future__ import annotations

from apportion.agent.executors.sim import SimExecutor
from apportion.agent.state import StateFile
from apportion.client import ApportionClient
from tests.agent.conftest import Cluster, wait_for
from tests.agent.test_sim import NODES
from tests.timing import ManualClock

#: seconds of a job on the test's clock: far longer than any real wait in these tests
JOB = 1000


def _events(cluster: Cluster, wid: int) -> list[str]:
    return [e["status"] for e in cluster.admin.workload_events(wid, limit=100).items
            if e["type"] == "workload.status"]


def _sim(clock: ManualClock) -> SimExecutor:
    """A sim executor on the test's clock: a run ends only when the test lets its
    duration pass (``clock.advance``), never because the machine was slow."""
    return SimExecutor(NODES, clock=clock.now)


def test_agent_restart_mid_run_adopts_without_a_second_start(cluster: Cluster) -> None:
    clock = ManualClock(frozen=False)
    first = _sim(clock)
    a = cluster.agent(first, clock=clock)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    wid = cluster.submit(gpus=4, duration=JOB)
    cluster.wait_status(wid, "Running")
    a.halt()  # the agent process "dies"; its state file stays
    state = StateFile(cluster.tmp / "agent-main.json").load("main")
    assert list(state.runs) == [f"w{wid}-a1"]

    second = _sim(clock)
    cluster.agent(second, clock=clock)
    wait_for(lambda: second.adopted == [f"w{wid}-a1"], 10, "the run adopted")
    assert cluster.status(wid) == "Running"
    clock.advance(JOB)  # the job's duration passes
    cluster.wait_status(wid, "Completed", timeout=10)
    assert second.started == []  # never started again ...
    assert second.adopted == [f"w{wid}-a1"]  # ... only adopted
    assert _events(cluster, wid).count("Running") == 1
    assert _events(cluster, wid)[-1] == "Completed"


def test_result_of_a_run_that_ended_while_the_agent_was_down_is_reported(
    cluster: Cluster,
) -> None:
    clock = ManualClock(frozen=False)
    a = cluster.agent(_sim(clock), clock=clock)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    wid = cluster.submit(gpus=1, duration=JOB)
    cluster.wait_status(wid, "Running")
    a.halt()
    clock.advance(JOB)  # the run's duration passes with no agent at all
    assert cluster.status(wid) == "Running"  # nobody has told the control plane yet
    later = _sim(clock)
    cluster.agent(later, clock=clock)
    cluster.wait_status(wid, "Completed")
    assert later.started == [] and later.adopted == [f"w{wid}-a1"]


def test_outage_runs_keep_running_and_outcomes_arrive_after_recovery(
    cluster: Cluster,
) -> None:
    clock = ManualClock(frozen=False)
    sim = _sim(clock)
    a = cluster.agent(sim, clock=clock)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    done = cluster.submit(name="finishes-in-outage", gpus=2, duration=JOB)
    longer = cluster.submit(name="outlives-outage", gpus=2, duration=10 * JOB)
    cluster.wait_status(done, "Running")
    cluster.wait_status(longer, "Running")

    cluster.server.stop()
    wait_for(lambda: not a.agent.is_connected, 10, "agent notices the outage")
    clock.advance(JOB)  # the first run's duration passes during the outage
    rid = f"w{done}-a1"
    wait_for(lambda: any(i["run_id"] == rid and i["status"] == "completed"
                         for i in a.agent.state.outbox), 10, "outcome queued offline")
    assert f"w{longer}-a1" in sim.runs  # the other one keeps running

    cluster.server.start()
    cluster.wait_status(done, "Completed", timeout=15)
    assert cluster.status(longer) == "Running"
    clock.advance(10 * JOB)
    cluster.wait_status(longer, "Completed", timeout=15)
    assert sim.started == [f"w{done}-a1", f"w{longer}-a1"]


def test_agent_with_a_lost_state_file_starts_only_live_runs(
    cluster: Cluster,
) -> None:
    a = cluster.agent(SimExecutor(NODES, speed=10.0))
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    finished = cluster.submit(name="finished", gpus=1, duration=1)
    cluster.wait_status(finished, "Completed")
    stopped = cluster.submit(name="cancelled", gpus=1)
    cluster.wait_status(stopped, "Running")
    cluster.admin.cancel_workload(stopped)
    live = cluster.submit(name="live", gpus=1)
    cluster.wait_status(live, "Running")
    a.halt()
    (cluster.tmp / "agent-main.json").unlink()  # the agent's disk is gone

    fresh = SimExecutor(NODES, speed=10.0)
    b = cluster.agent(fresh)
    # without a cursor it asks for live decisions only: ended attempts never start
    wait_for(lambda: b.agent.is_caught_up, 10, "replay")
    assert f"w{stopped}-a1" not in fresh.started
    assert f"w{finished}-a1" not in fresh.started
    assert list(fresh.runs) == [f"w{live}-a1"]
    with ApportionClient(cluster.server.url, cluster.agent_token) as api:
        assert b.agent.state.cursor == int(api.agent_decisions(0).next_token or 0)
    assert cluster.status(finished) == "Completed"
    assert cluster.status(live) == "Running"


def test_live_decisions_skip_starts_of_ended_attempts(cluster: Cluster) -> None:
    a = cluster.agent(SimExecutor(NODES, speed=10.0))
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    done = cluster.submit(name="done", gpus=1, duration=1)
    cluster.wait_status(done, "Completed")
    gone = cluster.submit(name="gone", gpus=1)
    cluster.wait_status(gone, "Running")
    cluster.admin.cancel_workload(gone)
    live = cluster.submit(name="live", gpus=1)
    cluster.wait_status(live, "Running")
    a.halt()
    api = ApportionClient(cluster.server.url, cluster.agent_token, timeout=30.0)
    try:
        every = api.agent_decisions(0)
        page = api.agent_decisions(0, live=True)
        starts = [(d["workload_id"], d["kind"]) for d in page.items if d["kind"] == "start"]
        assert starts == [(live, "start")]
        assert [d["workload_id"] for d in page.items if d["kind"] == "stop"] == [gone]
        assert page.next_token == every.next_token  # the pool's last decision
        first = api.agent_decisions(0, live=True, limit=1)  # paging keeps working
        assert [d["id"] for d in first.items] == [page.items[0]["id"]]
        assert first.next_token == str(page.items[0]["id"])
    finally:
        api.close()


def test_a_run_the_control_plane_refuses_is_stopped_not_kept_alive(cluster: Cluster) -> None:
    """Issue 18: a run whose attempt the control plane has ended (here the stop
    decision was missed: the agent's cursor is past it) was re-reported
    ``running`` by every heartbeat, refused and audited, and never stopped. The
    heartbeat's answer now lists it in ``stop_runs`` and the agent stops it."""
    clock = ManualClock(frozen=False)
    a = cluster.agent(_sim(clock), clock=clock)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 16, 10, "nodes registered")
    wid = cluster.submit(gpus=1, duration=JOB)
    cluster.wait_status(wid, "Running")
    a.halt()
    cluster.admin.cancel_workload(wid)  # a stop decision the next agent never applies
    state_file = StateFile(cluster.tmp / "agent-main.json")
    state = state_file.load("main")
    with ApportionClient(cluster.server.url, cluster.agent_token) as api:
        state.cursor = int(api.agent_decisions(0).next_token or 0)
        answer = api.agent_heartbeat("main", [], runs=[{
            "workload_id": wid, "attempt": 1, "run_id": f"w{wid}-a1", "status": "running"}])
    assert answer["stop_runs"] == [f"w{wid}-a1"]
    state_file.save(state)

    later = _sim(clock)
    b = cluster.agent(later, clock=clock)
    wait_for(lambda: f"w{wid}-a1" not in later.runs, 10, "the refused run stopped")
    assert later.adopted == [f"w{wid}-a1"] and later.started == []
    wait_for(lambda: f"w{wid}-a1" in b.agent.state.done, 10, "the run finished with")
    assert cluster.status(wid) == "Cancelled"
