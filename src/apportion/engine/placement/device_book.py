"""The device book: per-device usage of one pool, its scopes and its undo log.

Per device the book keeps three numbers in milli-GPU:

* ``stay``     physical use by pods that keep running (Starting/Running, trials);
* ``exiting``  physical use by preempted victims still inside their grace;
* ``claimed``  the sum of claims (nominations and starvation holds).

What a device offers to new pods of an owner without claims is
``avail = 1000 - stay - max(exiting, claimed)`` (0 on nodes that are not
ready): claims are a promise on the capacity that exiting victims will free,
so they only cost extra where they exceed it. An owner's own claims are taken
out for its requests (see ``release_claims``), which gives the rule of the
brief: ``1000 - stay - max(exiting, claimed - own)``.

Every change goes through :meth:`DeviceBook.set_device`, which updates the
scopes containing the device's node and, while a checkpoint is held, logs the
old values so :meth:`DeviceBook.undo_to` restores the exact previous state.
A node's count of fully available devices is re-indexed once per operation
(:meth:`DeviceBook.flush`), not once per device: an 8-GPU pod moves its node
between count buckets once, not eight times.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from apportion.domain.cluster import Node, NodeState, Pool
from apportion.domain.workload import Placement
from apportion.engine.placement.host_book import HostBook
from apportion.engine.placement.scope_index import FULL, ScopeIndex
from apportion.engine.placement.types import Owner

#: A node filter: (acceptable gpu types, () = any; sorted node-selector items).
FilterKey = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
#: Label constraints of a scope: sorted (label, value) pairs.
Constraints = tuple[tuple[str, str], ...]
#: One occupancy record: (device id, milli, is exiting).
OccRecord = tuple[int, int, bool]
#: A claim: the placement as given, and (device id, milli) per share.
ClaimRecord = tuple[Placement, tuple[tuple[int, int], ...]]

if TYPE_CHECKING:
    from apportion.engine.placement.fragmentation import Fragmentation

ALL_NODES: FilterKey = ((), ())
_DeviceEntry = tuple[int, int, int, int]
_OccEntry = tuple[Owner, tuple[OccRecord, ...] | None]
_ClaimEntry = tuple[Owner, ClaimRecord | None, None]
#: Host entries (see HostBook) start with a string tag; they are typed loosely.
_LogEntry = Any
#: A node's static shape: (gpus, cpu capacity, memory capacity), host
#: capacities as :data:`~apportion.engine.placement.host_book.UNLIMITED` when not stated.
NodeShape = tuple[int, int, int]


class DeviceBook:
    """Devices of one pool, with incremental scope indexes and an undo log."""

    def __init__(self, pool: Pool, nodes: Iterable[Node]) -> None:
        """Number nodes by name and devices by (node name, index); index the pool."""
        self.pool = pool
        self.nodes: list[Node] = sorted(nodes, key=lambda n: n.name)
        self.rank: dict[str, int] = {}
        self.first_dev: list[int] = []
        self.dev_node: list[int] = []
        self.dev_index: list[int] = []
        for rank, node in enumerate(self.nodes):
            if node.name in self.rank:
                raise ValueError(f"node {node.name!r} given twice")
            if node.pool != pool.name:
                raise ValueError(f"node {node.name!r} is in pool {node.pool!r}, not {pool.name!r}")
            self.rank[node.name] = rank
            self.first_dev.append(len(self.dev_node))
            self.dev_node.extend([rank] * node.gpus)
            self.dev_index.extend(range(node.gpus))
        devices = len(self.dev_node)
        self.is_ready = [n.state is NodeState.READY for n in self.nodes]
        self.stay = [0] * devices
        self.exiting = [0] * devices
        self.claimed = [0] * devices
        self.exiting_devs: set[int] = set()
        self.avail = [FULL if self.is_ready[self.dev_node[g]] else 0 for g in range(devices)]
        self.full_devs: list[list[int]] = [
            list(range(self.first_dev[r], self.first_dev[r] + n.gpus)) if self.is_ready[r] else []
            for r, n in enumerate(self.nodes)
        ]
        self.node_scopes: list[list[ScopeIndex]] = [[] for _ in self.nodes]
        self.scopes: dict[tuple[FilterKey, Constraints], ScopeIndex] = {}
        self.occupancy: dict[Owner, tuple[OccRecord, ...]] = {}
        self.claims: dict[Owner, ClaimRecord] = {}
        self._filters: dict[FilterKey, FilterKey | None] = {}
        self._domain_values: dict[tuple[FilterKey, Constraints, str], tuple[str, ...]] = {}
        self._static: dict[tuple[FilterKey, Constraints], tuple[tuple[NodeShape, int], ...]] = {}
        self._by_label: dict[str, dict[str, list[int]]] = {}
        #: Nodes whose full-device count changed since the last flush -> count before.
        self._dirty: dict[int, int] = {}
        self._log: list[_LogEntry] = []
        self._log_base = 0
        self._marks: list[int] = []
        #: Nodes whose state changed since the fragmentation index last looked
        #: (None: nobody is looking).
        self.changed_nodes: set[int] | None = None
        #: The packing policy's picker when it is ``fragmentation`` (see
        #: ClusterState); None packs best fit.
        self.frag: Fragmentation | None = None
        self.host = HostBook(self.nodes, self._log, self._is_logging, self._node_changed)

    def _is_logging(self) -> bool:
        return bool(self._marks)

    def _node_changed(self, rank: int) -> None:
        if self.changed_nodes is not None:
            self.changed_nodes.add(rank)

    # -- node filters and scopes -------------------------------------------
    def node_gpu_type(self, node: Node) -> str | None:
        return node.gpu_type if node.gpu_type is not None else self.pool.gpu_type

    def filter_key(
        self, gpu_types: tuple[str, ...], selector: Mapping[str, str]
    ) -> FilterKey | None:
        """Canonical filter for a request: ALL_NODES if every node matches,
        None if no node does (then nothing can ever be placed)."""
        key: FilterKey = (gpu_types, tuple(sorted(selector.items())))
        if key == ALL_NODES:
            return ALL_NODES
        if key not in self._filters:
            matching = sum(1 for n in self.nodes if self._matches(n, key, ()))
            canon: FilterKey | None = key
            if matching == 0:
                canon = None
            elif matching == len(self.nodes):
                canon = ALL_NODES
            self._filters[key] = canon
        return self._filters[key]

    def _matches(self, node: Node, fkey: FilterKey, constraints: Constraints) -> bool:
        gpu_types, selector = fkey
        if gpu_types and self.node_gpu_type(node) not in gpu_types:
            return False
        labels = node.labels
        return all(labels.get(k) == v for k, v in selector) and all(
            labels.get(k) == v for k, v in constraints
        )

    def member_nodes(self, fkey: FilterKey, constraints: Constraints) -> list[int]:
        """Ranks of all nodes (any state) matching a filter and label constraints.

        With constraints, only the nodes carrying the first label value are
        looked at (one pass per label key, then a lookup), so building one
        scope per topology domain costs the domain's nodes, not the pool's.
        """
        if not constraints:
            return [r for r, n in enumerate(self.nodes) if self._matches(n, fkey, constraints)]
        level, value = constraints[0]
        ranks = self._label_ranks(level).get(value, ())
        return [r for r in ranks if self._matches(self.nodes[r], fkey, constraints)]

    def _label_ranks(self, level: str) -> dict[str, list[int]]:
        """Node ranks by their value of label ``level`` (built once per key)."""
        found = self._by_label.get(level)
        if found is None:
            found = {}
            for r, n in enumerate(self.nodes):
                value = n.labels.get(level)
                if value is not None:
                    found.setdefault(value, []).append(r)
            self._by_label[level] = found
        return found

    def scope(self, fkey: FilterKey, constraints: Constraints = ()) -> ScopeIndex:
        """The index of the ready nodes matching ``fkey`` and ``constraints``.

        Built on first use (one pass over the nodes), then kept current by
        every device change.
        """
        key = (fkey, constraints)
        found = self.scopes.get(key)
        if found is not None:
            return found
        self.flush()
        index = ScopeIndex(key)
        for rank in self.member_nodes(fkey, constraints):
            if not self.is_ready[rank]:
                continue
            first = self.first_dev[rank]
            devs = range(first, first + self.nodes[rank].gpus)
            index.add_node(rank, [(g, self.avail[g]) for g in devs], len(self.full_devs[rank]))
            self.node_scopes[rank].append(index)
        self.scopes[key] = index
        return index

    def domain_values(
        self, fkey: FilterKey, constraints: Constraints, level: str
    ) -> tuple[str, ...]:
        """Sorted values of label ``level`` among matching nodes that are not down."""
        key = (fkey, constraints, level)
        found = self._domain_values.get(key)
        if found is None:
            found = tuple(
                sorted(
                    {
                        self.nodes[r].labels[level]
                        for r in self.member_nodes(fkey, constraints)
                        if level in self.nodes[r].labels
                        and self.nodes[r].state is not NodeState.DOWN
                    }
                )
            )
            self._domain_values[key] = found
        return found

    def static_hist(
        self, fkey: FilterKey, constraints: Constraints
    ) -> tuple[tuple[NodeShape, int], ...]:
        """(node shape, node count) over matching nodes that are not down,
        most GPUs first: what an empty scope could hold (cordoned nodes count)."""
        key = (fkey, constraints)
        found = self._static.get(key)
        if found is None:
            counts: dict[NodeShape, int] = {}
            host = self.host
            for r in self.member_nodes(fkey, constraints):
                node = self.nodes[r]
                if node.state is not NodeState.DOWN and node.gpus:
                    shape = (node.gpus, host.cpu_cap[r], host.mem_cap[r])
                    counts[shape] = counts.get(shape, 0) + 1
            found = tuple(sorted(counts.items(), reverse=True))
            self._static[key] = found
        return found

    # -- devices --------------------------------------------------------------
    def device_id(self, node: str, index: int) -> int:
        """Device id of ``node``/``index``; ValueError if the pool has no such device."""
        rank = self.rank.get(node)
        if rank is None:
            raise ValueError(f"node {node!r} is not in pool {self.pool.name!r}")
        if not 0 <= index < self.nodes[rank].gpus:
            raise ValueError(f"node {node!r} has no device {index}")
        return self.first_dev[rank] + index

    def set_device(self, g: int, stay: int, exiting: int, claimed: int) -> None:
        """Set a device's three numbers, re-index it, and log the old values.

        The node's full-device count is re-indexed by :meth:`flush`, which every
        operation calls when it is done (queries must not run in between)."""
        if self._marks:
            self._log.append((g, self.stay[g], self.exiting[g], self.claimed[g]))
        self.stay[g], self.exiting[g], self.claimed[g] = stay, exiting, claimed
        if exiting:
            self.exiting_devs.add(g)
        elif self.exiting_devs:
            self.exiting_devs.discard(g)
        node = self.dev_node[g]
        if self.changed_nodes is not None:
            self.changed_nodes.add(node)
        if not self.is_ready[node]:
            return
        new = FULL - stay - (exiting if exiting > claimed else claimed)
        if new < 0:
            new = 0
        old = self.avail[g]
        if new == old:
            return
        self.avail[g] = new
        self._reindex(g, node, old, new)

    def _reindex(self, g: int, node: int, old: int, new: int) -> None:
        """Device ``g`` of ``node`` went from ``old`` to ``new`` milli available."""
        if old == FULL or new == FULL:
            devs = self.full_devs[node]
            if node not in self._dirty:
                self._dirty[node] = len(devs)
            if new == FULL:
                insort(devs, g)
            else:
                del devs[bisect_left(devs, g)]
        if 0 < old < FULL or 0 < new < FULL:
            for index in self.node_scopes[node]:
                index.device_changed(g, old, new)
        else:  # whole device taken or freed: only the totals move
            for index in self.node_scopes[node]:
                index.free_total += new - old

    def flush(self) -> None:
        """Re-index the full-device counts of the nodes changed since the last flush."""
        if not self._dirty:
            return
        for node, before in self._dirty.items():
            after = len(self.full_devs[node])
            if after != before:
                for index in self.node_scopes[node]:
                    index.node_full_changed(node, before, after)
        self._dirty.clear()

    def reindex(self) -> None:
        """Recompute every device's availability and rebuild every scope from
        the three numbers per device (after a bulk load that set them directly)."""
        if self._marks:
            raise ValueError("cannot re-index while a checkpoint is held")
        self._dirty.clear()
        if self.changed_nodes is not None:
            self.changed_nodes.update(range(len(self.nodes)))
        for g in range(len(self.avail)):
            ready = self.is_ready[self.dev_node[g]]
            self.avail[g] = (
                max(0, FULL - self.stay[g] - max(self.exiting[g], self.claimed[g])) if ready else 0
            )
        for rank, node in enumerate(self.nodes):
            first = self.first_dev[rank]
            self.full_devs[rank] = [
                g for g in range(first, first + node.gpus) if self.avail[g] == FULL
            ] if self.is_ready[rank] else []
        keys = list(self.scopes)
        self.scopes = {}
        self.node_scopes = [[] for _ in self.nodes]
        for fkey, constraints in keys:
            self.scope(fkey, constraints)

    def add_stay(self, g: int, milli: int) -> None:
        """Trial use of one device (packing); call :meth:`flush` after the pod."""
        self.set_device(g, self.stay[g] + milli, self.exiting[g], self.claimed[g])

    # -- owners' records (logged) -------------------------------------------
    def set_occupancy(self, owner: Owner, records: tuple[OccRecord, ...]) -> None:
        if self._marks:
            self._log.append((owner, self.occupancy.get(owner)))
        if records:
            self.occupancy[owner] = records
        else:
            self.occupancy.pop(owner, None)

    def set_claim(self, owner: Owner, record: ClaimRecord | None) -> None:
        if self._marks:
            self._log.append((owner, self.claims.get(owner), None))
        if record is None:
            self.claims.pop(owner, None)
        else:
            self.claims[owner] = record

    def release_claims(self, owner: Owner) -> None:
        """Take ``owner``'s claims off the devices (its record stays)."""
        self.host.release_claims(owner)
        record = self.claims.get(owner)
        if record is None:
            return
        for g, milli in record[1]:
            self.set_device(g, self.stay[g], self.exiting[g], self.claimed[g] - milli)
        self.flush()

    def ignore_exiting(self) -> None:
        """Treat exiting victims as gone (they will free their devices): each
        device then offers ``1000 - stay - claims``. Call under a mark."""
        for g in sorted(self.exiting_devs):
            self.set_device(g, self.stay[g], 0, self.claimed[g])
        self.host.ignore_exiting()
        self.flush()

    # -- undo log -----------------------------------------------------------
    def mark(self) -> int:
        """Start logging; returns a token for :meth:`undo_to`."""
        token = self._log_base + len(self._log)
        self._marks.append(token)
        return token

    def _mark_position(self, token: int) -> int:
        """Position of ``token`` in the mark stack (the newest of equal tokens:
        a mark taken with no change since the previous one has the same value)."""
        for pos in range(len(self._marks) - 1, -1, -1):
            if self._marks[pos] == token:
                return pos
        raise ValueError(f"unknown or released checkpoint {token}")

    def undo_to(self, token: int, *, keep_mark: bool) -> None:
        """Undo every change since ``token``; drop later marks (and this one
        unless ``keep_mark``)."""
        pos = self._mark_position(token)
        keep = token - self._log_base
        log = self._log
        while len(log) > keep:
            entry = log.pop()
            # Entries are told apart by length: 4 device, 2 occupancy, 3 claim;
            # host entries start with a string tag.
            if isinstance(entry[0], str):
                self.host.restore(entry)
            elif len(entry) == 4:
                self._restore_device(*entry)
            elif len(entry) == 2:
                owner, occ = entry
                if occ is None:
                    self.occupancy.pop(owner, None)
                else:
                    self.occupancy[owner] = occ
            else:
                owner, claim, _ = entry
                if claim is None:
                    self.claims.pop(owner, None)
                else:
                    self.claims[owner] = claim
        self.flush()
        del self._marks[pos + 1 if keep_mark else pos :]
        self._trim()

    def release_mark(self, token: int) -> None:
        """Accept the changes since ``token``; forget the log when no mark remains."""
        del self._marks[self._mark_position(token) :]
        self._trim()

    def _trim(self) -> None:
        if not self._marks:
            self._log_base += len(self._log)
            self._log.clear()

    def _restore_device(self, g: int, stay: int, exiting: int, claimed: int) -> None:
        marks, self._marks = self._marks, []
        self.set_device(g, stay, exiting, claimed)
        self._marks = marks
