"""The seed's acceptance scenarios S1-S7 (SPEC section 9) at engine level."""

from __future__ import annotations

from tests.engine.harness import World


def test_s1_reserved_reclaims_own_elastic() -> None:
    w = World().pool(nodes=4).team("nlp", main=32)
    for i in range(20):
        w.submit(f"inf{i:02d}", "nlp", wclass="reserved")
    for i in range(12):
        w.submit(f"exp{i:02d}", "nlp")
    w.settle()
    assert len(w.running()) == 32
    w.submit("train", "nlp", 1, pods=12, wclass="reserved")
    w.settle()
    assert w.status("train") == "Running"
    assert w.preempted() == [f"exp{i:02d}" for i in range(12)]
    assert len(w.running("inf")) == 20


def test_s2_higher_priority_elastic_displaces_lower() -> None:
    w = World().pool(nodes=1).team("a").team("b")
    w.submit("sweep", "a", 8, priority=50, running=True)
    w.submit("hi", "b", 8, priority=75)
    w.settle()
    assert w.status("sweep") == "Preempted"
    assert w.status("hi") == "Running"
    assert [p.milli for p in w.preemptions] == [8000]


def test_s3_elastic_inside_idle_reservation_starts_at_once() -> None:
    w = World().pool(nodes=4).team("vision", main=16).team("other", main=16)
    for i in range(4):
        w.submit(f"r{i}", "vision", wclass="reserved", running=True)
    w.submit("exp", "vision", 8)
    w.settle()
    assert w.status("exp") == "Running"
    assert w.preemptions == []


def _s4(nodes: int) -> World:
    w = World().pool(nodes=nodes).team("research", main=48).team("production", main=32)
    for i in range(20):
        w.submit(f"res{i:02d}", "research", wclass="reserved")
    for i in range(32):
        w.submit(f"prodr{i:02d}", "production", wclass="reserved")
    w.settle()
    for i in range(28):
        w.submit(f"prode{i:02d}", "production")
    w.settle()
    assert len(w.running("prode")) == 28
    w.submit("big", "research", 1, pods=24, wclass="reserved")
    w.settle()
    assert w.status("big") == "Running"
    return w


def test_s4_reclaim_exactly_what_is_needed() -> None:
    w = _s4(nodes=10)  # 80 GPUs, full
    assert len(w.preempted("prode")) == 24
    assert len(w.running("prode")) == 4
    assert len(w.running("prodr")) == 32 and len(w.running("res")) == 20
    assert w.preempted() == w.preempted("prode")


def test_s4b_idle_gpus_are_used_first() -> None:
    w = _s4(nodes=13)  # 104 GPUs: 24 idle before the big one arrives
    # 104 - 80 = 24 idle: nothing needs preempting.
    assert w.preempted() == []


def test_s4b_hundred_gpu_pool_preempts_only_four() -> None:
    w = World().pool(nodes=10, gpus=10).team("research", main=48).team("production", main=32)
    for i in range(20):
        w.submit(f"res{i:02d}", "research", wclass="reserved")
    for i in range(32):
        w.submit(f"prodr{i:02d}", "production", wclass="reserved")
    w.settle()
    for i in range(28):
        w.submit(f"prode{i:02d}", "production")
    w.settle()
    # 20 GPUs idle now (100 - 80).
    w.submit("big", "research", 1, pods=24, wclass="reserved")
    w.settle()
    assert w.status("big") == "Running"
    assert len(w.preempted("prode")) == 4
    assert len(w.running("prode")) == 24


def test_s5_surplus_split_follows_weights() -> None:
    w = (World().pool(nodes=6)
         .team("research", weight=3).team("nlp", "research", weight=2)
         .team("vision", "research", weight=1).team("production", weight=2))
    for team in ("nlp", "vision", "production"):
        for i in range(60):
            w.submit(f"{team}{i:02d}", team)
    w.settle()
    ent = w.plans[-1].entitlements["main"]
    assert float(ent["research"]) == 28800 and float(ent["production"]) == 19200
    assert float(ent["nlp"]) == 19200 and float(ent["vision"]) == 9600
    assert abs(w.usage("nlp") - 19.2) <= 1
    assert abs(w.usage("vision") - 9.6) <= 1
    assert abs(w.usage("production") - 19.2) <= 1
    assert w.preemptions == []


def test_s6_burst_limit_caps_usage() -> None:
    w = World().pool(nodes=12).team("capped", limit=50, main=32).team("zero", limit=0, main=8)
    for i in range(80):
        w.submit(f"c{i:02d}", "capped")
    for i in range(20):
        w.submit(f"z{i:02d}", "zero")
    w.settle()
    assert w.usage("capped") == 48
    assert w.usage("zero") == 8
    assert w.code("c79") == "BURST_LIMIT_REACHED"
    assert w.code("z19") == "BURST_LIMIT_REACHED"


def test_s7_gang_waits_then_starts_together() -> None:
    w = World().pool(nodes=1).team("t")
    w.submit("a", "t", 1, running=True)
    w.submit("b", "t", 1, running=True)
    w.submit("gang", "t", 1, pods=8)
    w.settle()
    assert w.status("gang") == "Queued"
    assert w.code("gang") == "GANG_WAITING"
    w.states[w.names["a"]] = _complete(w, "a")
    w.settle()
    assert w.status("gang") == "Queued"
    w.states[w.names["b"]] = _complete(w, "b")
    w.settle()
    assert w.status("gang") == "Running"
    assert len(w.w("gang").placement) == 8


def _complete(w: World, name: str):
    from apportion.domain.lifecycle import Status, transition

    return transition(w.w(name), Status.COMPLETED, w.now)
