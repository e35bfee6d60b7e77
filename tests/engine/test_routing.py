"""Allocation choice across pools (SPEC 6.1)."""

from __future__ import annotations

from fractions import Fraction

from apportion.domain.lifecycle import Status, transition
from tests.engine.harness import World


def two_pools() -> World:
    return World().pool("p1", nodes=1).pool("p2", nodes=1)


def test_prefers_pool_where_it_starts_now() -> None:
    w = two_pools().team("t")
    w.submit("fill", "t", 8, pool="p1", running=True)
    w.submit("job", "t", 4)
    w.settle()
    assert w.w("job").pool == "p2" and w.status("job") == "Running"


def test_prefers_cheapest_preemption_when_nothing_is_free() -> None:
    w = two_pools().team("a").team("b", p1=8, p2=8)
    w.submit("big", "a", 8, pool="p1", running=True)
    w.submit("s1", "a", 4, pool="p2", running=True)
    w.submit("s2", "a", 4, pool="p2", running=True)
    w.submit("need", "b", 4, wclass="reserved")
    w.settle()
    assert w.w("need").pool == "p2"
    assert len(w.preempted()) == 1


def test_elastic_prefers_its_own_reservation() -> None:
    w = two_pools().team("t", p2=4).team("other", p1=4)
    w.submit("job", "t", 2)
    w.settle()
    assert w.w("job").pool == "p2"


def test_gpu_type_and_pin_filter_pools() -> None:
    w = World().pool("a100s", nodes=1, gpu_type="a100").pool("h100s", nodes=1, gpu_type="h100")
    w.nodes = [n.__class__(n.name, n.pool, n.gpus, gpu_type=w.pools[n.pool].gpu_type)
               for n in w.nodes]
    w.team("t")
    w.submit("typed", "t", 1, gpu_type="h100")
    w.submit("pinned", "t", 1, pool="a100s")
    w.settle()
    assert w.w("typed").pool == "h100s"
    assert w.w("pinned").pool == "a100s"


def test_queued_workload_moves_only_when_it_can_start_elsewhere_now() -> None:
    w = two_pools().team("t")
    w.submit("p1fill", "t", 8, pool="p1", running=True)
    w.submit("p2fill", "t", 8, pool="p2", running=True)
    w.submit("job", "t", 8)
    w.settle()
    assert w.status("job") == "Queued"
    first = w.w("job").pool
    other = "p2" if first == "p1" else "p1"
    fill = w.names[f"{other}fill"]
    w.states[fill] = transition(w.states[fill], Status.COMPLETED, w.now)
    w.settle()
    assert w.w("job").pool == other and w.status("job") == "Running"


def test_route_and_start_decisions_say_why() -> None:
    w = two_pools().team("t", p2=4).team("other", p1=4)
    w.submit("job", "t", 2)
    w.cycle()
    route, start = [d for d in w.plans[-1].decisions if d.kind.value in ("route", "start")]
    assert route.message == "pool p2: chosen over pool p1 by its team's own reservation there"
    assert start.message.startswith("admitted in pool p2 on free GPUs (p2-n000")
    decisions = w.plans[-1].to_dict()["decisions"]
    assert decisions[0]["cycle_id"] == w.plans[-1].cycle_id
    assert [(d["kind"], d["pool"]) for d in decisions] == [("route", "p2"), ("start", "p2")]
    (pod,) = decisions[1]["placement"]  # one pod of 2 whole GPUs, {index, milli} each
    assert pod["node"] == "p2-n000" and [d["milli"] for d in pod["devices"]] == [1000, 1000]


def test_equal_entitlement_headroom_falls_to_the_pool_name() -> None:
    """t uses 2 GPUs of p1, all of its entitlement there (its demand: the pool
    has room for it), and nothing of p2: its headroom is 0 in both, so the
    last rule of 6.1, the pool name, sends its next job to p1, used or not."""
    w = two_pools().team("t")
    w.submit("first", "t", 2, pool="p1", running=True)
    w.submit("job", "t", 1)
    w.settle()
    assert w.w("job").pool == "p1" and w.status("job") == "Running"


def test_headroom_in_half_milli_gpus_decides_the_pool() -> None:
    """Shares need not be whole milli-GPUs (SPEC 1: exact rationals). In p1,
    c's 1-milli job (priority 60) is served first, and a and b split the other
    7999 milli at priority 50: 3999.5 each. a runs 4 GPUs there, half a
    milli over its share; it uses nothing of p2, where its headroom is 0.
    Both pools can start a's new job now, neither inside a reservation, so
    the most headroom wins: p2 (0 > -0.5), not p1 by its name."""
    w = two_pools().team("a").team("b").team("c")
    w.submit("tiny", "c", None, gpu_memory_mib=1, priority=60, pool="p1", running=True)
    w.submit("a-run", "a", 4, pool="p1", running=True)
    w.submit("b-wait", "b", 5, pool="p1")  # Queued: 6.4 lets it take nothing of a's
    w.settle()
    assert w.status("b-wait") == "Queued"
    assert w.plans[-1].entitlements["p1"]["a"] == Fraction(7999, 2)
    w.submit("job", "a", 1)
    w.settle()
    assert w.w("job").pool == "p2" and w.status("job") == "Running"


def test_equal_cost_preemptions_fall_to_the_domain_name_before_the_pool_name() -> None:
    """SPEC 6.1 prefers "the cheapest preemption (cost as in 6.5)", and 6.5's
    cost ends with the domain name: two pools whose victim sets cost the same
    (one Running 4-GPU job of team a each) are told apart by the rack W would
    use, r1 in p2 before r9 in p1, before the pool name (the last criterion)
    is read. b's reserved job needing a whole rack goes to p2 and preempts
    a2 there; a1 keeps running in p1."""
    w = (World().pool("p1", racks={"r9": 1}, gpus=4, topology=("zone", "rack"))
         .pool("p2", racks={"r1": 1}, gpus=4, topology=("zone", "rack")))
    w.team("a").team("b", p1=4, p2=4)
    w.submit("a1", "a", 4, pool="p1", running=True)
    w.submit("a2", "a", 4, pool="p2", running=True)
    w.submit("need", "b", 4, wclass="reserved", topology={"level": "rack", "mode": "required"})
    w.settle()
    assert w.w("need").pool == "p2" and w.status("need") == "Running"
    assert w.preempted() == ["a2"] and w.status("a1") == "Running"
    assert w.w("need").placement[0].node == "p2-r1-n0"
