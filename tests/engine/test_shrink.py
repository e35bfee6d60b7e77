"""Shrink before kill (SPEC 6.5, revision 3): a Running elastic workload with
``min_pods < pods`` gives up pods, newest first, down to ``min_pods``,
before it can be taken whole; it stays Running on the rest."""

from __future__ import annotations

import pytest

from apportion.domain.lifecycle import Status, transition
from apportion.domain.workload import DeviceShare, PodPlacement
from apportion.engine.kept_state import CycleCache
from tests.engine.harness import World


def pods_running(w: World, name: str) -> int:
    return len(w.w(name).placement)


def test_a_one_gpu_reserved_job_takes_one_pod_of_a_big_elastic_sweep() -> None:
    """From trying the system: a 1-GPU reserved job used to preempt a whole
    58-GPU elastic workload (--pods 200 --min-pods 8) that had just started."""
    w = World().pool(nodes=8, gpus=8).team("nlp", main=8).team("vision")
    for i in range(6):
        w.submit(f"serve{i}", "nlp", 1, wclass="reserved", running=True)
    w.submit("sweep", "vision", 1, pods=200, min_pods=8, running=True)
    assert pods_running(w, "sweep") == 58
    w.submit("serve6", "nlp", 1, wclass="reserved")
    w.settle()
    assert w.status("serve6") == "Running"
    assert w.status("sweep") == "Running" and pods_running(w, "sweep") == 57
    (p,) = w.preemptions
    assert (p.victim, p.by, p.milli, p.pods) == (
        w.names["sweep"], w.names["serve6"], 1000, (57,))
    assert w.w("sweep").events[-1].message.startswith("shrunk: pod 57 preempted by serve6")


def test_pods_go_newest_first_down_to_min_pods_then_the_whole() -> None:
    """Six pods, at least four: two pods can go; a need of three takes the
    two newest pods and then the rest whole (the workload is preempted)."""
    w = World().pool(nodes=1, gpus=6).team("a", main=6).team("b")
    w.submit("el", "b", 1, pods=6, min_pods=4, running=True)
    w.submit("two", "a", 1, pods=2, wclass="reserved")
    w.settle()
    assert w.status("el") == "Running" and pods_running(w, "el") == 4
    assert [p.pods for p in w.preemptions] == [(4, 5)]
    w.submit("more", "a", 1, wclass="reserved")
    w.settle()
    assert w.status("el") == "Preempted" and w.status("more") == "Running"
    assert [p.pods for p in w.preemptions] == [(4, 5), ()]


def test_a_shrink_keeps_the_pods_numbers_and_their_devices() -> None:
    w = World().pool(nodes=1, gpus=4).team("a", main=4).team("b")
    w.submit("el", "b", 1, pods=4, min_pods=1, running=True)
    before = w.w("el").placement
    w.submit("r", "a", 1, wclass="reserved")
    w.settle()
    assert w.w("el").placement == before[:3]
    taken = {d.index for d in before[3].devices}
    assert {d.index for p in w.w("r").placement for d in p.devices} == taken


def test_starting_work_is_taken_whole() -> None:
    """Only Running work shrinks (SPEC 6.5); Starting work is cheaper and
    goes whole."""
    w = World().pool(nodes=1, gpus=4).team("a", main=4).team("b")
    w.instant_running = False
    w.submit("el", "b", 1, pods=4, min_pods=1)
    w.settle()
    assert w.status("el") == "Starting"
    w.submit("r", "a", 1, wclass="reserved")
    w.settle()
    assert w.status("el") == "Preempted" and w.preemptions[0].pods == ()


def test_shrunk_pods_hold_their_devices_for_the_grace() -> None:
    w = World().pool(nodes=1, gpus=4, preemption_grace=30).team("a", main=4).team("b")
    w.submit("el", "b", 1, pods=4, min_pods=2, running=True)
    w.submit("r", "a", 1, wclass="reserved")
    w.settle()
    assert w.status("r") == "Queued" and w.code("r") == "PREEMPTING"
    assert pods_running(w, "el") == 3
    (ex,) = w.exiting
    assert ex.part == 4 and ex.exits_at == 30
    w.advance(30)
    w.settle()
    assert w.status("r") == "Running" and pods_running(w, "el") == 3


