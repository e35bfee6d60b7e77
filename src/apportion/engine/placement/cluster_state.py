"""ClusterState: a mutable working copy of one pool's devices (SPEC 5, 6.4-6.7).

Occupancy is the physical use of devices: Starting/Running pods (``occupy``)
and preempted victims still inside their grace (``occupy_exiting``,
``mark_exiting``). Claims (``claim``) reserve capacity for an owner:
nominations (6.6) and starvation holds (6.7). Per device, with ``stay`` the
use by non-exiting pods, ``exiting`` the use by exiting victims and
``claims`` the sum of claims, an owner O may use now
``1000 - stay - max(exiting, claims - claims of O on the device)`` milli, and
nothing on a node that is not ready.

Queries (``place``, ``can_ever_place``, ``free_milli``, ...) change nothing
observable. Trials use ``checkpoint``/``rollback``/``commit_checkpoint``: every
change since a checkpoint is logged and undone exactly (KAI-Scheduler's
statement idea). Everything is deterministic: ties break by node name and
device index, never by set or dict order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apportion.domain.cluster import Node, Packing, Pool, pool_capacity
from apportion.domain.workload import Placement, TopologyMode
from apportion.engine.placement.device_book import ALL_NODES, DeviceBook, OccRecord
from apportion.engine.placement.feasibility import never_result
from apportion.engine.placement.fit_probe import FitProbe
from apportion.engine.placement.fragmentation import Fragmentation
from apportion.engine.placement.host_book import NO_HOST, Host
from apportion.engine.placement.host_fit import fit_count, host_of
from apportion.engine.placement.packing import pack
from apportion.engine.placement.scope_index import FULL
from apportion.engine.placement.shapes import ShapeMix
from apportion.engine.placement.topology import Choice, choose
from apportion.engine.placement.types import (
    Counters,
    FailureKind,
    Owner,
    PlacementRequest,
    PlacementResult,
)


class ClusterState:
    """Devices of one pool: occupancy, claims, placement queries and trials."""

    def __init__(
        self, pool: Pool, nodes: Iterable[Node], *, hosts: Mapping[int, Host] | None = None,
        mix: ShapeMix | None = None,
    ) -> None:
        """Index ``nodes`` (of ``pool``, any state; ValueError for another pool's
        node or a duplicate). Scopes for the pool's topology levels are built now;
        other levels and filters on first use. ``hosts`` gives each workload id's
        per-pod host request (milli-CPU, MiB) for :meth:`occupy` and :meth:`claim`
        (default: none). ``mix`` is the pod shapes the pool typically runs:
        with ``packing: fragmentation`` pods go where fragmentation against it
        grows least; without a mix (or with ``best_fit``) they pack best fit."""
        node_list = list(nodes)
        self.pool = pool
        self.hosts: Mapping[int, Host] = hosts or {}
        self.counters = Counters()
        self.capacity: int = pool_capacity(node_list)
        self._book = DeviceBook(pool, node_list)
        self.set_mix(mix)
        self._book.scope(ALL_NODES)
        for level in pool.topology:
            for value in self._book.domain_values(ALL_NODES, (), level):
                self._book.scope(ALL_NODES, ((level, value),))

    def set_mix(self, mix: ShapeMix | None) -> None:
        """The pod shapes to measure fragmentation against from now on (a
        ``fragmentation`` pool packs best fit while it has none)."""
        book = self._book
        if not mix or self.pool.packing is not Packing.FRAGMENTATION:
            book.frag, book.changed_nodes = None, None
        elif book.frag is None:
            book.frag = Fragmentation(book, mix)
        else:
            book.frag.set_mix(mix)

    # -- occupancy ------------------------------------------------------------
    def host_for(self, owner: Owner) -> Host:
        """The per-pod host request of ``owner``'s workload (``hosts``)."""
        return self.hosts.get(owner[0], NO_HOST)

    def occupy(self, owner: Owner, placement: Placement) -> None:
        """Record ``placement`` as Starting/Running pods of ``owner``.

        Allowed on cordoned and down nodes (existing work is never refused);
        ValueError if a device would exceed 1000 milli of physical use, or
        names an unknown node/device. Adds to what ``owner`` already occupies.
        Each pod also takes its workload's host request on its node (a node's
        CPU or memory may then be over-committed: existing work is never
        refused).
        """
        self._occupy(owner, placement, is_exiting=False)

    def occupy_many(self, items: Iterable[tuple[Owner, Placement]]) -> None:
        """:meth:`occupy` for many owners at once (loading a snapshot): the same
        state, with the indexes built once at the end instead of per device.
        ValueError as :meth:`occupy`, in which case nothing is occupied."""
        book = self._book
        added: dict[int, int] = {}
        records: dict[Owner, list[OccRecord]] = {}
        pairs = list(items)
        for owner, placement in pairs:
            for g, milli in self._shares(placement).items():
                used = book.stay[g] + book.exiting[g] + added.get(g, 0) + milli
                if used > FULL:
                    node = book.nodes[book.dev_node[g]].name
                    raise ValueError(
                        f"device {node}/{book.dev_index[g]} would hold {used} milli-GPU (> 1000)"
                    )
                added[g] = added.get(g, 0) + milli
                records.setdefault(owner, []).append((g, milli, False))
        for g, milli in added.items():
            book.stay[g] += milli
        for owner, recs in records.items():
            book.set_occupancy(owner, book.occupancy.get(owner, ()) + tuple(recs))
        for owner, placement in pairs:
            book.host.occupy(owner, self._ranks(placement), self.host_for(owner),
                             is_exiting=False)
        book.reindex()

    def occupy_exiting(self, owner: Owner, placement: Placement) -> None:
        """Record ``placement`` as held by a preempted victim inside its grace."""
        self._occupy(owner, placement, is_exiting=True)

    def _occupy(self, owner: Owner, placement: Placement, *, is_exiting: bool) -> None:
        book = self._book
        shares = self._shares(placement)
        for g, milli in shares.items():
            used = book.stay[g] + book.exiting[g] + milli
            if used > FULL:
                node = book.nodes[book.dev_node[g]].name
                raise ValueError(
                    f"device {node}/{book.dev_index[g]} would hold {used} milli-GPU (> 1000)"
                )
        for g, milli in shares.items():
            stay, exiting = book.stay[g], book.exiting[g]
            if is_exiting:
                exiting += milli
            else:
                stay += milli
            book.set_device(g, stay, exiting, book.claimed[g])
        book.flush()
        added = tuple((g, milli, is_exiting) for g, milli in shares.items())
        book.set_occupancy(owner, book.occupancy.get(owner, ()) + added)
        book.host.occupy(owner, self._ranks(placement), self.host_for(owner),
                         is_exiting=is_exiting)

    def mark_exiting(self, owner: Owner) -> None:
        """``owner``'s occupied pods become exiting (a victim with grace > 0)."""
        book = self._book
        records = book.occupancy.get(owner, ())
        for g, milli, is_exiting in records:
            if not is_exiting:
                book.set_device(g, book.stay[g] - milli, book.exiting[g] + milli, book.claimed[g])
        book.host.mark_exiting(owner)
        book.flush()
        if records:
            book.set_occupancy(owner, tuple((g, m, True) for g, m, _ in records))

    def vacate(self, owner: Owner) -> None:
        """Remove all occupancy (normal or exiting) of ``owner``; no-op if none."""
        book = self._book
        records: tuple[OccRecord, ...] = book.occupancy.get(owner, ())
        for g, milli, is_exiting in records:
            if is_exiting:
                book.set_device(g, book.stay[g], book.exiting[g] - milli, book.claimed[g])
            else:
                book.set_device(g, book.stay[g] - milli, book.exiting[g], book.claimed[g])
        book.host.vacate(owner)
        book.flush()
        if records:
            book.set_occupancy(owner, ())

    # -- claims ---------------------------------------------------------------
    def claim(self, owner: Owner, placement: Placement) -> None:
        """Reserve ``placement`` for ``owner`` (replacing any claim it had).

        Claims may overlap exiting victims (they wait for that capacity) and,
        for starvation holds, even running work; ``can_start_on_claim`` says
        when the owner can start.
        """
        self.unclaim(owner)
        book = self._book
        shares = self._shares(placement)
        for g, milli in shares.items():
            book.set_device(g, book.stay[g], book.exiting[g], book.claimed[g] + milli)
        book.host.claim(owner, self._ranks(placement), self.host_for(owner))
        book.flush()
        book.set_claim(owner, (placement, tuple(shares.items())))

    def unclaim(self, owner: Owner) -> None:
        """Drop ``owner``'s claim; no-op if none."""
        book = self._book
        if owner in book.claims:
            book.release_claims(owner)
            book.set_claim(owner, None)
            book.host.set_claim(owner, None)

    def claim_of(self, owner: Owner) -> Placement:
        """The placement claimed for ``owner``, () if none."""
        record = self._book.claims.get(owner)
        return () if record is None else record[0]

    def can_start_on_claim(self, owner: Owner) -> bool:
        """True if ``owner`` has a claim whose devices are physically free now
        (stay + exiting + own claim <= 1000), all other claims on them stay
        satisfiable (stay + all claims <= 1000), and whose nodes are ready."""
        book = self._book
        record = book.claims.get(owner)
        if record is None:
            return False
        for g, milli in record[1]:
            stay = book.stay[g]
            if not book.is_ready[book.dev_node[g]]:
                return False
            if stay + book.exiting[g] + milli > FULL or stay + book.claimed[g] > FULL:
                return False
        return book.host.claim_fits_now(owner)

    def exiting_on(self, placement: Placement) -> list[Owner]:
        """Owners whose exiting pods (preempted, in their grace) hold devices of
        ``placement``, sorted. Scans the owners: for messages, not hot paths."""
        devices = set(self._shares(placement))
        return sorted(
            owner for owner, records in self._book.occupancy.items()
            if any(is_exiting and g in devices for g, _milli, is_exiting in records)
        )

    # -- queries ----------------------------------------------------------------
    def place(
        self,
        req: PlacementRequest,
        *,
        domain: tuple[str, str] | None = None,
        allow_exiting: bool = False,
    ) -> PlacementResult:
        """Where ``req`` would go now (nothing changes).

        ``domain=(level, value)`` restricts the search to nodes whose label
        ``level`` is ``value``; permanent failures then refer to that domain.
        Pods are placed one after another on the evolving state: at least
        ``min_pods`` and as many as fit up to ``pods``, or none. ``req.owner``
        may use capacity claimed for it. ``allow_exiting`` treats exiting
        victims as gone (for preemption searches and nominations: the result
        may then lie on devices they still hold; claim it, do not occupy it).
        """
        return self._query(req, domain, allow_exiting, is_packed=True)

    def place_and_occupy(self, req: PlacementRequest) -> PlacementResult:
        """:meth:`place`, and if it succeeds, :meth:`occupy` the result for
        ``req.owner``: the same state, packing once (a gang's trial pods are
        kept instead of undone and applied again). The owner must hold no
        claim and occupy nothing yet (ValueError)."""
        book = self._book
        if req.owner in book.claims or req.owner in book.occupancy:
            raise ValueError(f"owner {req.owner} already holds devices")
        return self._query(req, None, False, is_packed=True, keep=True)

    def fits(
        self,
        req: PlacementRequest,
        *,
        domain: tuple[str, str] | None = None,
        allow_exiting: bool = False,
    ) -> bool:
        """Would :meth:`place` succeed? Same rules, but only counts the pods
        that fit from the indexes and packs nothing (for searches that ask
        many times and need the placement once)."""
        return self._query(req, domain, allow_exiting, is_packed=False).failure is None

    def _query(
        self,
        req: PlacementRequest,
        domain: tuple[str, str] | None,
        allow_exiting: bool,
        *,
        is_packed: bool,
        keep: bool = False,
    ) -> PlacementResult:
        """Choose a scope for ``req`` on a marked copy of the book and, if
        ``is_packed``, pack it; the book is restored before returning, unless
        ``keep`` and the pods were placed: then they stay, occupied by
        ``req.owner`` (see :meth:`place_and_occupy`)."""
        _check_request(req)
        book = self._book
        fkey = book.filter_key(req.gpu_types, req.node_selector)
        base = () if domain is None else (domain,)
        if fkey is None:
            never = never_result(book, req, None, base)
            assert never is not None
            return never
        token = book.mark()
        kept = False
        try:
            book.release_claims(req.owner)
            if allow_exiting:
                book.ignore_exiting()
            topo = req.topology
            if not is_packed and (topo is None or topo.level in dict(base)):
                # No domain to choose: count from the scope's index, no message.
                count = fit_count(book, book.scope(fkey, base), req, req.min_pods)
                if count < req.min_pods:
                    return PlacementResult(failure=FailureKind.WAITING_FOR_CAPACITY)
                return PlacementResult(fitting_pods=count)
            choice = choose(book, req, fkey, base, self.counters)
            if not isinstance(choice, Choice):
                return choice
            if not is_packed:
                return PlacementResult(fitting_pods=choice.count, domain=choice.domain)
            free = choice.scope.free_total
            pods = pack(book, choice.scope, req, choice.count, self.counters)
            if keep:
                last = pods[-1]  # pack applies every pod but the last as trial use
                for share in last.devices:
                    book.add_stay(book.device_id(last.node, share.index), share.milli)
                host = host_of(req)
                if host[0] or host[1]:  # pack took the others' host use already
                    book.host.add(book.rank[last.node], 0, *host)
                    book.host.set_occupancy(req.owner, tuple(
                        (r, host[0], host[1], False) for r in self._ranks(pods)))
                book.flush()
                shares = self._shares(pods)
                book.set_occupancy(req.owner, tuple((g, m, False) for g, m in shares.items()))
                kept = True
        finally:
            if kept:
                book.release_mark(token)
            else:
                book.undo_to(token, keep_mark=False)
        self.counters.placements += 1
        return PlacementResult(
            pods=pods, domain=choice.domain, fitting_pods=choice.count, free_milli=free
        )

    def probe(self, req: PlacementRequest, *, domain: tuple[str, str] | None = None) -> FitProbe:
        """A :class:`FitProbe` answering :meth:`fits` (with ``allow_exiting``)
        as owners are taken out, without changing the book. ``req.owner`` must
        hold no claim; a required-topology request is probed in one domain."""
        _check_request(req)
        book = self._book
        if req.owner in book.claims:
            raise ValueError("cannot probe for an owner that holds a claim")
        constraints: tuple[tuple[str, str], ...] = () if domain is None else (domain,)
        topo = req.topology
        if (topo is not None and topo.mode is TopologyMode.REQUIRED
                and topo.level not in dict(constraints)):
            raise ValueError("a required-topology request is probed one domain at a time")
        fkey = book.filter_key(req.gpu_types, req.node_selector)
        fitting = 0
        if fkey is not None:
            token = book.mark()
            try:
                book.ignore_exiting()
                fitting = fit_count(book, book.scope(fkey, constraints), req, req.pods * FULL)
            finally:
                book.undo_to(token, keep_mark=False)
        return FitProbe(book, req, fkey, constraints, fitting)

    def can_ever_place(self, req: PlacementRequest) -> PlacementResult | None:
        """None if an empty pool (nodes not down; cordoned count) could hold
        ``req``; else NO_NODE_FITS or TOPOLOGY_UNSATISFIABLE with a message."""
        _check_request(req)
        book = self._book
        return never_result(book, req, book.filter_key(req.gpu_types, req.node_selector), ())

    def domains(self, level: str) -> tuple[str, ...]:
        """Sorted values of label ``level`` among the pool's nodes (any state)."""
        return tuple(
            sorted({n.labels[level] for n in self._book.nodes if level in n.labels})
        )

    def free_milli(self, owner: Owner | None = None, *, allow_exiting: bool = False) -> int:
        """Milli-GPU ``owner`` could use now on ready nodes (its claims count as
        free; with ``allow_exiting``, so do devices held by exiting victims)."""
        book = self._book
        if not allow_exiting and (owner is None or owner not in book.claims):
            return book.scope(ALL_NODES).free_total
        token = book.mark()
        try:
            if owner is not None:
                book.release_claims(owner)
            if allow_exiting:
                book.ignore_exiting()
            return book.scope(ALL_NODES).free_total
        finally:
            book.undo_to(token, keep_mark=False)

    def device_used(self, node: str, index: int) -> int:
        """Physical milli-GPU in use on a device (running plus exiting pods)."""
        g = self._book.device_id(node, index)
        return self._book.stay[g] + self._book.exiting[g]

    # -- trials -----------------------------------------------------------------
    def checkpoint(self) -> int:
        """A token; every change after it can be undone with ``rollback``."""
        return self._book.mark()

    def rollback(self, token: int) -> None:
        """Undo every change since ``checkpoint`` returned ``token``.

        The token stays valid (try, roll back, try again); later tokens do not.
        """
        self._book.undo_to(token, keep_mark=True)
        self.counters.rollbacks += 1

    def commit_checkpoint(self, token: int) -> None:
        """Keep the changes since ``token`` and release it (and later tokens).
        When no checkpoint remains, the undo log is dropped."""
        self._book.release_mark(token)

    # -- helpers ------------------------------------------------------------------
    def _ranks(self, placement: Placement) -> list[int]:
        """Node rank of each pod of ``placement`` (ValueError for an unknown node)."""
        rank = self._book.rank
        try:
            return [rank[pod.node] for pod in placement]
        except KeyError as err:
            raise ValueError(f"node {err.args[0]!r} is not in pool {self.pool.name!r}") from None

    def _shares(self, placement: Placement) -> dict[int, int]:
        """Milli per device id over all pods of ``placement`` (ValueError if bad)."""
        shares: dict[int, int] = {}
        for pod in placement:
            for share in pod.devices:
                if share.milli <= 0:
                    raise ValueError(f"share of {pod.node}/{share.index} must be > 0")
                g = self._book.device_id(pod.node, share.index)
                shares[g] = shares.get(g, 0) + share.milli
        return shares


def _check_request(req: PlacementRequest) -> None:
    """Bad input at the boundary is a bug of the caller: ValueError."""
    if req.pods < 1 or not 1 <= req.min_pods <= req.pods:
        raise ValueError(f"need 1 <= min_pods <= pods, got {req.min_pods}/{req.pods}")
    if req.whole_devices < 0 or (req.whole_devices == 0 and req.charge < 0):
        raise ValueError(f"bad request size: charge {req.charge}, whole {req.whole_devices}")
