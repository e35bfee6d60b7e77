"""Fit counts and best-fit picks when pods ask for host CPU or memory (SPEC 5).

A node holds ``min(GPU pods, free CPU // cpu, free memory // memory)`` pods
of a request: its GPUs as the scope index counts them, cut by its host
resources. When no node of the pool states a host capacity, or the request
asks for none, the scope index alone answers (the fast path); otherwise the
nodes with room for at least one pod's GPUs are visited from the index's
buckets (never the whole pool), counting until the limit asked for.

Each placement of one pod lowers every term of a node's minimum by exactly
one, so the count is still what greedy packing achieves, whatever the packing
policy picks.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import cast

from apportion.domain.quantities import count_of
from apportion.engine.placement.device_book import Constraints, DeviceBook, FilterKey
from apportion.engine.placement.feasibility import (
    cpu_text,
    host_text,
    memory_text,
    need_text,
    pod_text,
)
from apportion.engine.placement.host_book import Host
from apportion.engine.placement.scope_index import FULL, ScopeIndex
from apportion.engine.placement.types import FailureKind, PlacementRequest, PlacementResult


def host_of(req: PlacementRequest) -> Host:
    return (req.cpu_milli, req.memory_mib)


def is_host_only(req: PlacementRequest) -> bool:
    """A pod that asks no GPU, only CPU and memory (the placement layer takes
    them for replays of real clusters; SPEC 1 workloads always ask GPUs)."""
    return req.whole_devices == 0 and req.charge == 0


def scope_nodes(book: DeviceBook, scope: ScopeIndex) -> list[int]:
    """Ranks of the scope's ready nodes (a pass over its members)."""
    fkey, constraints = cast(tuple[FilterKey, Constraints], scope.key)
    return [r for r in book.member_nodes(fkey, constraints) if book.is_ready[r]]


def pick_host_only(book: DeviceBook, scope: ScopeIndex, req: PlacementRequest) -> int | None:
    """Best fit for a pod without GPUs: where it strands the fewest GPUs — the
    node with the least free GPU milli, then the least free CPU and memory —
    that holds it, ties by name."""
    host, hb, avail = host_of(req), book.host, book.avail
    best: tuple[int, int, int, int] | None = None
    for rank in scope_nodes(book, scope):
        if hb.holds(rank, host):
            first = book.first_dev[rank]
            gpus = sum(avail[first:first + book.nodes[rank].gpus])
            key = (gpus, hb.cpu_free(rank), hb.mem_free(rank), rank)
            if best is None or key < best:
                best = key
    return None if best is None else best[3]


def binds(book: DeviceBook, req: PlacementRequest) -> bool:
    """Can host resources limit where ``req`` goes in this pool?"""
    return book.host.limited and bool(req.cpu_milli or req.memory_mib)


