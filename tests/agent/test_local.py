"""The local executor with real processes: env, logs, exit codes, SIGTERM → SIGKILL,
adoption by a restarted agent, and a round trip through a live control plane."""

from __future__ import annotations

import time
from pathlib import Path

from apportion.agent.executors.local import LocalExecutor
from apportion.agent.model import ExecSpec, Run, RunStatus
from apportion.domain.workload import DeviceShare, PodPlacement
from tests.agent.conftest import Cluster, wait_for
from tests.timing import ManualClock


def _run(command: list[str], *, rid: str = "w1-a1", pods: int = 1, milli: int = 1000,
         devices: tuple[int, ...] = (0,)) -> Run:
    placement = tuple(PodPlacement("box", tuple(DeviceShare(d + p, milli) for d in devices))
                      for p in range(pods))
    wid, attempt = (int(x[1:]) for x in rid.split("-"))
    return Run(rid, wid, attempt, placement, ExecSpec(name="t", team="nlp",
                                                      command=tuple(command)))


def _executor(tmp_path: Path, clock: ManualClock | None = None) -> LocalExecutor:
    """With ``clock``, grace periods (SIGTERM → SIGKILL) end only when the test
    advances it, so no check depends on how fast the machine is."""
    return LocalExecutor(tmp_path, node="box", gpus=4, gpu_memory_mib=40960,
                         use_nvidia_smi=False,
                         clock=clock.monotonic if clock else time.monotonic)


def _final(ex: LocalExecutor, rid: str, timeout: float = 10.0) -> RunStatus:
    def check() -> RunStatus | None:
        obs = {o.run_id: o for o in ex.poll()}[rid]
        return obs.status if obs.status.is_final else None
    return wait_for(check, timeout, f"{rid} to end")  # type: ignore[no-any-return]


def _status(ex: LocalExecutor, rid: str) -> RunStatus:
    return {o.run_id: o for o in ex.poll()}[rid].status


def test_pods_get_devices_env_and_a_log_file(tmp_path: Path) -> None:
    ex = _executor(tmp_path)
    script = 'echo "hi $APPORTION_POD_INDEX gpus=$CUDA_VISIBLE_DEVICES"; sleep 0.2'
    ex.start(_run(["sh", "-c", script], pods=2, devices=(0, 1)))
    assert _final(ex, "w1-a1") is RunStatus.COMPLETED
    logs = ex.log_dir(1, 1)
    assert (logs / "pod-0.log").read_text() == "hi 0 gpus=0,1\n"
    assert (logs / "pod-1.log").read_text() == "hi 1 gpus=1,2\n"
    assert (logs / "pod-0.exit").read_text().strip() == "0"


def test_fraction_gets_a_memory_limit(tmp_path: Path) -> None:
    ex = _executor(tmp_path)
    script = ('echo "$APPORTION_GPU_FRACTION $APPORTION_GPU_MEMORY_LIMIT_MIB '
              '$NVIDIA_VISIBLE_DEVICES"')
    ex.start(_run(["sh", "-c", script], milli=250, devices=(3,)))
    assert _final(ex, "w1-a1") is RunStatus.COMPLETED
    assert (ex.log_dir(1, 1) / "pod-0.log").read_text() == "0.25 10240 3\n"


def test_non_zero_exit_fails_the_run_and_stops_its_gang(tmp_path: Path) -> None:
    clock = ManualClock()  # the failure grace never runs out: SIGTERM must stop pod 0
    ex = _executor(tmp_path, clock)
    script = 'if [ "$APPORTION_POD_INDEX" = 1 ]; then exit 3; fi; sleep 300'
    ex.start(_run(["sh", "-c", script], pods=2))
    assert _final(ex, "w1-a1", timeout=30) is RunStatus.FAILED
    obs = ex.poll()[0]
    assert obs.message == "pod 1 exited with code 3" and obs.exit_code == 3
    assert all(p.is_gone for p in ex.runs["w1-a1"].pods)  # the sleeping pod was stopped


