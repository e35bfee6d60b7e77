"""Why a request does not fit: permanent checks on an empty pool, and the
classification of a failure now (SPEC section 7's placement reason codes).

Permanent (``can_ever``): computed from the nodes that are not down (cordoned
nodes count: an admin can uncordon them), never from usage. Now
(``waiting_result``): FRAGMENTED before GANG_WAITING before
WAITING_FOR_CAPACITY, the order of the reason table.
"""

from __future__ import annotations

from apportion.domain.quantities import format_gpus
from apportion.engine.placement.device_book import Constraints, DeviceBook, FilterKey, NodeShape
from apportion.engine.placement.host_book import UNLIMITED
from apportion.engine.placement.scope_index import FULL, ScopeIndex
from apportion.engine.placement.types import FailureKind, PlacementRequest, PlacementResult


def pod_text(req: PlacementRequest) -> str:
    """One pod's request for messages: ``4 GPUs``, ``1 GPU``, ``0.25 GPU``."""
    if req.whole_devices:
        return f"{req.whole_devices} GPU{'s' if req.whole_devices > 1 else ''}"
    return f"{format_gpus(req.charge)} GPU"


def need_text(req: PlacementRequest) -> str:
    """The whole request: ``8 × 1 GPU`` (gangs) or ``4 GPUs on one node``."""
    if req.min_pods > 1:
        return f"{req.min_pods} × {pod_text(req)}"
    if req.whole_devices > 1:
        return f"{pod_text(req)} on one node"
    return pod_text(req)


def pod_milli(req: PlacementRequest) -> int:
    """Milli-GPU one pod uses."""
    return req.whole_devices * FULL if req.whole_devices else req.charge


def cpu_text(milli: int) -> str:
    """Milli-CPU for messages: ``16 CPUs``, ``0.5 CPU``."""
    cores = f"{milli // 1000}" if milli % 1000 == 0 else f"{milli / 1000:g}"
    return f"{cores} CPU{'s' if milli > 1000 else ''}"


def memory_text(mib: int) -> str:
    """MiB for messages: ``64 GiB`` when whole GiB, else ``1536 MiB``."""
    return f"{mib // 1024} GiB" if mib % 1024 == 0 and mib else f"{mib} MiB"


def host_text(req: PlacementRequest) -> str:
    """`` with 16 CPUs and 64 GiB of memory per pod`` ('' if it asks for neither)."""
    asks = []
    if req.cpu_milli:
        asks.append(cpu_text(req.cpu_milli))
    if req.memory_mib:
        asks.append(f"{memory_text(req.memory_mib)} of memory")
    return f" with {' and '.join(asks)} per pod" if asks else ""


