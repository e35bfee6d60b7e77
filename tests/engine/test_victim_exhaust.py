"""The failure shortcut of victim searches (engine/preemption/exhaust.py) is exact:
it says "W would fit on the greedy's final set" exactly when the greedy
finds a victim set, and the cycle's decisions are the same with and without it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.domain.cluster import NodeState
from apportion.engine.preemption import search as preemption
from apportion.engine.preemption.exhaust import exhaustion_fits
from apportion.engine.snapshot import ALL_SHORTCUTS, Shortcuts
from tests.engine.harness import NoFixedPoint, World
from tests.engine.test_cycle_properties import complete_and_advance, same_org, submit_step

GPUS = st.sampled_from([0.25, 0.5, 0.75, 1, 1, 2, 4])


@st.composite
def crowded(draw: st.DrawFn) -> tuple[World, list[dict], list[dict], int | None]:
    """A three-level tree (2 top x 2 middle x 2 leaves) on 4 nodes of 4 GPUs,
    with caps, weights, priorities, grace and starvation holds, filled with
    small elastic work, then a stream of submissions (some scaling elastically
    or selecting nodes by label); maybe a node cordoned after the fill."""
    grace = draw(st.sampled_from([0, 0, 30]))
    hold = draw(st.sampled_from([None, None, 30]))
    w = World().pool(racks={"r0": 2, "r1": 2}, gpus=4, topology=("zone", "rack"),
                     preemption_grace=grace, starvation_hold_after=hold)
    leaves = []
    left = 16
    for t in range(2):
        top = f"t{t}"
        res = draw(st.integers(0, min(left, 8)))
        left -= res
        w.team(top, weight=draw(st.integers(1, 3)),
               limit=draw(st.sampled_from([None, None, 50, 100])), main=res)
        for m in range(2):
            mid = f"{top}m{m}"
            mres = draw(st.integers(0, res // 2))
            w.team(mid, top, weight=draw(st.integers(1, 3)),
                   limit=draw(st.sampled_from([None, None, None, 100])), main=mres)
            for leaf_i in range(2):
                leaf = f"{mid}l{leaf_i}"
                w.team(leaf, mid, weight=draw(st.integers(1, 3)),
                       main=draw(st.integers(0, mres // 2)))
                leaves.append(leaf)

    def step(name: str, gpus: st.SearchStrategy[float], wclass: st.SearchStrategy[str],
             topology: st.SearchStrategy[str | None]) -> dict:
        return {
            "name": name,
            "team": draw(st.sampled_from(leaves)),
            "gpus": draw(gpus),
            "pods": draw(st.integers(1, 3)),
            "wclass": draw(wclass),
            "priority_shift": draw(st.integers(0, 2)),
            "requeue": draw(st.booleans()),
            "topology": draw(topology),
            "complete": draw(st.integers(0, 5)),
        }

    # First the pool fills with small elastic work of many teams (so teams
    # run over their shares), then work arrives that must preempt to start.
    fill = [step(f"f{i}", st.sampled_from([0.25, 0.25, 0.5, 0.75, 1]), st.just("elastic"),
                 st.just(None)) for i in range(draw(st.integers(8, 30)))]
    steps = [step(f"w{i}", GPUS, st.sampled_from(["reserved", "elastic", "elastic", "elastic"]),
                  st.sampled_from([None, None, None, "required", "preferred"]))
             for i in range(draw(st.integers(3, 12)))]
    for s in steps:  # elastic scaling and node selectors on some arrivals
        s["min_pods"] = draw(st.integers(1, s["pods"])) if draw(st.booleans()) else None
        s["selector"] = draw(st.sampled_from([None, None, "a", "b"]))
    # Half the nodes are of kind "a"; one may be cordoned after the fill.
    w.nodes = [replace(n, labels={**n.labels, "kind": "ab"[i % 2]})
               for i, n in enumerate(w.nodes)]
    return w, fill, steps, draw(st.sampled_from([None, None, 0, 3]))


#: The greedy runs every time: its answer is checked against the shortcut's.
NO_EXHAUST = Shortcuts(exhaust=False)


@contextmanager
def greedy_checked(counts: dict[Any, int]) -> Iterator[None]:
    """Run searches the plain way (shortcut off) and check, before each greedy,
    that the shortcut's answer is the greedy's outcome."""
    original = preemption.greedy

    def checked(self: preemption.VictimSearch, dom: Any, free: int) -> Any:
        index = self.ps.victims
        sub = index.domain(dom) if dom is not None else None
        answer = None
        if (not self.for_hold and not self.w.spec.is_reserved and self._probe is not None
                and (dom is None or sub is not None)):
            answer, _ = exhaustion_fits(
                self.ws, self.ps, self.w, sub if sub is not None else index, self.eligible,
                self.ps.cluster.probe(self.req, domain=dom), free, self.need,
                self.own_debt(),
            )
        chosen, free_after = original(self, dom, free)
        if answer is not None:
            assert answer == (chosen is not None), (self.w.name, dom, answer)
            counts[answer] = counts.get(answer, 0) + 1
        return chosen, free_after

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(preemption, "greedy", checked)
        yield


def submit_arrival(w: World, step: dict) -> None:
    """:func:`submit_step` plus ``min_pods`` and a node selector."""
    prio = {"reserved": 100 + 100 * step["priority_shift"],
            "elastic": 25 * (step["priority_shift"] + 1)}[step["wclass"]]
    topo = {"level": "rack", "mode": step["topology"]} if step["topology"] else None
    w.submit(step["name"], step["team"], step["gpus"], pods=step["pods"],
             min_pods=step.get("min_pods"), wclass=step["wclass"], priority=prio,
             topology=topo, requeue_on_preemption=step["requeue"],
             node_selector={"kind": step["selector"]} if step.get("selector") else None)


def replay(
    world: World, fill: list[dict], steps: list[dict], cordon: int | None,
    shortcuts: Shortcuts = ALL_SHORTCUTS,
) -> tuple[list, dict[str, str]]:
    """Fill, maybe cordon node ``cordon``, then submit ``steps`` one by one.

    Some drawn worlds never settle (requeued victims that take their places
    back in a loop, docs/scheduling.md "Preemption cycles"); the replay ends
    there, with every search up to that point checked."""
    w = same_org(world)
    w.shortcuts = shortcuts
    try:
        for step in fill:
            submit_step(w, step)
        w.settle()
        if cordon is not None:
            w.nodes = [replace(n, state=NodeState.CORDONED) if i == cordon else n
                       for i, n in enumerate(w.nodes)]
        for step in steps:
            submit_arrival(w, step)
            w.settle()
            complete_and_advance(w, step)
            w.settle()
    except NoFixedPoint:
        pass
    return [p.decisions for p in w.plans], {n: w.status(n) for n in w.names}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded())
def test_the_shortcut_answers_what_the_greedy_finds(
    case: tuple[World, list[dict], list[dict], int | None],
) -> None:
    with greedy_checked({}):
        replay(*case, shortcuts=NO_EXHAUST)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded())
def test_plans_are_the_same_with_and_without_the_shortcut(
    case: tuple[World, list[dict], list[dict], int | None],
) -> None:
    assert replay(*case) == replay(*case, shortcuts=NO_EXHAUST)


def _shared_devices() -> World:
    """Every device of two 4-GPU nodes holds 0.75 GPU of team a's elastic work
    and a reserved quarter of team b; b's sibling c has nothing yet."""
    w = World().pool(nodes=2, gpus=4)
    w.team("org", main=8).team("a", "org").team("b", "org", main=2).team("c", "org")
    for i in range(8):
        w.submit(f"a{i}", "a", 0.75, running=True)
    for i in range(8):
        w.submit(f"r{i}", "b", 0.25, wclass="reserved", running=True)
    return w