def test_stop_escalates_from_sigterm_to_sigkill_after_the_grace(tmp_path: Path) -> None:
    clock = ManualClock()
    ex = _executor(tmp_path, clock)
    stubborn = _run(["sh", "-c", 'trap "" TERM; echo ready; sleep 300'], rid="w1-a1")
    polite = _run(["sleep", "300"], rid="w2-a1")
    ex.start(stubborn)
    ex.start(polite)
    wait_for(lambda: "ready" in (ex.log_dir(1, 1) / "pod-0.log").read_text(), 10, "trap set")
    ex.stop("w1-a1", 5)
    ex.stop("w2-a1", 10)
    # no grace has run out on the executor's clock: only SIGTERM was sent
    assert _final(ex, "w2-a1", timeout=30) is RunStatus.STOPPED  # SIGTERM is enough
    assert _status(ex, "w1-a1") is RunStatus.RUNNING  # it ignores SIGTERM
    clock.advance(4.9)
    assert _status(ex, "w1-a1") is RunStatus.RUNNING  # still within its 5 s grace
    clock.advance(0.1)  # the grace is over: the next poll sends SIGKILL
    assert _final(ex, "w1-a1", timeout=30) is RunStatus.STOPPED  # needed SIGKILL


def test_a_new_executor_adopts_running_and_finished_processes(tmp_path: Path) -> None:
    first = _executor(tmp_path)
    first.start(_run(["sh", "-c", "sleep 0.5; exit 4"], rid="w1-a1"))
    first.start(_run(["true"], rid="w2-a1"))
    _final(first, "w2-a1")
    second = _executor(tmp_path)  # the agent restarted: same data dir, no Popen handles
    second.adopt([first.runs["w1-a1"].run, first.runs["w2-a1"].run])
    assert {o.run_id: o.status for o in second.poll()}["w2-a1"] is RunStatus.COMPLETED
    assert _final(second, "w1-a1") is RunStatus.FAILED
    assert "exited with code 4" in second.poll()[0].message
    # adoption spawned nothing new: each log holds one run's output only
    assert len(list(second.log_dir(1, 1).glob("pod-*.log"))) == 1


def test_round_trip_through_the_control_plane(cluster: Cluster, tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "agent", node="box", gpus=4, use_nvidia_smi=False)
    cluster.agent(ex)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 4, 10, "node registered")
    ok = cluster.submit(name="hello", gpus=1, command=["sh", "-c", "echo hi; sleep 0.2"])
    bad = cluster.submit(name="broken", gpus=1, command=["sh", "-c", "exit 2"])
    cluster.wait_status(ok, "Completed")
    failed = cluster.wait_status(bad, "Failed")
    assert failed["status"] == "Failed"
    assert (ex.log_dir(ok, 1) / "pod-0.log").read_text() == "hi\n"
    events = cluster.admin.workload_events(bad, limit=100).items
    assert any("exited with code 2" in e["message"] for e in events), [e["message"] for e in events]


def test_a_stop_right_after_the_start_is_never_missed(tmp_path: Path) -> None:
    clock = ManualClock()  # the 20 s grace never runs out: only SIGTERM can stop them
    ex = _executor(tmp_path, clock)
    for i in range(1, 11):
        ex.start(_run(["sleep", "300"], rid=f"w{i}-a1"))
        if i % 2:
            # not a wait for anything: varies where in the wrapper's start-up the stop lands
            time.sleep(0.005 * i)
        ex.stop(f"w{i}-a1", 20)
    for i in range(1, 11):
        assert _final(ex, f"w{i}-a1", timeout=30) is RunStatus.STOPPED


# -- shrink (SPEC 6.5) -------------------------------------------------------------------------


def _exit_code(ex: LocalExecutor, pod: int) -> str | None:
    path = ex.log_dir(1, 1) / f"pod-{pod}.exit"
    return path.read_text().strip() if path.exists() else None