def node_pods(shape: NodeShape, req: PlacementRequest) -> int:
    """Pods of ``req`` an empty node of ``shape`` holds (GPUs, CPU and memory)."""
    gpus, cpu, mem = shape
    if req.whole_devices:
        pods = gpus // req.whole_devices
    elif 0 < req.charge <= FULL:
        pods = gpus * (FULL // req.charge)
    elif req.charge == 0:  # host resources only
        pods = UNLIMITED
    else:
        return 0
    if req.cpu_milli and cpu < UNLIMITED:
        pods = min(pods, cpu // req.cpu_milli)
    if req.memory_mib and mem < UNLIMITED:
        pods = min(pods, mem // req.memory_mib)
    return pods


def static_pods(hist: tuple[tuple[NodeShape, int], ...], req: PlacementRequest) -> int:
    """Pods of ``req`` an empty scope with node histogram ``hist`` holds."""
    return sum(count * node_pods(shape, req) for shape, count in hist)


def _host_never(
    hist: tuple[tuple[NodeShape, int], ...], req: PlacementRequest
) -> PlacementResult | None:
    """NO_NODE_FITS when every node with the GPUs for one pod lacks the CPU or
    memory one pod asks for (message with the numbers), else None."""
    if not (req.cpu_milli or req.memory_mib):
        return None
    gpu_ok = [shape for shape, _ in hist if node_pods((shape[0], UNLIMITED, UNLIMITED), req)]
    if not gpu_ok or any(node_pods(shape, req) for shape in gpu_ok):
        return None
    cpu_max = max(s[1] for s in gpu_ok)
    mem_max = max(s[2] for s in gpu_ok)
    with_gpus = f"the largest node with {pod_text(req)}"
    if req.cpu_milli > cpu_max:
        message = f"needs {cpu_text(req.cpu_milli)} per pod; {with_gpus} has {cpu_text(cpu_max)}"
    else:
        message = (f"needs {memory_text(req.memory_mib)} of memory per pod; {with_gpus} has "
                   f"{memory_text(mem_max)}")
    return PlacementResult(failure=FailureKind.NO_NODE_FITS, message=message)


def never_result(
    book: DeviceBook, req: PlacementRequest, fkey: FilterKey | None, base: Constraints
) -> PlacementResult | None:
    """A permanent failure (NO_NODE_FITS, TOPOLOGY_UNSATISFIABLE) or None.

    Order: no matching node; one pod fits no node; required topology fits no
    domain; the (filtered) pool is too small for min_pods pods.
    """
    no_fit = FailureKind.NO_NODE_FITS
    if fkey is None:
        wanted = [f"gpu_type={'|'.join(req.gpu_types)}"] if req.gpu_types else []
        wanted += [f"{k}={v}" for k, v in sorted(req.node_selector.items())]
        return PlacementResult(failure=no_fit, message=f"no node matches {', '.join(wanted)}")
    hist = book.static_hist(fkey, base)
    largest = hist[0][0][0] if hist else 0
    if not hist:
        return PlacementResult(failure=no_fit, message="no node that is not down matches")
    if req.whole_devices > largest:
        return PlacementResult(
            failure=no_fit,
            message=f"needs {pod_text(req)} on one node; the largest node has {largest}",
        )
    if not req.whole_devices and not 0 <= req.charge <= FULL:
        return PlacementResult(
            failure=no_fit, message=f"needs {req.charge} milli-GPU of one device; a device has 1000"
        )
    host_never = _host_never(hist, req)
    if host_never is not None:
        return host_never
    topo = req.topology
    if topo is not None and topo.mode == "required" and topo.level not in dict(base):
        result = _topology_never(book, req, fkey, base, topo.level)
        if result is not None:
            return result
    holds = static_pods(hist, req)
    if holds < req.min_pods:
        capacity = sum(shape[0] * c for shape, c in hist) * FULL
        return PlacementResult(
            failure=no_fit,
            message=(
                f"needs {need_text(req)}{host_text(req)}; the pool holds at most {holds} such pods "
                f"(capacity {format_gpus(capacity)} GPUs)"
            ),
        )
    return None


def _topology_never(
    book: DeviceBook, req: PlacementRequest, fkey: FilterKey, base: Constraints, level: str
) -> PlacementResult | None:
    values = book.domain_values(fkey, base, level)
    unsat = FailureKind.TOPOLOGY_UNSATISFIABLE
    if not values:
        return PlacementResult(failure=unsat, message=f"no eligible node has a {level!r} label")
    best = max(
        static_pods(book.static_hist(fkey, (*base, (level, v))), req) for v in values
    )
    if best >= req.min_pods:
        return None
    return PlacementResult(
        failure=unsat,
        message=(
            f"needs {need_text(req)} in one {level}; the largest {level} "
            f"holds {best} such pods"
        ),
    )


def waiting_result(scope: ScopeIndex, req: PlacementRequest, fitting: int) -> PlacementResult:
    """Classify a failure now in ``scope`` where only ``fitting`` pods fit."""
    free = scope.free_total
    need = req.min_pods * pod_milli(req)
    free_text = f"{format_gpus(free)} GPUs free"
    if free >= need:
        if req.whole_devices:
            where = f"at most {scope.max_full()} on any node"
        else:
            where = f"at most {format_gpus(scope.max_device_free())} on any device"
        if req.min_pods > 1:
            where += f"; {fitting} of {req.min_pods} pods fit"
        return PlacementResult(
            failure=FailureKind.FRAGMENTED,
            message=f"needs {need_text(req)}; {free_text} but {where}",
            fitting_pods=fitting,
            free_milli=free,
        )
    if fitting >= 1:
        return PlacementResult(
            failure=FailureKind.GANG_WAITING,
            message=f"needs {need_text(req)}; {fitting} fit now",
            fitting_pods=fitting,
            free_milli=free,
        )
    return PlacementResult(
        failure=FailureKind.WAITING_FOR_CAPACITY,
        message=f"needs {need_text(req)}; {free_text}",
        fitting_pods=0,
        free_milli=free,
    )
