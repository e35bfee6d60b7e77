"""Entitlements of SPEC section 4, as scenario tables.

Amounts in the tables are GPUs (strings, so 28.8 and 16/3 stay exact); the
engine works in milli-GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest

from apportion.domain.errors import ValidationError
from apportion.domain.org import OrgTree, Team, build_tree
from apportion.engine.fairshare.demand import DemandBook, DemandItem, entitlements

POOL = "p"
BIG = "1000"  # more demand than any pool here holds


def gpus(value: str | int) -> int:
    return int(Fraction(str(value)) * 1000)


def team(
    slug: str, parent: str | None = None, w: int = 1, pct: int | None = None, res: str = "0"
) -> tuple[Team, int]:
    return Team(slug, parent=parent, bursting_priority=w, burst_limit_percent=pct), gpus(res)


def org(*teams: tuple[Team, int]) -> OrgTree:
    return build_tree([t for t, _ in teams], {(t.slug, POOL): r for t, r in teams if r})


def res(slug: str, amount: str, prio: int = 100, at: int = 0, wid: int = 0) -> DemandItem:
    return DemandItem(slug, True, prio, gpus(amount), submitted_at=at, workload_id=wid)


def ela(slug: str, amount: str, prio: int = 50, at: int = 0, wid: int = 0) -> DemandItem:
    return DemandItem(slug, False, prio, gpus(amount), submitted_at=at, workload_id=wid)


def seed_org(research_res: str = "0", nlp_res: str = "0", vision_res: str = "0",
             production_res: str = "0", research_pct: int | None = None) -> OrgTree:
    """The seed's organization: Research (3) with NLP (2) and Vision (1); Production (2)."""
    return org(
        team("research", w=3, pct=research_pct, res=research_res),
        team("nlp", "research", w=2, res=nlp_res),
        team("vision", "research", w=1, res=vision_res),
        team("production", w=2, res=production_res),
    )


@dataclass(frozen=True)
class Case:
    tree: OrgTree
    capacity: str
    demand: list[DemandItem]
    expect: dict[str, str]
    surplus: str | None = None


ALL_BURSTING = [ela("nlp", BIG), ela("vision", BIG), ela("production", BIG)]

