"""Invariants over random pools and operation sequences (Hypothesis).

A naive model (per-device numbers recomputed from the owners' records) checks
the indexes: free capacity, best fit of single pods, and the invariants of
SPEC 5 (no device above 1000, gangs whole, required topology, ready nodes
only, determinism, exact rollback).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.domain.cluster import Node, NodeState
from apportion.domain.workload import Placement
from apportion.engine.placement import ClusterState, PlacementRequest, PlacementResult

from .helpers import all_used, req, state

GPUS = (0.25, 0.5, 0.75, 1, 2, 4)


@st.composite
def pools(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(1, 6))
    out = []
    for i in range(count):
        labels = {} if draw(st.integers(0, 5)) == 0 else {"rack": f"r{draw(st.integers(0, 2))}"}
        node_state = draw(st.sampled_from(["ready", "ready", "ready", "cordoned", "down"]))
        out.append(Node(f"n{i}", "p", draw(st.integers(1, 8)), labels=labels,
                        state=NodeState(node_state)))
    return out


@st.composite
def requests(draw: st.DrawFn, owner: int) -> PlacementRequest:
    gpus = draw(st.sampled_from(GPUS))
    pods = draw(st.integers(1, 5))
    topology = draw(st.sampled_from([None, "required", "preferred"]))
    milli = draw(st.sampled_from([None, None, 333, 1000]))
    return req(gpus if milli is None else 0, pods, draw(st.integers(1, pods)),
               topology=None if topology is None else "rack", mode=topology or "required",
               owner=(owner, 0, 0), milli=milli)


@dataclass
class Run:
    """What one sequence produced: results and the states of the devices."""

    results: list[PlacementResult] = field(default_factory=list)
    used: list[dict[tuple[str, int], int]] = field(default_factory=list)


def _ops(draw: st.DrawFn) -> list[tuple[str, int, PlacementRequest]]:
    ops = []
    for k in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["place", "place", "place", "vacate", "exit", "claim"]))
        ops.append((kind, draw(st.integers(1, k + 1)), draw(requests(k + 1))))
    return ops


operations = st.composite(_ops)


def _apply(cs: ClusterState, node_list: list[Node],
           ops: list[tuple[str, int, PlacementRequest]]) -> Run:
    run = Run()
    for kind, target, request in ops:
        if kind == "vacate":
            cs.vacate((target, 0, 0))
        elif kind == "exit":
            cs.mark_exiting((target, 0, 0))
        else:
            res = cs.place(request)
            run.results.append(res)
            if res.ok and kind == "place":
                cs.occupy(request.owner, res.pods)  # ValueError would be a device over 1000
            elif res.ok:
                cs.claim(request.owner, res.pods)
        run.used.append(all_used(cs, node_list))
    return run


def _check_result(node_list: list[Node], request: PlacementRequest, res: PlacementResult) -> None:
    by_name = {n.name: n for n in node_list}
    if not res.ok:
        assert res.pods == () and res.failure is not None
        return
    assert request.min_pods <= len(res.pods) <= request.pods  # gangs whole
    assert all(by_name[p.node].state is NodeState.READY for p in res.pods)
    topo = request.topology
    if topo is not None and topo.mode == "required":
        assert len({by_name[p.node].labels.get("rack") for p in res.pods}) == 1
        assert by_name[res.pods[0].node].labels.get("rack") is not None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_list=pools(), data=st.data())
def test_invariants_and_determinism(node_list: list[Node], data: st.DataObject) -> None:
    ops = data.draw(operations())
    first = _apply(state(node_list, topology=("rack",)), node_list, ops)
    second = _apply(state(reversed(node_list), topology=("rack",)), node_list, ops)
    assert first.results == second.results and first.used == second.used  # determinism
    results = iter(first.results)
    for kind, _, request in ops:
        if kind in ("place", "claim"):
            _check_result(node_list, request, next(results))
    for used in first.used:
        assert all(0 <= milli <= 1000 for milli in used.values())


def _naive_avail(cs: ClusterState, node_list: list[Node], claims: dict[tuple[str, int], int],
                 exiting: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    out = {}
    for n in node_list:
        for i in range(n.gpus):
            used = cs.device_used(n.name, i)
            ex = exiting.get((n.name, i), 0)
            free = 1000 - (used - ex) - max(ex, claims.get((n.name, i), 0))
            out[(n.name, i)] = max(0, free) if n.state is NodeState.READY else 0
    return out


def _shares(placement: Placement) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for pod in placement:
        for d in pod.devices:
            out[(pod.node, d.index)] = out.get((pod.node, d.index), 0) + d.milli
    return out


@settings(max_examples=120, deadline=None)
@given(node_list=pools(), data=st.data())
def test_index_matches_a_naive_scan(node_list: list[Node], data: st.DataObject) -> None:
    cs = state(node_list)
    claims: dict[tuple[str, int], int] = {}
    exiting: dict[tuple[str, int], int] = {}
    for k in range(data.draw(st.integers(1, 12))):
        request = data.draw(requests(k + 1))
        res = cs.place(request)
        if not res.ok:
            continue
        what = data.draw(st.sampled_from(["occupy", "exiting", "claim"]))
        target = exiting if what == "exiting" else claims
        if what == "occupy":
            cs.occupy(request.owner, res.pods)
        elif what == "exiting":
            cs.occupy_exiting(request.owner, res.pods)
        else:
            cs.claim(request.owner, res.pods)
        if what != "occupy":
            for key, milli in _shares(res.pods).items():
                target[key] = target.get(key, 0) + milli
    avail = _naive_avail(cs, node_list, claims, exiting)
    assert cs.free_milli() == sum(avail.values())
    for milli in (250, 500, 750, 333):
        res = cs.place(req(0, milli=milli, owner=(99, 0, 0)))
        partial = sorted((a, k) for k, a in avail.items() if milli <= a < 1000)
        if partial:
            assert res.ok and [(p.node, p.devices[0].index) for p in res.pods] == [partial[0][1]]
        elif not any(a == 1000 for a in avail.values()):
            assert not res.ok
        else:  # no partly used device fits: a whole free one takes the share
            assert res.ok and avail[(res.pods[0].node, res.pods[0].devices[0].index)] == 1000


@settings(max_examples=80, deadline=None)
@given(node_list=pools(), data=st.data())
def test_rollback_restores_the_exact_state(node_list: list[Node], data: st.DataObject) -> None:
    cs = state(node_list, topology=("rack",))
    ops = data.draw(operations())
    split = data.draw(st.integers(0, len(ops)))
    _apply(cs, node_list, ops[:split])
    probes = [req(0.25, 3), req(1, 2, topology="rack"), req(2), req(0, milli=333)]
    before = (all_used(cs, node_list), [cs.place(p) for p in probes], cs.free_milli(),
              [cs.claim_of((k, 0)) for k in range(1, 16)])
    token = cs.checkpoint()
    _apply(cs, node_list, ops[split:])
    cs.rollback(token)
    after = (all_used(cs, node_list), [cs.place(p) for p in probes], cs.free_milli(),
             [cs.claim_of((k, 0)) for k in range(1, 16)])
    assert after == before


def _index_contents(cs: ClusterState) -> dict[object, tuple[object, ...]]:
    """Every scope's index as plain data (what the queries read)."""
    book = cs._book
    assert not book._dirty, "an operation left node counts un-indexed"
    return {
        key: (dict(sorted(ix.partial.items())), list(ix.partial_levels),
              dict(sorted(ix.by_full.items())), list(ix.full_levels),
              ix.free_total, ix.full_total)
        for key, ix in sorted(book.scopes.items(), key=lambda kv: repr(kv[0]))
    }


