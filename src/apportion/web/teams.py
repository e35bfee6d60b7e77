"""The Teams page's rows: the tree in depth-first order with each team's
capacity per pool, and who borrows and who is owed."""

from __future__ import annotations

from typing import Any

#: below this many GPUs a difference is rounding, not borrowing
EPSILON = 0.0005


def _bar(c: dict[str, Any]) -> dict[str, Any]:
    """Positions (percent of the bar) of use, reservation, entitlement and cap."""
    used = (c["reserved_in_use"] or 0) + (c["elastic_in_use"] or 0)
    marks = [used, c["reservation"] or 0, c["entitlement"] or 0, c["burst_cap"] or 0]
    scale = max(marks) or 1

    def pct(v: float | None) -> float:
        return round(100 * (v or 0) / scale, 1)

    return {"used": pct(used), "reserved_part": pct(c["reserved_in_use"]),
            "reservation": pct(c["reservation"]), "entitlement": pct(c["entitlement"]),
            "cap": None if c["burst_cap"] is None else pct(c["burst_cap"])}


def _capacity(c: dict[str, Any]) -> dict[str, Any]:
    used = (c["reserved_in_use"] or 0) + (c["elastic_in_use"] or 0)
    borrowed = used - (c["reservation"] or 0)
    owed = (c["entitlement"] or 0) - used
    return {**c, "used": used, "bar": _bar(c),
            "borrowing": borrowed if borrowed > EPSILON else 0,
            "owed": owed if owed > EPSILON else 0}


def team_rows(views: list[dict[str, Any]], caps: list[dict[str, Any]], collapsed: set[str]
              ) -> list[dict[str, Any]]:
    """One row per visible team (a collapsed team's subtree is left out), roots
    and children sorted by slug; ``capacity`` holds one entry per pool."""
    by_slug = {v["slug"]: v for v in views}
    per_team: dict[str, list[dict[str, Any]]] = {}
    for c in caps:
        per_team.setdefault(c["team"], []).append(_capacity(c))
    rows: list[dict[str, Any]] = []

    def walk(slug: str, depth: int) -> None:
        v = by_slug[slug]
        is_collapsed = slug in collapsed and bool(v["children"])
        rows.append({**v, "depth": depth, "is_collapsed": is_collapsed,
                     "capacity": per_team.get(slug, []),
                     "toggle": sorted(collapsed ^ {slug})})
        if not is_collapsed:
            for child in v["children"]:
                if child in by_slug:
                    walk(child, depth + 1)

    for root in sorted(s for s, v in by_slug.items() if v["parent"] not in by_slug):
        walk(root, 0)
    return rows
