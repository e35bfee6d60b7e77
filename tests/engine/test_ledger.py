"""Buckets and caps of SPEC section 2, checked along one path."""

from apportion.domain.org import Team, build_tree
from apportion.engine.ledger import Ledger


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
