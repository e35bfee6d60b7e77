"""Buckets and caps of SPEC section 2, checked along one path."""

from hypothesis import given, settings
from hypothesis import strategies as st

from apportion.domain.org import Team, build_tree
from apportion.engine.usage_ledger import Ledger


def tree():
    return build_tree(
        [
            Team("research", burst_limit_percent=50),
            Team("nlp", parent="research"),
            Team("vision", parent="research"),
            Team("production"),
        ],
        {("research", "p"): 48000, ("nlp", "p"): 32000, ("vision", "p"): 8000,
         ("production", "p"): 32000},
    )


def test_reserved_uses_own_bucket_then_parent() -> None:
    led = Ledger(tree(), "p")
    assert led.reserved_fits("nlp", 40000)  # 32 own + 8 research bucket
    assert not led.reserved_fits("nlp", 40001)
    led.add("nlp", True, 36000)
    assert led.overflow("nlp") == 4000 and led.overflow("research") == 0
    # research's bucket (8) has 4 left for vision beyond vision's own 8
    assert led.reserved_fits("vision", 12000)
    assert not led.reserved_fits("vision", 12001)
    assert led.reserved_room("vision") == 12000
    led.remove("nlp", True, 36000)
    assert led.overflow("nlp") == 0 and led.reserved_fits("vision", 16000)


def test_bucket_never_serves_outside_its_subtree() -> None:
    led = Ledger(tree(), "p")
    assert led.reserved_fits("production", 32000)
    assert not led.reserved_fits("production", 32001)


def test_caps_hold_for_all_usage() -> None:
    led = Ledger(tree(), "p")
    assert led.cap("research") == 72000
    led.add("nlp", False, 70000)
    breach = led.cap_breach("vision", 3000)
    assert breach is not None and breach.team == "research" and breach.usage == 70000
    assert led.cap_breach("vision", 2000) is None
    assert led.cap_headroom("vision") == 2000
    assert led.cap_headroom("production") is None
    assert led.elastic_usage("research") == 70000 and led.reserved_usage("research") == 0


def _room_by_search(led: Ledger, team: str) -> int:
    """The definition: the largest m <= path reservation that reserved_fits."""
    lo, hi = 0, led.path_reservation(team)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if led.reserved_fits(team, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_reserved_room_is_the_most_that_fits(data: st.DataObject) -> None:
    """The one-pass reserved_room equals a search over reserved_fits, whatever
    the tree, the buckets and the reserved and elastic usage."""
    count = data.draw(st.integers(1, 8))
    parents: list[int | None] = [None]
    for i in range(1, count):
        parents.append(data.draw(st.none() | st.integers(0, i - 1)))
    teams = [Team(f"t{i}", parent=None if parents[i] is None else f"t{parents[i]}")
             for i in range(count)]
    free: dict[int | None, int] = {None: 10**9}
    reservations: dict[tuple[str, str], int] = {}
    for i in range(count):
        milli = data.draw(st.integers(0, min(free[parents[i]], 40_000) // 500)) * 500
        free[parents[i]] -= milli
        free[i] = milli
        if milli:
            reservations[(f"t{i}", "p")] = milli
    org = build_tree(teams, reservations)
    led = Ledger(org, "p")
    leaves = org.leaves()
    for _ in range(data.draw(st.integers(0, 12))):
        led.add(data.draw(st.sampled_from(leaves)), data.draw(st.booleans()),
                data.draw(st.integers(0, 30)) * 500)
    for leaf in leaves:
        assert led.reserved_room(leaf) == _room_by_search(led, leaf)