@settings(max_examples=80, deadline=None)
@given(node_list=pools(), data=st.data())
def test_incremental_indexes_equal_indexes_built_from_scratch(
    node_list: list[Node], data: st.DataObject
) -> None:
    """After any mix of operations, trials and rollbacks, each scope's index
    (kept up to date device by device, node counts once per operation) is the
    index a fresh build over the same device numbers gives."""
    cs = state(node_list, topology=("rack",))
    ops = data.draw(operations())
    split = data.draw(st.integers(0, len(ops)))
    _apply(cs, node_list, ops[:split])
    token = cs.checkpoint()
    _apply(cs, node_list, ops[split:])
    if data.draw(st.booleans()):
        cs.rollback(token)
    cs.commit_checkpoint(token)
    for probe in (req(1, 2, topology="rack"), req(0.25, 3)):
        cs.place(probe)  # queries build more scopes; they must match too
    fresh = state(node_list, topology=("rack",))
    book, new = cs._book, fresh._book
    for g in range(len(book.stay)):
        new.set_device(g, book.stay[g], book.exiting[g], book.claimed[g])
    new.flush()
    for fkey, constraints in list(book.scopes):
        new.scope(fkey, constraints)
    assert _index_contents(fresh) == _index_contents(cs)


@settings(max_examples=200, deadline=None)
@given(node_list=pools(), data=st.data())
def test_fit_probe_agrees_with_taking_owners_out_for_real(
    node_list: list[Node], data: st.DataObject
) -> None:
    """The probe victim searches use answers exactly what vacating the owners
    (and dropping their claims) and asking :meth:`fits` would answer."""
    cs = state(node_list, topology=("rack",))
    _apply(cs, node_list, data.draw(operations()))
    request = replace(data.draw(requests(99)), owner=(99, 0, 0))
    domain = data.draw(st.sampled_from([None, ("rack", "r0"), ("rack", "r1")]))
    topo = request.topology
    if topo is not None and topo.mode == "required" and domain is None:
        domain = ("rack", data.draw(st.sampled_from(["r0", "r1", "r2"])))
    probe = cs.probe(request, domain=domain)
    assert probe.fits() == cs.fits(request, domain=domain, allow_exiting=True)
    book = cs._book
    owners = sorted(set(book.occupancy) | set(book.claims))
    out: set[tuple[int, int]] = set()
    for _ in range(data.draw(st.integers(1, 8))):
        if not owners:
            break
        owner = data.draw(st.sampled_from(owners))
        if owner in out:
            probe.put_back(owner)
            out.discard(owner)
        else:
            probe.take_out(owner)
            out.add(owner)
        token = cs.checkpoint()
        for o in sorted(out):
            cs.vacate(o)
            cs.unclaim(o)
        real = cs.fits(request, domain=domain, allow_exiting=True)
        cs.rollback(token)
        cs.commit_checkpoint(token)
        assert probe.fits() == real


@settings(max_examples=100, deadline=None)
@given(node_list=pools(), data=st.data())
def test_place_and_occupy_equals_place_then_occupy(
    node_list: list[Node], data: st.DataObject
) -> None:
    """Packing once and keeping the pods gives the state (and indexes) that
    placing, undoing and occupying the same placement gives."""
    ops = data.draw(operations())
    request = replace(data.draw(requests(99)), owner=(99, 0, 0))
    a, b = state(node_list, topology=("rack",)), state(node_list, topology=("rack",))
    _apply(a, node_list, ops)
    _apply(b, node_list, ops)
    res_a = a.place(request)
    if res_a.ok:
        a.occupy(request.owner, res_a.pods)
    res_b = b.place_and_occupy(request)
    assert res_b == res_a
    assert all_used(b, node_list) == all_used(a, node_list)
    assert b._book.occupancy == a._book.occupancy
    assert _index_contents(b) == _index_contents(a)
