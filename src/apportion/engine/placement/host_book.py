"""Host resources of one pool's nodes: CPU and memory (SPEC 1 and 5).

Per node the book keeps, for CPU (milli-CPU) and memory (MiB) each, the same
three numbers the device book keeps per device: ``stay`` (pods that keep
running, trials), ``exiting`` (preempted victims inside their grace) and
``claimed`` (nominations and holds). What a node offers an owner without
claims is ``cap - stay - max(exiting, claimed)``, the devices' rule; a node
that states no capacity (``None``) is not limited (:data:`UNLIMITED`).

Records per owner say what to give back: occupancy ``(node rank, cpu, memory,
is exiting)`` per pod, claims ``(node rank, cpu, memory)``. Every change is
logged in the device book's undo log (entries tagged with a string), so one
checkpoint undoes devices and host resources together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from apportion.domain.cluster import Node
from apportion.engine.placement.types import Owner

#: A capacity no request reaches: nodes that state none are not limited.
UNLIMITED = 1 << 62
#: What one pod asks of its node: (milli-CPU, MiB).
Host = tuple[int, int]
NO_HOST: Host = (0, 0)
#: One pod's host use: (node rank, milli-CPU, MiB, is exiting).
HostRecord = tuple[int, int, int, bool]
#: One pod's host claim: (node rank, milli-CPU, MiB).
HostClaim = tuple[int, int, int]

_NODE = "hn"
_OCC = "ho"
_CLAIM = "hc"


class HostBook:
    """CPU and memory per node, owners' records, logged with the device book."""

    def __init__(
        self, nodes: Sequence[Node], log: list[Any], is_logging: Callable[[], bool],
        on_change: Callable[[int], None],
    ) -> None:
        self.cpu_cap = [UNLIMITED if n.cpu_milli is None else n.cpu_milli for n in nodes]
        self.mem_cap = [UNLIMITED if n.memory_mib is None else n.memory_mib for n in nodes]
        #: Does any node state a capacity? If not, host requests never bind.
        self.limited = any(n.cpu_milli is not None or n.memory_mib is not None for n in nodes)
        count = len(nodes)
        #: per node: [cpu stay, cpu exiting, cpu claimed, mem stay, mem exiting, mem claimed]
        self.use: list[list[int]] = [[0, 0, 0, 0, 0, 0] for _ in range(count)]
        self.exiting_nodes: set[int] = set()
        self.occupancy: dict[Owner, tuple[HostRecord, ...]] = {}
        self.claims: dict[Owner, tuple[HostClaim, ...]] = {}
        self._log = log
        self._is_logging = is_logging
        self._on_change = on_change

    # -- what a node offers --------------------------------------------------
    def cpu_free(self, r: int) -> int:
        u = self.use[r]
        return self.cpu_cap[r] - u[0] - (u[1] if u[1] > u[2] else u[2])

    def mem_free(self, r: int) -> int:
        u = self.use[r]
        return self.mem_cap[r] - u[3] - (u[4] if u[4] > u[5] else u[5])

    def pods_fit(self, r: int, host: Host) -> int:
        """How many pods asking ``host`` node ``r``'s CPU and memory hold
        (:data:`UNLIMITED` when the pod asks for neither)."""
        cpu, mem = host
        count = UNLIMITED
        if cpu:
            count = max(0, self.cpu_free(r)) // cpu
        if mem:
            count = min(count, max(0, self.mem_free(r)) // mem)
        return count

    def holds(self, r: int, host: Host) -> bool:
        cpu, mem = host
        return (not cpu or self.cpu_free(r) >= cpu) and (not mem or self.mem_free(r) >= mem)

    # -- changes (logged) ------------------------------------------------------
    def _set(self, r: int, values: list[int]) -> None:
        if self._is_logging():
            self._log.append((_NODE, r, tuple(self.use[r])))
        self.use[r] = values
        if values[1] or values[4]:
            self.exiting_nodes.add(r)
        else:
            self.exiting_nodes.discard(r)
        self._on_change(r)

    def add(self, r: int, slot: int, cpu: int, mem: int) -> None:
        """Add ``cpu``/``mem`` (may be negative) to slot 0 stay, 1 exiting, 2 claimed."""
        values = list(self.use[r])
        values[slot] += cpu
        values[slot + 3] += mem
        self._set(r, values)

    def set_occupancy(self, owner: Owner, records: tuple[HostRecord, ...]) -> None:
        if self._is_logging():
            self._log.append((_OCC, owner, self.occupancy.get(owner)))
        if records:
            self.occupancy[owner] = records
        else:
            self.occupancy.pop(owner, None)

    def set_claim(self, owner: Owner, records: tuple[HostClaim, ...] | None) -> None:
        if self._is_logging():
            self._log.append((_CLAIM, owner, self.claims.get(owner)))
        if records:
            self.claims[owner] = records
        else:
            self.claims.pop(owner, None)

    def occupy(self, owner: Owner, pods: Sequence[int], host: Host, *, is_exiting: bool) -> None:
        """``owner`` runs (or exits) one pod asking ``host`` on each of ``pods`` (ranks)."""
        cpu, mem = host
        if not (cpu or mem) or not pods:
            return
        slot = 1 if is_exiting else 0
        for r in pods:
            self.add(r, slot, cpu, mem)
        added = tuple((r, cpu, mem, is_exiting) for r in pods)
        self.set_occupancy(owner, self.occupancy.get(owner, ()) + added)

    def mark_exiting(self, owner: Owner) -> None:
        records = self.occupancy.get(owner, ())
        for r, cpu, mem, is_exiting in records:
            if not is_exiting:
                values = list(self.use[r])
                values[0] -= cpu
                values[1] += cpu
                values[3] -= mem
                values[4] += mem
                self._set(r, values)
        if records:
            self.set_occupancy(owner, tuple((r, c, m, True) for r, c, m, _ in records))

    def vacate(self, owner: Owner) -> None:
        records = self.occupancy.get(owner, ())
        for r, cpu, mem, is_exiting in records:
            self.add(r, 1 if is_exiting else 0, -cpu, -mem)
        if records:
            self.set_occupancy(owner, ())

    def claim(self, owner: Owner, pods: Sequence[int], host: Host) -> None:
        """Claim ``host`` on each of ``pods`` for ``owner`` (after :meth:`unclaim`)."""
        cpu, mem = host
        if not (cpu or mem) or not pods:
            return
        for r in pods:
            self.add(r, 2, cpu, mem)
        self.set_claim(owner, tuple((r, cpu, mem) for r in pods))

    def release_claims(self, owner: Owner) -> None:
        """Take ``owner``'s claims off the nodes (its record stays)."""
        for r, cpu, mem in self.claims.get(owner, ()):
            self.add(r, 2, -cpu, -mem)

    def ignore_exiting(self) -> None:
        """Exiting victims count as gone (call under a mark)."""
        for r in sorted(self.exiting_nodes):
            values = list(self.use[r])
            values[1] = values[4] = 0
            self._set(r, values)

    def claim_fits_now(self, owner: Owner) -> bool:
        """Are ``owner``'s claimed CPU and memory physically free now, and do
        other claims on those nodes stay satisfiable?"""
        for r, cpu, mem in self.claims.get(owner, ()):
            u = self.use[r]
            if u[0] + u[1] + cpu > self.cpu_cap[r] or u[0] + u[2] > self.cpu_cap[r]:
                return False
            if u[3] + u[4] + mem > self.mem_cap[r] or u[3] + u[5] > self.mem_cap[r]:
                return False
        return True

    # -- undo --------------------------------------------------------------------
    def restore(self, entry: tuple[object, ...]) -> None:
        """Undo one logged change (``entry`` as logged by this book)."""
        tag = entry[0]
        if tag == _NODE:
            r, values = entry[1], entry[2]
            assert isinstance(r, int) and isinstance(values, tuple)
            self.use[r] = list(values)
            if values[1] or values[4]:
                self.exiting_nodes.add(r)
            else:
                self.exiting_nodes.discard(r)
            self._on_change(r)
            return
        owner, old = cast(Owner, entry[1]), entry[2]
        table = cast(dict[Owner, object], self.occupancy if tag == _OCC else self.claims)
        if old is None:
            table.pop(owner, None)
        else:
            table[owner] = old
