"""Claims (nominations, holds), exiting victims and trials (SPEC 6.4-6.7)."""

from __future__ import annotations

import pytest

from apportion.engine.placement import FailureKind

from .helpers import all_used, layout, nodes, pods_on, req, state, whole

W, V, X = (10, 1, 0), (20, 1, 0), (30, 1, 0)  # preemptor, victim, someone else


def test_nomination_on_exiting_victim_devices() -> None:
    node_list = nodes(("a", 2))
    cs = state(node_list)
    cs.occupy(V, whole("a", 0, 1))
    cs.mark_exiting(V)  # chosen as a victim, grace > 0
    assert cs.device_used("a", 0) == 1000
    assert cs.place(req(2, owner=X)).failure is FailureKind.WAITING_FOR_CAPACITY
    assert layout(cs.place(req(2, owner=W), allow_exiting=True)) == [("a", (0, 1), 2000)]
    cs.claim(W, whole("a", 0, 1))
    assert cs.claim_of(W) == whole("a", 0, 1)
    assert not cs.can_start_on_claim(W)  # victim still holds the devices
    assert cs.place(req(1, owner=X), allow_exiting=True).ok is False  # claimed for W
    cs.vacate(V)  # victim exits
    assert cs.can_start_on_claim(W)
    assert cs.free_milli(X) == 0 and cs.free_milli(W) == 2000
    assert cs.place(req(1, owner=X)).failure is FailureKind.WAITING_FOR_CAPACITY
    assert layout(cs.place(req(2, owner=W))) == [("a", (0, 1), 2000)]
    cs.unclaim(W)
    cs.occupy(W, whole("a", 0, 1))
    assert all_used(cs, node_list) == {("a", 0): 1000, ("a", 1): 1000}


@pytest.mark.parametrize(
    ("exiting", "claims", "owner", "available"),
    [
        pytest.param(500, {W: 500}, X, 500, id="claim-covered-by-exiting"),
        pytest.param(500, {W: 750}, X, 250, id="claim-beyond-exiting"),
        pytest.param(250, {W: 250, X: 250}, X, 750, id="own-claim-counts-as-free"),
        pytest.param(0, {W: 250}, W, 1000, id="own-claim-only"),
        pytest.param(750, {}, X, 250, id="exiting-only"),
    ],
)
def test_availability_rule(exiting: int, claims: dict[tuple[int, int], int],
                           owner: tuple[int, int, int], available: int) -> None:
    cs = state(nodes(("a", 1)))
    if exiting:
        cs.occupy_exiting(V, (pods_on("a", (0, exiting)),))
    for who, milli in claims.items():
        cs.claim(who, (pods_on("a", (0, milli)),))
    assert cs.free_milli(owner) == available
    if available:
        assert cs.place(req(0, milli=available, owner=owner)).ok
    if available < 1000:
        assert not cs.place(req(0, milli=available + 1, owner=owner)).ok


def test_can_start_on_claim_keeps_other_claims_satisfiable() -> None:
    cs = state(nodes(("a", 1)))
    cs.occupy((5, 0, 0), (pods_on("a", (0, 500)),))
    cs.claim(W, (pods_on("a", (0, 500)),))
    cs.claim(X, (pods_on("a", (0, 250)),))  # a starvation hold beyond the free part
    assert not cs.can_start_on_claim(W)
    cs.unclaim(X)
    assert cs.can_start_on_claim(W)
    assert not cs.can_start_on_claim(V)  # no claim


def test_claim_replaces_previous_claim() -> None:
    cs = state(nodes(("a", 2)))
    cs.claim(W, whole("a", 0))
    cs.claim(W, whole("a", 1))
    assert cs.claim_of(W) == whole("a", 1) and cs.free_milli(X) == 1000


def test_rollback_restores_everything_and_tokens_are_reusable() -> None:
    node_list = nodes(("a", 4), ("b", 4))
    cs = state(node_list)
    cs.occupy(V, whole("a", 0, 1))
    cs.claim(X, whole("b", 3))
    before = (all_used(cs, node_list), cs.place(req(2, pods=3)), cs.free_milli())
    token = cs.checkpoint()
    for _ in range(2):
        cs.vacate(V)
        cs.unclaim(X)
        cs.occupy(W, whole("b", 0, 1, 2, 3))
        cs.mark_exiting(W)
        inner = cs.checkpoint()
        cs.claim(V, whole("a", 3))
        cs.rollback(inner)
        assert cs.claim_of(V) == ()
        cs.rollback(token)
        assert (all_used(cs, node_list), cs.place(req(2, pods=3)), cs.free_milli()) == before
        assert cs.claim_of(X) == whole("b", 3)
    cs.commit_checkpoint(token)
    with pytest.raises(ValueError, match="checkpoint"):
        cs.rollback(token)
    assert cs.counters.rollbacks == 4


def test_commit_keeps_changes() -> None:
    cs = state(nodes(("a", 2)))
    token = cs.checkpoint()
    cs.occupy(W, whole("a", 0))
    cs.commit_checkpoint(token)
    assert cs.device_used("a", 0) == 1000


def test_occupy_over_a_full_device_is_a_bug() -> None:
    cs = state(nodes(("a", 1)))
    cs.occupy_exiting(V, (pods_on("a", (0, 750)),))
    with pytest.raises(ValueError, match="1250"):
        cs.occupy(W, (pods_on("a", (0, 500)),))
    assert cs.device_used("a", 0) == 750  # refused before any change


def test_loading_work_onto_a_device_an_exiting_victim_holds_is_refused() -> None:
    """A snapshot whose running work and exiting victims would need more than
    one device holds is refused (as ``occupy`` refuses it), not half-loaded."""
    cs = state(nodes(("a", 1)))
    cs.occupy_exiting(V, (pods_on("a", (0, 750)),))
    with pytest.raises(ValueError, match="would hold 1250 milli-GPU"):
        cs.occupy_many([(X, (pods_on("a", (0, 500)),))])
    assert cs.free_milli(W, allow_exiting=True) == 1000  # nothing was occupied