def _checked_request(gpus: float) -> tuple[World, dict[Any, int]]:
    """c submits ``gpus`` on the shared devices; every search checked."""
    counts: dict[Any, int] = {}
    w = _shared_devices()
    w.shortcuts = NO_EXHAUST
    with greedy_checked(counts):
        w.submit("want", "c", gpus)
        w.settle()
    return w, counts


def test_a_search_that_can_never_succeed_is_decided_by_the_shortcut() -> None:
    """c's whole GPU needs a device with nothing on it; every device keeps
    b's reserved quarter, so no choice of a's pods frees one. The greedy
    takes a's pods while a stays over its share, then gives up; the
    shortcut gives the same answer (checked) and the cycle preempts nothing."""
    w, counts = _checked_request(1)
    assert counts.get(False, 0) >= 1 and True not in counts
    assert w.status("want") == "Queued"
    reason = w.w("want").reason
    assert reason is not None and reason.code.value == "FAIR_SHARE"
    assert "do not let this workload take enough of it to make room" in reason.message
    assert w.preempted() == []

    w = _shared_devices()
    w.submit("want", "c", 1)
    plan = w.cycle()
    assert w.status("want") == "Queued" and w.preempted() == []
    assert plan.counters["victim_searches"] == 1


def test_a_search_that_succeeds_is_left_to_the_greedy() -> None:
    """Same fleet, but c asks for a quarter: the first victim frees room, and
    the shortcut says so as soon as it has taken that one out."""
    w, counts = _checked_request(0.25)
    assert counts.get(True, 0) >= 1 and False not in counts
    assert w.status("want") == "Running"
    assert len(w.preempted()) == 1


@pytest.mark.parametrize(("gpus", "victims"), [
    (3, ["a1", "a2", "a3"]),
    (4, ["a1", "a2", "a3", "b1"]),
])
def test_a_nomination_of_a_team_over_its_share_is_taken_with_the_shortcut_on(
    gpus: int, victims: list[str]
) -> None:
    """SPEC 6.4-6.6: a team's nomination counts as its usage and is the
    cheapest victim class. b runs b1 and its priority-20 nb preempted a's a1
    (grace 100: nb is nominated); then c asks for 3 (or all 4) of the 4 GPUs
    at priority 30. By priority level c is entitled to what it asks, b to at
    most nb's 1, a to nothing: a (2 GPUs) and b (2 with nb's nomination) are
    both over. c's search, with the failure shortcut deciding first, must see
    that a's two GPUs are not enough and that b's nomination frees a third
    device (and, for 4, b1 the last): want is nominated, nb goes back to
    waiting, b1 stays when 3 are enough, and once the grace is over want runs."""
    counts: dict[Any, int] = {}
    w = World().pool(nodes=1, gpus=4, preemption_grace=100)
    w.team("a").team("b").team("c")
    for i in (1, 2, 3):
        w.submit(f"a{i}", "a", 1, priority=10, running=True)
    w.submit("b1", "b", 1, priority=10, running=True)
    w.submit("nb", "b", 1, priority=20)
    w.settle()
    assert w.code("nb") == "PREEMPTING" and w.preempted() == ["a1"]
    w.advance(10)
    w.submit("want", "c", gpus, priority=30)
    with greedy_checked(counts):
        w.cycle()
    assert counts.get(True, 0) >= 1  # the shortcut answered "it fits", as the greedy found
    assert w.code("want") == "PREEMPTING"
    assert sorted(w.preempted()) == victims
    assert w.status("nb") == "Queued" and w.code("nb") != "PREEMPTING"
    assert (w.status("b1") == "Running") is ("b1" not in victims)
    w.advance(100)
    w.settle()
    assert w.status("want") == "Running"
