import pytest

from apportion.domain.errors import NotFound, ReservationError, ValidationError
from apportion.domain.org import Team, build_tree, validate_reservations


def seed_tree(**res: int):
    teams = [
        Team("research", bursting_priority=3),
        Team("nlp", parent="research", bursting_priority=2),
        Team("vision", parent="research"),
        Team("production", bursting_priority=2, burst_limit_percent=50),
    ]
    reservations = {tuple(k.split("__")): v for k, v in res.items()}
    return build_tree(teams, reservations)


def test_paths_children_leaves() -> None:
    tree = seed_tree()
    assert tree.path("nlp") == ("nlp", "research")
    assert tree.children("research") == ("nlp", "vision")
    assert tree.leaves() == ("nlp", "production", "vision")
    assert tree.top_level() == ("production", "research")


def test_bucket_and_cap() -> None:
    tree = seed_tree(research__main=24000, nlp__main=16000, production__main=32000)
    assert tree.bucket("research", "main") == 8000
    assert tree.bucket("nlp", "main") == 16000
    assert tree.cap("production", "main") == 48000
    assert tree.cap("research", "main") is None


def test_children_over_parent_refused_with_numbers() -> None:
    tree = seed_tree(research__main=10000, nlp__main=8000, vision__main=4000)
    with pytest.raises(ReservationError) as err:
        validate_reservations(tree, {"main": 100000})
    assert "12" in str(err.value) and "10" in str(err.value)


def test_top_level_over_capacity_refused() -> None:
    tree = seed_tree(research__main=60000, production__main=30000)
    with pytest.raises(ReservationError, match="capacity of 80"):
        validate_reservations(tree, {"main": 80000})


def test_a_reservation_set_or_removed_gives_a_new_tree() -> None:
    tree = seed_tree(research__main=10000, nlp__main=8000)
    grown = tree.with_reservation("vision", "main", 2000)
    assert grown.bucket("research", "main") == 0 and grown.bucket("vision", "main") == 2000
    assert grown.reservations[("nlp", "main")] == 8000  # the others are kept
    removed = grown.with_reservation("nlp", "main", 0)
    assert ("nlp", "main") not in removed.reservations
    assert removed.bucket("research", "main") == 8000
    assert tree.bucket("research", "main") == 2000  # the first tree is unchanged


def test_valid_reservations_pass_up_to_the_limits_exactly() -> None:
    # children 32 + 16 = research's 48; top level 48 + 32 = the pool's 80: both at the limit
    tree = seed_tree(research__main=48000, nlp__main=32000, vision__main=16000,
                     production__main=32000)
    assert validate_reservations(tree, {"main": 80000}) is None
    # one milli-GPU more on either side is refused: the limits above were exact
    with pytest.raises(ReservationError):
        validate_reservations(tree, {"main": 79999})
    over = seed_tree(research__main=48000, nlp__main=32001, vision__main=16000,
                     production__main=32000)
    with pytest.raises(ReservationError):
        validate_reservations(over, {"main": 80000})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"slug": "Bad_Slug"}, "slug"),
        ({"slug": "a", "bursting_priority": 11}, "bursting_priority"),
        ({"slug": "a", "bursting_priority": 0}, "bursting_priority"),
        ({"slug": "a", "burst_limit_percent": -5}, "burst_limit_percent"),
    ],
)
def test_team_validation(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        Team(**kwargs)
    assert err.value.field == field


def test_team_errors_say_what_is_allowed() -> None:
    with pytest.raises(ValidationError) as pct:
        Team("a", burst_limit_percent=-5)
    assert str(pct.value) == ("burst_limit_percent: must be an integer >= 0 or null, got -5"
                              " (allowed: an integer >= 0, or null for unlimited)")
    with pytest.raises(ValidationError) as weight:
        Team("a", bursting_priority=11)
    assert weight.value.allowed == "1..10"


def test_unknown_parent_and_duplicates() -> None:
    with pytest.raises(ValidationError, match="does not exist"):
        build_tree([Team("a", parent="ghost")])
    with pytest.raises(ValidationError, match="defined twice"):
        build_tree([Team("a"), Team("a")])


def test_an_unknown_team_is_named_with_a_suggestion() -> None:
    tree = build_tree([Team("research"), Team("nlp", parent="research")])
    with pytest.raises(NotFound) as err:
        tree.team("nlpp")
    assert (err.value.kind, err.value.name) == ("team", "nlpp")
    assert str(err.value) == "team 'nlpp' not found; did you mean 'nlp'?"
