"""Elastic scaling of reserved work (SPEC 1 and 6): a reserved workload
starts as many pods as its team's reservation has room for, whole pods only,
and at least min_pods."""

from __future__ import annotations

from tests.engine.harness import World


def test_a_reserved_job_starts_the_whole_pods_its_reservation_has_room_for() -> None:
    """b reserves 2.5 GPUs: of four 1-GPU pods (min 2), two start; half a pod
    is not a pod."""
    w = World().pool(nodes=1, gpus=8).team("a").team("b", main=2.5)
    w.submit("sweep", "b", 1, wclass="reserved", pods=4, min_pods=2)
    w.settle()
    assert w.status("sweep") == "Running"
    assert len(w.w("sweep").placement) == 2
    assert w.usage("b") == 2
    (start,) = [d for p in w.plans for d in p.decisions if d.kind.value == "start"]
    assert start.milli == 2000
    assert start.message == "admitted in pool main on free GPUs (main-n000)"


def test_a_reserved_job_below_min_pods_of_room_waits() -> None:
    """With 1.5 GPUs reserved, one whole pod fits and min_pods is 2: it can
    never start as reserved work, and the reason says so."""
    w = World().pool(nodes=1, gpus=8).team("a").team("b", main=1.5)
    w.submit("sweep", "b", 1, wclass="reserved", pods=4, min_pods=2)
    w.settle()
    assert w.status("sweep") == "Pending" and w.usage("b") == 0
    assert w.code("sweep") == "RESERVATION_TOO_SMALL"
    reason = w.w("sweep").reason
    assert reason is not None and reason.message == (
        "needs 2-4 pods x 1 GPU reserved in pool main; the reservations on team b's"
        " path hold at most 1.5: raise a reservation or submit it as elastic")


def test_reserved_work_fits_to_the_milli_gpu_across_nested_buckets() -> None:
    """SPEC 2: reserved work fits if, with it added, the overflow out of its
    top-level team stays 0. l's bucket is 1 GPU, p's own 0.249, t's own 0.25
    (1.499 reserved on the path). a (1 GPU) fills l's bucket; b (0.25) takes
    p's 0.249 and 1 milli-GPU of t's bucket, which has 0.249 left then: c
    (0.25) waits, its reason naming the numbers."""
    w = World().pool(nodes=1, gpus=8)
    w.team("t", main=1.499).team("p", "t", main=1.249).team("l", "p", main=1)
    w.submit("a", "l", 1, wclass="reserved", running=True)
    w.submit("b", "l", 0.25, wclass="reserved")
    w.submit("c", "l", 0.25, wclass="reserved")
    w.settle()
    assert (w.status("b"), w.status("c")) == ("Running", "Queued")
    reason = w.w("c").reason
    assert reason is not None and reason.code.value == "RESERVATION_EXHAUSTED"
    assert reason.message == ("needs 0.25 GPUs; team l's reservation in pool main has 0.249"
                              " free (reserved in use on its path: 1.25 of 1.499)")