def test_shrink_stops_exactly_the_taken_pods_and_the_run_goes_on(tmp_path: Path) -> None:
    ex = _executor(tmp_path)
    script = 'echo "pod $APPORTION_POD_INDEX up"; sleep 30'
    ex.start(_run(["sh", "-c", script], pods=4))
    logs = ex.log_dir(1, 1)
    wait_for(lambda: all("up" in (logs / f"pod-{i}.log").read_text() for i in range(4)), 5,
             "every pod up")
    ex.shrink("w1-a1", (2, 3), 10)
    wait_for(lambda: _exit_code(ex, 2) and _exit_code(ex, 3), 5, "taken pods ended")
    assert _exit_code(ex, 2) == "143"  # SIGTERM (128 + 15), not the 10 s SIGKILL
    assert _exit_code(ex, 0) is None and _exit_code(ex, 1) is None
    obs = ex.poll()[0]
    assert (obs.status, obs.message) == (RunStatus.RUNNING, "2 process(es)")
    assert (logs / "pod-3.log").read_text().startswith("pod 3 up\n")  # log stays readable
    assert ex.log_files(ex.runs["w1-a1"].run)[3] == logs / "pod-3.log"
    ex.stop("w1-a1", 5)
    assert _final(ex, "w1-a1") is RunStatus.STOPPED


def test_a_taken_pod_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    clock = ManualClock()  # the grace ends when the test says so
    ex = _executor(tmp_path, clock)
    script = ('if [ "$APPORTION_POD_INDEX" = 1 ]; then trap "" TERM; fi; '
              'echo ready; sleep 30')
    ex.start(_run(["sh", "-c", script], pods=2))
    logs = ex.log_dir(1, 1)
    wait_for(lambda: "ready" in (logs / "pod-1.log").read_text(), 30, "trap set")
    ex.shrink("w1-a1", (1,), 20)
    ex.poll()
    assert not ex.runs["w1-a1"].pods[1].is_gone  # it ignores SIGTERM; the grace still runs
    clock.advance(20)

    def pod1_gone() -> bool:
        ex.poll()  # SIGKILL is sent by a poll after the deadline
        return ex.runs["w1-a1"].pods[1].is_gone
    wait_for(pod1_gone, 30, "pod 1 killed")
    assert ex.poll()[0].status is RunStatus.RUNNING
    assert _exit_code(ex, 0) is None


def test_a_shrunk_run_completes_when_its_remaining_pods_exit_0(tmp_path: Path) -> None:
    ex = _executor(tmp_path)
    script = 'if [ "$APPORTION_POD_INDEX" = 0 ]; then sleep 1; exit 0; fi; sleep 30'
    ex.start(_run(["sh", "-c", script], pods=3))
    ex.shrink("w1-a1", (1, 2), 5)
    assert _final(ex, "w1-a1") is RunStatus.COMPLETED  # the taken pods' 143 is no failure


def test_an_adopted_shrunk_run_never_respawns_its_taken_pods(tmp_path: Path) -> None:
    first = _executor(tmp_path)
    first.start(_run(["sleep", "30"], pods=2))
    first.shrink("w1-a1", (1,), 10)

    def pod1_gone() -> bool:
        first.poll()
        return first.runs["w1-a1"].pods[1].is_gone
    wait_for(pod1_gone, 5, "pod 1 ended")
    second = _executor(tmp_path)
    second.adopt([first.runs["w1-a1"].run])
    assert second.poll()[0].status is RunStatus.RUNNING
    assert [p.index for p in second.runs["w1-a1"].active_pods()] == [0]
    second.stop("w1-a1", 5)
    assert _final(second, "w1-a1") is RunStatus.STOPPED


def test_inventory_reports_this_machines_cpus_and_memory(cluster: Cluster,
                                                         tmp_path: Path) -> None:
    import os

    ex = LocalExecutor(tmp_path / "agent", node="box", gpus=4, use_nvidia_smi=False)
    node = ex.inventory()[0]
    assert node.cpu_milli == len(os.sched_getaffinity(0)) * 1000
    total_kib = int(next(line for line in Path("/proc/meminfo").read_text().splitlines()
                         if line.startswith("MemTotal:")).split()[1])
    assert node.memory_mib == total_kib // 1024
    cluster.agent(ex)  # the control plane stores and shows them
    shown = wait_for(lambda: next((n for n in cluster.admin.list_nodes().items
                                   if n["name"] == "box"), None), 10, "node registered")
    assert (shown["cpu"], shown["memory_mib"]) == (node.cpu_milli // 1000, node.memory_mib)