def node_gpu_pods(book: DeviceBook, rank: int, req: PlacementRequest) -> int:
    """Pods of ``req`` node ``rank``'s available devices hold (GPUs only)."""
    if req.whole_devices:
        return len(book.full_devs[rank]) // req.whole_devices
    charge, avail, first = req.charge, book.avail, book.first_dev[rank]
    return sum(avail[g] // charge for g in range(first, first + book.nodes[rank].gpus))


def rooms(book: DeviceBook, scope: ScopeIndex, req: PlacementRequest) -> Iterator[int]:
    """Ranks of the scope's nodes with GPU room for one pod, each once."""
    if req.whole_devices:
        levels = scope.full_levels
        for level in levels[bisect_left(levels, req.whole_devices):]:
            yield from scope.by_full[level]
        return
    seen: set[int] = set()
    for level in scope.full_levels:
        for rank in scope.by_full[level]:
            seen.add(rank)
            yield rank
    levels = scope.partial_levels
    dev_node = book.dev_node
    for level in levels[bisect_left(levels, req.charge):]:
        for g in scope.partial[level]:
            rank = dev_node[g]
            if rank not in seen:
                seen.add(rank)
                yield rank


def fit_count(book: DeviceBook, scope: ScopeIndex, req: PlacementRequest, limit: int) -> int:
    """How many pods of ``req`` fit in ``scope`` now, counted up to ``limit``."""
    if is_host_only(req):
        hb, host, count = book.host, host_of(req), 0
        for rank in scope_nodes(book, scope):
            count += hb.pods_fit(rank, host)
            if count >= limit:
                return limit
        return count
    if not binds(book, req):
        return scope.fit_count(req.charge, req.whole_devices, limit)
    if req.whole_devices == 0 and not 0 < req.charge <= FULL:
        return 0
    host, hb = host_of(req), book.host
    count = 0
    for rank in rooms(book, scope, req):
        pods = hb.pods_fit(rank, host)
        if pods:
            count += min(pods, node_gpu_pods(book, rank, req))
            if count >= limit:
                return limit
    return count


def pick_host(
    book: DeviceBook, scope: ScopeIndex, req: PlacementRequest
) -> list[tuple[int, int]] | None:
    """``best_fit`` among the nodes whose CPU and memory hold one more pod:
    the same order as the index's picks, skipping nodes short of host room."""
    host, hb = host_of(req), book.host
    if req.whole_devices:
        rank = _tightest_with_host(book, scope, req.whole_devices, host)
        if rank is None:
            return None
        return [(g, FULL) for g in book.full_devs[rank][: req.whole_devices]]
    charge = req.charge
    if not 0 < charge <= FULL:
        return None
    if charge < FULL:
        levels = scope.partial_levels
        for level in levels[bisect_left(levels, charge):]:
            for g in scope.partial[level]:
                if hb.holds(book.dev_node[g], host):
                    return [(g, charge)]
    found = _tightest_with_host(book, scope, 1, host)
    return None if found is None else [(book.full_devs[found][0], charge)]


def _tightest_with_host(
    book: DeviceBook, scope: ScopeIndex, devices: int, host: Host
) -> int | None:
    """The node with the fewest fully available devices >= ``devices`` whose
    CPU and memory hold one more pod (ties by name)."""
    levels = scope.full_levels
    for level in levels[bisect_left(levels, devices):]:
        for rank in scope.by_full[level]:
            if book.host.holds(rank, host):
                return rank
    return None


def host_result(
    book: DeviceBook, scope: ScopeIndex, req: PlacementRequest, fitting: int
) -> PlacementResult | None:
    """HOST_RESOURCES when the GPUs for ``min_pods`` pods are free in ``scope``
    but CPU or memory keeps them from fitting (only ``fitting`` do); None when
    the GPUs themselves are short (the GPU reasons apply)."""
    if is_host_only(req):
        return PlacementResult(
            failure=FailureKind.HOST_RESOURCES,
            message=(f"needs {host_text(req).removeprefix(' with ')}; "
                     f"{count_of(fitting, 'pod')} fit now"),
            fitting_pods=fitting, free_milli=scope.free_total)
    if not binds(book, req):
        return None
    if scope.fit_count(req.charge, req.whole_devices, req.min_pods) < req.min_pods:
        return None
    hb = book.host
    ranks = list(rooms(book, scope, req))
    cpu_max = max((hb.cpu_free(r) for r in ranks), default=0)
    mem_max = max((hb.mem_free(r) for r in ranks), default=0)
    nodes = f"the {len(ranks)} node{'s' if len(ranks) != 1 else ''} with {pod_text(req)} free"
    if req.cpu_milli and cpu_max < req.cpu_milli:
        message = (f"needs {cpu_text(req.cpu_milli)} per pod; {nodes} "
                   f"{'have' if len(ranks) != 1 else 'has'} at most {cpu_text(cpu_max)} free")
    elif req.memory_mib and mem_max < req.memory_mib:
        message = (f"needs {memory_text(req.memory_mib)} of memory per pod; {nodes} "
                   f"{'have' if len(ranks) != 1 else 'has'} at most "
                   f"{memory_text(mem_max)} free")
    else:
        message = (f"needs {need_text(req)}{host_text(req)}; the GPUs are "
                   f"free but only {fitting} pods fit with the CPU and memory free")
    return PlacementResult(
        failure=FailureKind.HOST_RESOURCES, message=message, fitting_pods=fitting,
        free_milli=scope.free_total,
    )