def test_a_cheaper_victim_of_the_same_order_goes_before_a_pod() -> None:
    """A pod is one candidate among others in 6.5's order: a Starting job of
    the same team goes first (Starting before Running)."""
    w = World().pool(nodes=1, gpus=5).team("a", main=5).team("b")
    w.submit("el", "b", 1, pods=4, min_pods=1, running=True)
    w.instant_running = False
    w.submit("fresh", "b", 1)
    w.settle()
    w.submit("r", "a", 1, wclass="reserved")
    w.settle()
    assert w.status("fresh") == "Preempted" and pods_running(w, "el") == 4


@pytest.mark.parametrize("kept", [False, True], ids=["fresh", "kept-state"])
def test_a_pod_loses_one_pod_s_work_not_the_workload_s(kept: bool) -> None:
    """Least work lost reads a pod's own GPU-seconds: after 100 s the newest
    pod of an 8 x 1-GPU sweep (at least 4) has lost 100, a 2-GPU job of the
    same team 200, the sweep's last four pods (taken whole) 400. A 1-GPU
    reserved job takes the pod. With the
    kept-state runner the victim index was built at t=0 and re-reads work lost
    when time has moved."""
    w = World(CycleCache() if kept else None).pool(nodes=1, gpus=10).team("a", main=1).team("b")
    w.submit("sweep", "b", 1, pods=8, min_pods=4, running=True)
    w.submit("pair", "b", 2, running=True)
    w.advance(100)
    w.submit("r", "a", 1, wclass="reserved")
    w.settle()
    assert w.status("r") == "Running"
    assert w.status("pair") == "Running"
    assert w.status("sweep") == "Running" and pods_running(w, "sweep") == 7


def test_a_pod_needed_late_takes_the_newer_pods_with_it() -> None:
    """A 4-pod workload (min_pods 1) runs its pods alternately on two 2-GPU
    nodes (as a scenario's ``placement`` may describe it, SPEC 8): pods 0
    and 2 on n000, 1 and 3 on n001. A reserved 2-GPU job needs one whole
    node: pod 3, then pod 2, then pod 1 are taken (newest first) before
    n001 is free. Pod 2 is not needed for the job, but pods go newest first,
    so it cannot stay while the older pod 1 goes: pods 1-3 are preempted."""
    w = World().pool(nodes=2, gpus=2).team("u", main=4).team("o")
    wid = w.submit("el", "o", 1, pods=4, min_pods=1, priority=10)
    a, b = "main-n000", "main-n001"
    pods = tuple(PodPlacement(n, (DeviceShare(d, 1000),))
                 for n, d in ((a, 0), (b, 0), (a, 1), (b, 1)))
    state = transition(w.w("el"), Status.QUEUED, 0, pool="main")
    state = transition(state, Status.STARTING, 0, placement=pods)
    w.states[wid] = transition(state, Status.RUNNING, 0)
    w.submit("job", "u", 2, wclass="reserved")
    w.settle()
    assert w.status("job") == "Running" and [p.node for p in w.w("job").placement] == [b]
    assert w.status("el") == "Running" and w.w("el").placement == pods[:1]
    (p,) = w.preemptions
    assert (p.victim, p.pods) == (wid, (1, 2, 3))


def test_a_workload_taken_whole_after_its_pods_frees_the_rest_of_them() -> None:
    """SPEC 6.5, shrink before kill: b's reserved job needs 4 GPUs; a's
    elastically scaled job (4 pods of 1 GPU, min_pods 2, priority 10) gives
    its 2 newest pods, then is taken whole, which frees its other 2: that is
    enough, so a's other job (priority 20) keeps running."""
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.submit("scaled", "a", 1, pods=4, min_pods=2, priority=10, running=True)
    w.submit("other", "a", 1, pods=4, priority=20, running=True)
    w.submit("owner", "b", 1, pods=4, wclass="reserved")
    w.settle()
    assert w.preempted() == ["scaled"]
    assert (w.status("other"), w.status("owner")) == ("Running", "Running")
