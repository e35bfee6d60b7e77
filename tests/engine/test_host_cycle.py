"""Host CPU and memory through the scheduling cycle: reasons, preemption and
nominations count them (SPEC 5, 6 and 7)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from apportion.domain.lifecycle import Status, transition
from apportion.engine.kept_state import CycleCache
from tests.engine.harness import World


def with_cpu(w: World, cores: int, mem_mib: int | None = None) -> World:
    w.nodes = [replace(n, cpu_milli=cores * 1000, memory_mib=mem_mib) for n in w.nodes]
    return w


def test_host_resources_is_the_reason_when_gpus_are_free_but_cpu_is_not() -> None:
    w = with_cpu(World().pool(nodes=2).team("o", main=16).team("t"), 32)
    w.submit("cpu-hog-0", "o", 1, wclass="reserved", cpu=30, running=True)
    w.submit("cpu-hog-1", "o", 1, wclass="reserved", cpu=30, running=True)
    w.submit("needs-cpu", "t", 1, cpu=16)
    w.settle()
    s = w.w("needs-cpu")
    assert (w.status("needs-cpu"), w.code("needs-cpu")) == ("Queued", "HOST_RESOURCES")
    assert s.reason.message.endswith(
        "needs 16 CPUs per pod; the 2 nodes with 1 GPU free have at most 2 CPUs free")
    # a pod that asks for no CPU takes the stranded GPUs at once
    w.submit("gpu-only", "t", 2)
    w.settle()
    assert w.status("gpu-only") == "Running"


def test_a_cpu_request_larger_than_any_node_never_runs() -> None:
    w = with_cpu(World().pool(nodes=2).team("t"), 32)
    w.submit("huge", "t", 1, cpu=64)
    w.settle()
    assert (w.status("huge"), w.code("huge")) == ("Pending", "NO_ELIGIBLE_POOL")
    assert "needs 64 CPUs per pod; the largest node with 1 GPU has 32 CPUs" in (
        w.w("huge").reason.message)


def test_reserved_work_preempts_elastic_work_for_its_cpu() -> None:
    w = with_cpu(World().pool(nodes=1).team("o", main=4).team("t"), 32)
    # elastic work holds one GPU but all of the node's CPU
    w.submit("elastic-cpu", "t", 1, cpu=32, running=True)
    w.submit("reserved", "o", 1, wclass="reserved", cpu=8)
    w.settle()
    assert w.status("reserved") == "Running"
    assert w.status("elastic-cpu") in ("Failed", "Preempted", "Queued")
    assert [p.victim for p in w.preemptions] == [w.names["elastic-cpu"]]


def test_a_gang_that_needs_more_cpu_than_free_waits_for_it() -> None:
    w = with_cpu(World().pool(nodes=2).team("o", main=16).team("t"), 32)
    w.submit("small", "o", 1, wclass="reserved", cpu=16, running=True)
    w.submit("gang", "o", 1, wclass="reserved", pods=4, cpu=16)
    w.settle()
    assert (w.status("gang"), w.code("gang")) == ("Queued", "HOST_RESOURCES")
    assert "only 3 pods fit" in w.w("gang").reason.message


def test_an_exiting_victim_keeps_its_cpu_until_it_has_exited() -> None:
    # A preempted victim's pods hold their devices, CPU and memory through the
    # pool's grace (SPEC 5, 6.5). Its GPUs were held, its CPU was not: once no
    # nominee's claim covered the node any more, a 20-CPU pod started beside the
    # exiting 20-CPU victim on a 24-CPU node (found by mutation testing).
    w = with_cpu(World().pool(nodes=1, gpus=2, preemption_grace=100).team("t"), 24)
    w.submit("victim", "t", 1, cpu=20, priority=10, running=True)
    w.submit("first", "t", 1, cpu=20, priority=60)
    w.cycle()
    assert w.status("victim") == "Preempted"
    w.advance(10)
    w.states[w.names["first"]] = transition(w.w("first"), Status.CANCELLED, w.now)
    w.submit("x", "t", 1, cpu=20, priority=5)
    w.settle()
    assert (w.status("x"), w.code("x")) == ("Queued", "PREEMPTING"), w.w("x").reason
    assert "preempted workload 1" in w.w("x").reason.message  # the victim's CPU it waits for
    w.advance(100)  # the victim has exited: its CPU is free
    w.settle()
    assert w.status("x") == "Running"


@pytest.mark.parametrize("kept", [False, True], ids=["fresh", "kept"])
def test_cpu_of_finished_work_is_freed_once(kept: bool) -> None:
    """A 16-CPU node runs two 8-CPU pods; one completes. 8 CPUs are free, so
    a 16-CPU pod still waits (HOST_RESOURCES), also on a kept working state
    that re-read the pods as they went Starting, Running and Completed."""
    w = with_cpu(World(CycleCache() if kept else None).pool(nodes=1).team("t"), 16)
    w.instant_running = False  # each goes Running in a snapshot of its own
    for name in ("first", "second"):
        w.submit(name, "t", 1, cpu=8)
        w.settle()
        assert w.status(name) == "Starting"
        w.states[w.names[name]] = transition(w.w(name), Status.RUNNING, w.now)
        w.settle()
    w.states[w.names["first"]] = transition(w.w("first"), Status.COMPLETED, w.now)
    w.submit("big", "t", 1, cpu=16)
    w.settle()
    assert (w.status("big"), w.code("big")) == ("Queued", "HOST_RESOURCES")
    w.states[w.names["second"]] = transition(w.w("second"), Status.COMPLETED, w.now)
    w.settle()
    assert w.status("big") == "Starting"


def test_a_nominee_whose_memory_fills_the_node_starts_when_its_victim_exits() -> None:
    """b's reserved job needs all 64 GiB of the node's memory, which a's
    elastic job holds: a's job is preempted, and when it has exited after
    the grace, b's job starts (a claim that exactly fills the node fits)."""
    w = with_cpu(World().pool(nodes=1, gpus=2, preemption_grace=30).team("a").team("b", main=1),
                 16, 64 * 1024)
    w.submit("holder", "a", 1, memory_mib=64 * 1024, running=True)
    w.submit("owner", "b", 1, wclass="reserved", memory_mib=64 * 1024)
    w.settle()
    assert w.preempted() == ["holder"]
    assert (w.status("owner"), w.code("owner")) == ("Queued", "PREEMPTING")
    w.advance(30)
    w.settle()
    assert w.status("owner") == "Running"
