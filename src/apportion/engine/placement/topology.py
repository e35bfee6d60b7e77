"""Choosing where a request goes: the whole scope, or one topology domain.

Required at level L: all pods in one domain of L (nodes sharing the label
value; nodes without the label belong to none). Among the domains where at
least min_pods pods fit now, the one fitting the most pods (up to ``pods``,
for elastic scaling) wins, then the tightest (least free milli left after
placement), then the domain name. A level that is a node label but not in the
pool's topology is treated the same way.

Preferred at L: the same choice at L; if no domain fits now, at each coarser
level of the pool's topology in turn (none when L is not in it); finally the
whole scope without constraint.

Fit counts come from the scope indexes (exact for greedy packing), so only
the chosen scope is actually packed.
"""

from __future__ import annotations

from dataclasses import dataclass

from apportion.domain.workload import TopologyMode
from apportion.engine.placement.device_book import Constraints, DeviceBook, FilterKey
from apportion.engine.placement.feasibility import (
    need_text,
    never_result,
    pod_milli,
    waiting_result,
)
from apportion.engine.placement.host_fit import fit_count, host_result
from apportion.engine.placement.scope_index import ScopeIndex
from apportion.engine.placement.types import (
    Counters,
    FailureKind,
    PlacementRequest,
    PlacementResult,
)


@dataclass(frozen=True, slots=True)
class Choice:
    """Where to pack: a scope, how many pods, and ``level=value`` if a domain."""

    scope: ScopeIndex
    count: int
    domain: str | None


@dataclass(frozen=True, slots=True)
class _DomainSearch:
    choice: Choice | None
    best_fitting: int
    best_free: int


def choose(
    book: DeviceBook,
    req: PlacementRequest,
    fkey: FilterKey,
    base: Constraints,
    counters: Counters,
) -> Choice | PlacementResult:
    """Pick the scope for ``req`` within ``base``; a failure result if none fits now."""
    topo = req.topology
    base_levels = dict(base)
    if topo is None or topo.level in base_levels:
        label = None if topo is None else f"{topo.level}={base_levels[topo.level]}"
        return _whole(book, req, fkey, base, label)
    if topo.mode is TopologyMode.REQUIRED:
        search = _best_domain(book, req, fkey, base, topo.level, counters)
        if search.choice is not None:
            return search.choice
        never = never_result(book, req, fkey, base)
        if never is not None:
            return never
        return PlacementResult(
            failure=FailureKind.TOPOLOGY_WAITING,
            message=(
                f"needs {need_text(req)} in one {topo.level}; at most "
                f"{search.best_fitting} pods fit in any {topo.level} now"
            ),
            fitting_pods=search.best_fitting,
            free_milli=search.best_free,
        )
    for level in _preferred_levels(book, topo.level):
        search = _best_domain(book, req, fkey, base, level, counters, report=False)
        if search.choice is not None:
            return search.choice
    return _whole(book, req, fkey, base, None)


def _preferred_levels(book: DeviceBook, level: str) -> list[str]:
    """``level``, then the coarser levels of the pool's topology, finest first."""
    levels = book.pool.topology
    if level not in levels:
        return [level]
    return [level, *reversed(levels[: levels.index(level)])]


def _whole(
    book: DeviceBook,
    req: PlacementRequest,
    fkey: FilterKey,
    base: Constraints,
    label: str | None,
) -> Choice | PlacementResult:
    scope = book.scope(fkey, base)
    fitting = fit_count(book, scope, req, req.pods)
    if fitting >= req.min_pods:
        return Choice(scope, fitting, label)
    never = never_result(book, req, fkey, base)
    if never is not None:
        return never
    host = host_result(book, scope, req, fitting)
    return host if host is not None else waiting_result(scope, req, fitting)


def _best_domain(
    book: DeviceBook,
    req: PlacementRequest,
    fkey: FilterKey,
    base: Constraints,
    level: str,
    counters: Counters,
    *,
    report: bool = True,
) -> _DomainSearch:
    """The best domain of ``level`` that fits ``req`` now (see module doc).

    Without ``report`` the caller only wants the choice, not how close the
    other domains came: a domain whose free total is short is passed over.
    """
    need = req.min_pods * pod_milli(req)
    best: tuple[int, int, str] | None = None
    best_scope: ScopeIndex | None = None
    best_fitting = best_free = 0
    for value in book.domain_values(fkey, base, level):
        scope = book.scope(fkey, (*base, (level, value)))
        counters.domains_examined += 1
        if not report and scope.free_total < need:
            continue  # fewer than min_pods fit: it could not be chosen
        best_free = max(best_free, scope.free_total)
        # The fit count is O(distinct free levels); totals alone reject most domains.
        limit = req.pods if scope.free_total >= need else req.min_pods - 1
        fitting = fit_count(book, scope, req, limit)
        best_fitting = max(best_fitting, fitting)
        if fitting < req.min_pods:
            continue
        key = (-fitting, scope.free_total - fitting * pod_milli(req), value)
        if best is None or key < best:
            best, best_scope = key, scope
    if best is None or best_scope is None:
        return _DomainSearch(None, best_fitting, best_free)
    choice = Choice(best_scope, -best[0], f"{level}={best[2]}")
    return _DomainSearch(choice, best_fitting, best_free)