CASES = [
    pytest.param(
        Case(seed_org(), "48", ALL_BURSTING,
             {"research": "28.8", "production": "19.2", "nlp": "19.2", "vision": "9.6"}, "48"),
        id="seed-surplus-48-split-60-40-then-2-1",
    ),
    pytest.param(
        Case(seed_org("16", "8", "8", "16"), "80",
             [res("nlp", "8"), res("vision", "8"), res("production", "16"), *ALL_BURSTING],
             {"research": "44.8", "production": "35.2", "nlp": "27.2", "vision": "17.6"}, "48"),
        id="seed-reservations-fully-used-by-reserved-work-then-surplus-48",
    ),
    pytest.param(
        Case(org(team("research", w=3, pct=50, res="16"), team("production", w=2)), "48",
             [ela("research", BIG), ela("production", BIG)],
             {"research": "24", "production": "24"}, "32"),
        id="cap-binds-leftover-goes-to-sibling",
    ),
    pytest.param(
        Case(seed_org(research_pct=0), "48", ALL_BURSTING,
             {"research": "0", "nlp": "0", "vision": "0", "production": "48"}, "48"),
        id="cap-zero-without-reservation-gets-nothing",
    ),
    pytest.param(
        Case(seed_org(), "48", [ela("nlp", BIG), ela("vision", "4"), ela("production", BIG)],
             {"research": "28.8", "nlp": "24.8", "vision": "4", "production": "19.2"}),
        id="weights-two-levels-small-want-leaves-rest-to-sibling",
    ),
    pytest.param(
        Case(seed_org(), "48", [ela("nlp", BIG), ela("production", BIG)],
             {"research": "28.8", "nlp": "28.8", "vision": "0", "production": "19.2"}),
        id="team-without-demand-gives-its-share-to-siblings",
    ),
    pytest.param(
        Case(seed_org(), "48", [ela("nlp", BIG), ela("vision", BIG)],
             {"research": "48", "nlp": "32", "vision": "16", "production": "0"}),
        id="top-level-team-without-demand-gives-everything-away",
    ),
    pytest.param(
        Case(seed_org(), "48", [ela("nlp", BIG, prio=50), ela("production", "40", prio=75)],
             {"production": "40", "nlp": "8", "research": "8"}),
        id="higher-priority-bursting-demand-served-first",
    ),
    pytest.param(
        Case(seed_org(), "48",
             [ela("nlp", BIG, prio=50), ela("production", "10", prio=75),
              ela("production", BIG, prio=50)],
             {"production": "25.2", "nlp": "22.8"}),
        id="priority-levels-then-weights-on-what-is-left",
    ),
    pytest.param(
        Case(seed_org("24", "16"), "32", [res("nlp", "20")],
             {"nlp": "20", "research": "20", "vision": "0"}, "12"),
        id="reserved-own-bucket-then-parent-bucket",
    ),
    pytest.param(
        Case(seed_org("24", "16"), "32",
             [res("nlp", "16", wid=1), res("nlp", "6", prio=100, at=5, wid=2),
              res("vision", "6", prio=200, at=9, wid=3)],
             {"nlp": "18", "vision": "6", "research": "24"}, "8"),
        id="ancestor-bucket-serves-subtree-by-priority",
    ),
    pytest.param(
        Case(seed_org("24", "16"), "32",
             [res("nlp", "16", wid=1), res("nlp", "6", at=5, wid=2),
              res("vision", "6", at=9, wid=3)],
             {"nlp": "22", "vision": "2", "research": "24"}, "8"),
        id="ancestor-bucket-serves-subtree-by-submission-time",
    ),
    pytest.param(
        Case(seed_org("24", "16"), "32",
             [res("nlp", "16", wid=1), res("nlp", "6", at=5, wid=4),
              res("vision", "6", at=5, wid=3)],
             {"nlp": "18", "vision": "6"}),
        id="ancestor-bucket-ties-broken-by-id",
    ),
    pytest.param(
        Case(seed_org("32", "32", "0", "0"), "48", [res("nlp", "40"), ela("production", BIG)],
             {"nlp": "32", "production": "16"}, "16"),
        id="reserved-beyond-its-buckets-gets-no-surplus",
    ),
    pytest.param(
        Case(seed_org("16", "0", "16", "0"), "16", [res("vision", "4"), ela("vision", "8"),
                                                     ela("production", BIG)],
             {"vision": "12", "production": "4"}, "4"),
        id="guaranteed-elastic-from-own-leaf-bucket",
    ),
    pytest.param(
        Case(seed_org("24", "8", "8"), "24", [ela("nlp", BIG), ela("vision", BIG),
                                              ela("production", BIG)],
             {"nlp": "40/3", "vision": "32/3", "production": "0"}, "0"),
        id="guaranteed-elastic-from-ancestor-bucket-by-weight",
    ),
    pytest.param(
        Case(seed_org("24", "8", "8"), "24",
             [ela("nlp", BIG, prio=50), ela("vision", "11", prio=80), ela("production", BIG)],
             {"nlp": "13", "vision": "11", "production": "0"}, "0"),
        id="ancestor-bucket-serves-higher-priority-elastic-first",
    ),
    pytest.param(
        Case(seed_org("24", "8", "8"), "40", [ela("vision", BIG), ela("production", BIG)],
             {"nlp": "0", "vision": "30.4", "production": "9.6"}, "24"),
        id="idle-leaf-bucket-is-surplus-but-ancestor-bucket-backs-sibling",
    ),
    pytest.param(
        Case(org(team("org", res="32"), team("a", "org", pct=0, res="8"), team("a1", "a", res="8"),
                 team("b", "org")), "32",
             [res("a1", "20", prio=300, wid=1), res("b", "10", wid=2)],
             {"a1": "8", "a": "8", "b": "10", "org": "18"}),
        id="cap-blocks-reserved-from-ancestor-bucket-sibling-is-served",
    ),
    pytest.param(
        Case(org(team("t", res="20"), team("a", "t", pct=50, res="4"), team("b", "t", res="4")),
             "40", [ela("a", "10"), ela("b", "1")],
             {"a": "6", "b": "1", "t": "7"}, "33"),
        # a's own bucket gives 4, b's 1; t's bucket (12) only 2 more to a (its
        # cap 6): steps 1-2 grant 7, so the surplus is 33, and step 4 adds nothing
        id="ancestor-bucket-stops-at-a-leaf-cap",
    ),
    pytest.param(
        Case(seed_org("0", "0", "0", "0"), "40",
             [ela("production", BIG), ela("nlp", BIG)],
             {"production": "16", "research": "24"}),
        id="no-reservations-plain-weighted-split",
    ),
    pytest.param(
        Case(org(team("research", res="32"), team("production", res="32")), "40",
             [res("research", "32", prio=200), res("production", "32", prio=100),
              ela("production", BIG)],
             {"research": "32", "production": "8"}, "0"),
        id="reservations-above-capacity-reserved-served-in-order-up-to-capacity",
    ),
    pytest.param(
        Case(org(team("a", res="4"), team("b", res="4")), "4",
             [ela("a", BIG), ela("b", "1")],
             {"a": "3", "b": "1"}, "0"),
        # a node went down (SPEC 2): the own buckets (8) exceed the pool (4);
        # b's own bucket still serves its 1 GPU, a's gets what the pool has left
        id="own-buckets-above-capacity-share-the-pool",
    ),
    pytest.param(
        Case(org(team("p", res="8"), team("p1", "p"), team("p2", "p"), team("q", w=3)), "16",
             [ela("p1", "6", prio=70), ela("p2", "6", prio=50), ela("q", BIG, prio=50)],
             {"p1": "6", "p2": "4", "p": "10", "q": "6"}, "8"),
        # p's bucket (8) serves p1's 6 at priority 70, then only 2 of p2's 6;
        # the surplus (8) splits 1:3 between p (p2's 4 left) and q
        id="ancestor-bucket-used-up-across-priority-levels",
    ),
    pytest.param(
        Case(seed_org(), "8", [ela("production", "7.999", prio=75), ela("nlp", BIG)],
             {"production": "7.999", "nlp": "0.001", "research": "0.001"}, "8"),
        id="one-milli-gpu-left-after-a-higher-level-still-goes-to-the-next",
    ),
    pytest.param(
        Case(seed_org("1", research_pct=0), "48",
             [ela("nlp", BIG), ela("vision", BIG), ela("production", "4")],
             {"research": "1", "nlp": "2/3", "vision": "1/3", "production": "4"}, "47"),
        # research's bucket (1 GPU, its cap too) split 2:1; the pool has room
        # for the rest of the demand
        id="capped-subtree-splits-its-bucket-into-thirds-in-a-roomy-pool",
    ),
    pytest.param(
        Case(seed_org("24", "16"), "32",
             [res("nlp", "16", wid=1), res("nlp", "2", at=5, wid=2), res("nlp", "3", at=6, wid=3),
              res("vision", "4", at=9, wid=4)],
             {"nlp": "21", "vision": "3", "research": "24"}, "8"),
        # research's bucket (8) serves nlp's two later workloads in full, in
        # order, then 3 of vision's 4
        id="ancestor-bucket-serves-several-workloads-of-one-leaf-in-order",
    ),
    pytest.param(
        Case(org(team("org", res="30"), team("research", "org", res="24"),
                 team("nlp", "research", res="16"), team("ops", "org")), "40",
             [res("nlp", "16", wid=1), res("nlp", "12", at=5, wid=2),
              res("ops", "10", at=10, wid=3)],
             {"nlp": "28", "research": "28", "ops": "2", "org": "30"}, "10"),
        # nlp's second workload: 8 from research's bucket, the other 4 from
        # org's bucket, before ops (submitted later) gets the last 2
        id="workload-partly-granted-by-one-bucket-goes-on-to-the-next",
    ),
    pytest.param(
        Case(org(team("a", res="1.001"), team("b")), "4",
             [res("a", "1"), ela("a", BIG), ela("b", BIG)],
             {"a": "2.5005", "b": "1.4995"}, "2.999"),
        # a's reserved work leaves 1 milli-GPU of its bucket: that milli serves
        # a's elastic work first (step 2a), and the other 2.999 GPUs split
        # evenly (without it a would get 2.5, b 1.5)
        id="one-milli-gpu-left-in-a-leaf-bucket-serves-its-elastic-work",
    ),
    pytest.param(
        Case(org(team("g", res="10"), team("p", "g", pct=50, res="4"),
                 team("c2", "p", res="1"), team("z1", "p", res="2")), "10",
             [res("c2", "6", wid=1), res("z1", "2", wid=2)],
             {"c2": "4", "z1": "2", "p": "6", "g": "6"}, "4"),
        # p's cap is 4 x 1.5 = 6: z1's 2 (all inside its own bucket) count
        # against it, so g's bucket tops c2 up only to 4 (own 1, p's 1, g's 2)
        id="a-cap-counts-the-reserved-work-of-every-child-below-it",
    ),
    pytest.param(
        Case(org(team("t", res="10"), team("a", "t", pct=0, res="4"), team("l1", "a", res="1"),
                 team("p", "a", res="3"), team("l2", "p"), team("l3", "p")), "10",
             [res("l1", "2", wid=1), ela("l2", BIG, wid=2)],
             {"l1": "2", "l2": "2", "p": "2", "a": "4", "t": "4"}, "6"),
        # l1's reserved 2: its own bucket's 1, then t's bucket (a's is 0);
        # p's bucket (3) then serves l2's elastic work, but a's cap (4, pct 0)
        # leaves room for 2 of it (SPEC 4 step 2: cap - granted so far)
        id="an-ancestor-bucket-s-elastic-grant-stays-within-a-cap-above-it",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_entitlements(case: Case) -> None:
    result = entitlements(case.tree, POOL, gpus(case.capacity), case.demand)
    got = {slug: result.of(slug) / 1000 for slug in case.expect}
    assert got == {slug: Fraction(v) for slug, v in case.expect.items()}
    if case.surplus is not None:
        assert result.surplus == gpus(case.surplus)
    assert set(result.by_team) == set(case.tree.teams)
    assert all(isinstance(v, Fraction) for v in result.by_team.values())


def test_unknown_team_is_zero_and_counters_count_work() -> None:
    result = entitlements(seed_org(), POOL, gpus(48), ALL_BURSTING)
    assert result.of("nobody") == 0
    assert result.counters["items"] == 3
    assert result.counters["levels"] == 1
    assert result.counters["teams_visited"] > 0
    assert result.counters["teams"] == 4  # research, nlp, vision, production
    assert result.counters["fills"] == 1  # one bursting level, one fill


def test_demand_of_a_team_with_children_is_refused() -> None:
    with pytest.raises(ValidationError, match="research"):
        entitlements(seed_org(), POOL, gpus(48), [ela("research", "1")])


def test_refused_demand_names_the_field() -> None:
    with pytest.raises(ValidationError) as refused:
        entitlements(seed_org(), POOL, gpus(48), [ela("research", "1")])
    assert refused.value.field == "demand.team"
    assert refused.value.allowed == "a leaf team"
    with pytest.raises(ValidationError) as negative:
        entitlements(seed_org(), POOL, gpus(48), [ela("nlp", "-1")])
    assert negative.value.field == "demand.milli"
    assert negative.value.message == "must be >= 0, got -1000"
    # a CPU-only workload's demand is 0 milli-GPU: accepted, added and removed
    # one by one as well as in bulk, and it takes no share
    zero = entitlements(seed_org(), POOL, gpus(48), [ela("nlp", "0"), ela("vision", BIG)])
    assert (zero.of("nlp"), zero.of("vision")) == (0, gpus(48))
    book = DemandBook(seed_org(), POOL, [ela("vision", BIG)])
    book.add(ela("nlp", "0", wid=7))
    assert book.entitlements(gpus(48)).of("nlp") == 0
    book.remove(ela("nlp", "0", wid=7))
    assert book.entitlements(gpus(48)).of("vision") == gpus(48)


def test_demand_book_follows_adds_and_removes() -> None:
    tree = seed_org("24", "16")
    items = [res("nlp", "16", wid=1), res("nlp", "6", at=5, wid=2),
             res("vision", "6", at=9, wid=3), ela("production", "30", wid=4),
             ela("nlp", "5", prio=70, wid=5)]
    book = DemandBook(tree, POOL, items)
    assert book.entitlements(gpus(40)).by_team == entitlements(tree, POOL, gpus(40), items).by_team
    book.remove(items[1])
    book.add(res("nlp", "6", at=10, wid=6))
    changed = [items[0], items[2], items[3], items[4], res("nlp", "6", at=10, wid=6)]
    assert book.entitlements(gpus(40)).by_team == (
        entitlements(tree, POOL, gpus(40), changed).by_team
    )
    assert book.entitlements(gpus(40)).of("vision") == gpus(6)


def test_demand_book_refuses_removing_what_was_never_added() -> None:
    book = DemandBook(seed_org(), POOL, [ela("nlp", "1")])
    with pytest.raises(KeyError):
        book.remove(res("nlp", "1"))
    with pytest.raises(KeyError):
        book.remove(ela("nlp", "2"))
