"""Packing pods into one scope, one after another on the evolving state.

SPEC 5: a shared pod goes to the device with the least free milli that still
fits (partial devices first, so whole devices stay free); if no partial device
fits, it takes a fully free device on the node with the fewest fully free
devices (the same choice as a 1-GPU pod). A whole-GPU pod of N takes the N
lowest-indexed fully free devices of the node with the fewest fully free
devices that still has N. Ties break by node name, then device index.
"""

from __future__ import annotations

from apportion.domain.workload import DeviceShare, Placement, PodPlacement
from apportion.engine.placement.device_book import DeviceBook
from apportion.engine.placement.host_fit import (
    binds,
    host_of,
    is_host_only,
    pick_host,
    pick_host_only,
)
from apportion.engine.placement.scope_index import FULL, ScopeIndex
from apportion.engine.placement.types import Counters, PlacementRequest


def pick(
    book: DeviceBook, scope: ScopeIndex, req: PlacementRequest
) -> tuple[int, list[tuple[int, int]]] | None:
    """(node rank, [(device id, milli)]) for the next pod of ``req`` in
    ``scope``, or None; a pod asking no GPU (host resources only) gets no device."""
    if book.frag is not None:
        return book.frag.pick(scope, req)
    if is_host_only(req):
        rank = pick_host_only(book, scope, req)
        return None if rank is None else (rank, [])
    chosen = pick_devices(book, scope, req)
    return None if chosen is None else (book.dev_node[chosen[0][0]], chosen)


def pick_devices(
    book: DeviceBook, scope: ScopeIndex, req: PlacementRequest
) -> list[tuple[int, int]] | None:
    """Best fit: (device id, milli) for the next pod of ``req`` in ``scope``, or None."""
    if binds(book, req):
        return pick_host(book, scope, req)
    if req.whole_devices:
        node = scope.tightest_node(req.whole_devices)
        if node is None:
            return None
        return [(g, FULL) for g in book.full_devs[node][: req.whole_devices]]
    charge = req.charge
    if not 0 < charge <= FULL:
        return None
    g = scope.best_partial(charge) if charge < FULL else None
    if g is None:
        node = scope.tightest_node(1)
        if node is None:
            return None
        g = book.full_devs[node][0]
    return [(g, charge)]


def pack(
    book: DeviceBook,
    scope: ScopeIndex,
    req: PlacementRequest,
    count: int,
    counters: Counters,
) -> Placement:
    """Place ``count`` pods of ``req`` in ``scope``, each seen by the next.

    The pods are applied to ``book`` as trial use (the caller holds a mark and
    undoes it). ``count`` must not exceed ``scope.fit_count``; the index makes
    that exact, so running out early is a bug (AssertionError).
    """
    pods: list[PodPlacement] = []
    for number in range(count):
        picked = pick(book, scope, req)
        if picked is None:
            raise AssertionError(f"index promised {count} pods, only {number} placed")
        rank, chosen = picked
        counters.nodes_examined += 1
        counters.devices_examined += len(chosen)
        node = book.nodes[rank].name
        shares = tuple(DeviceShare(book.dev_index[g], milli) for g, milli in chosen)
        pods.append(PodPlacement(node, shares))
        if number + 1 < count:
            for g, milli in chosen:
                book.add_stay(g, milli)
            host = host_of(req)
            if host[0] or host[1]:
                book.host.add(rank, 0, *host)
            book.flush()
    return tuple(pods)
