"""The ``teams`` section of a scenario: a nested tree with reservations."""

from __future__ import annotations

from collections.abc import Mapping

from apportion.domain.cluster import Pool
from apportion.domain.errors import ValidationError
from apportion.domain.org import Team, validate_slug
from apportion.domain.quantities import parse_gpu_amount
from apportion.sim import fields as f

TEAM_KEYS = ("name", "bursting_priority", "burst_limit_percent", "reservations", "children")


def parse_teams(
    raw: object, pools: Mapping[str, Pool]
) -> tuple[list[Team], dict[tuple[str, str], int], dict[str, str]]:
    """Teams (parents before children), reservations in milli-GPU, and where
    each team is defined in the file (slug -> ``teams[0].children[1]``)."""
    teams: list[Team] = []
    reservations: dict[tuple[str, str], int] = {}
    paths: dict[str, str] = {}
    for i, item in enumerate(f.sequence(raw, "teams", "teams")):
        _parse_team(item, f.join("teams", i), None, pools, teams, reservations, paths)
    return teams, reservations, paths


def _parse_team(
    item: object,
    path: str,
    parent: str | None,
    pools: Mapping[str, Pool],
    teams: list[Team],
    reservations: dict[tuple[str, str], int],
    paths: dict[str, str],
) -> None:
    raw = f.mapping(item, path, TEAM_KEYS, "a team")
    slug = validate_slug(raw.get("name"), f.join(path, "name"))
    if slug in paths:
        raise ValidationError(
            f.join(path, "name"), f"team {slug!r} is already defined at {paths[slug]}",
            "unique team names",
        )
    pct = raw.get("burst_limit_percent")
    if pct is not None:
        pct = f.integer(pct, f.join(path, "burst_limit_percent"), 0, 1_000_000)
    weight = f.integer(raw.get("bursting_priority", 1), f.join(path, "bursting_priority"), 1, 10)
    team = Team(slug=slug, name=slug, parent=parent, bursting_priority=weight,
                burst_limit_percent=pct)
    teams.append(team)
    paths[slug] = path
    res_path = f.join(path, "reservations")
    res = raw.get("reservations") or {}
    if not isinstance(res, Mapping):
        raise ValidationError(res_path, "must map pool names to GPUs, e.g. {main: 8}")
    for pool, amount in res.items():
        f.one_of(pool, f.join(res_path, str(pool)), pools, "pool")
        milli = parse_gpu_amount(amount, f.join(res_path, pool))
        if milli:
            reservations[(slug, pool)] = milli
    for j, child in enumerate(f.sequence(raw.get("children"), f.join(path, "children"), "teams")):
        child_path = f.join(f.join(path, "children"), j)
        _parse_team(child, child_path, slug, pools, teams, reservations, paths)
