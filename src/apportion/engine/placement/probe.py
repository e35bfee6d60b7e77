"""A fit probe: "would this one pod fit if these owners were gone?", without
changing the book.

Victim searches (SPEC 6.5) take candidates out one at a time and ask after
each whether the preemptor fits. For a single-pod request that does not fit
on the current state, the answer can only change on the nodes of the owners
taken out, so the probe keeps the removed use per device on the side and
re-checks only those nodes: no index updates, nothing to undo.

The availability rule is the book's, with exiting victims ignored (searches
treat them as gone): a device offers ``1000 - stay - claimed`` milli, nothing
on a node that is not ready or not in the request's scope.
"""

from __future__ import annotations

from apportion.domain.workload import TopologyMode
from apportion.engine.placement.book import Constraints, DeviceBook, FilterKey
from apportion.engine.placement.index import FULL
from apportion.engine.placement.types import Owner, PlacementRequest


class FitProbe:
    """Fit of one pod of ``req`` within ``constraints`` as owners are taken out
    (:meth:`take_out`) and put back (:meth:`put_back`).

    Valid only from a state where the pod does not fit (the caller checks with
    :meth:`ClusterState.fits` first) and while the book itself does not change.
    """

    __slots__ = (
        "_book",
        "_claimed",
        "_constraints",
        "_dirty",
        "_fitting",
        "_fkey",
        "_member",
        "_req",
        "_stay",
    )

    def __init__(
        self, book: DeviceBook, req: PlacementRequest, fkey: FilterKey | None,
        constraints: Constraints,
    ) -> None:
        if req.pods != 1:
            raise ValueError("a fit probe answers for single-pod requests only")
        self._book, self._req, self._fkey, self._constraints = book, req, fkey, constraints
        self._stay: dict[int, int] = {}  # device -> stay milli taken out
        self._claimed: dict[int, int] = {}  # device -> claimed milli taken out
        self._dirty: set[int] = set()  # node ranks changed since the last check
        self._fitting: set[int] = set()  # node ranks where the pod fits now
        self._member: dict[int, bool] = {}

    def take_out(self, owner: Owner) -> None:
        """Count ``owner``'s pods (or claim) as gone."""
        self._shift(owner, 1)

    def put_back(self, owner: Owner) -> None:
        """Undo :meth:`take_out` for ``owner``."""
        self._shift(owner, -1)

    def _shift(self, owner: Owner, sign: int) -> None:
        book = self._book
        for g, milli, is_exiting in book.occupancy.get(owner, ()):
            if is_exiting:  # ignored already: searches treat exiting use as gone
                continue
            self._stay[g] = self._stay.get(g, 0) + sign * milli
            self._dirty.add(book.dev_node[g])
        claim = book.claims.get(owner)
        if claim is not None:
            for g, milli in claim[1]:
                self._claimed[g] = self._claimed.get(g, 0) + sign * milli
                self._dirty.add(book.dev_node[g])

    def fits(self) -> bool:
        """Does the pod fit now, with every owner taken out gone?"""
        for rank in self._dirty:
            if self._node_fits(rank):
                self._fitting.add(rank)
            else:
                self._fitting.discard(rank)
        self._dirty.clear()
        return bool(self._fitting)

    def _is_member(self, rank: int) -> bool:
        found = self._member.get(rank)
        if found is None:
            book = self._book
            node = book.nodes[rank]
            topo = self._req.topology
            found = (
                self._fkey is not None
                and book.is_ready[rank]
                and book._matches(node, self._fkey, self._constraints)
                # required topology outside ``constraints``: any one domain, so
                # the node must at least belong to one
                and (topo is None or topo.mode is not TopologyMode.REQUIRED
                     or topo.level in dict(self._constraints) or topo.level in node.labels)
            )
            self._member[rank] = found
        return found

    def _node_fits(self, rank: int) -> bool:
        if not self._is_member(rank):
            return False
        book, req = self._book, self._req
        first = book.first_dev[rank]
        stay_out, claimed_out = self._stay, self._claimed
        whole = req.whole_devices
        full = 0
        for g in range(first, first + book.nodes[rank].gpus):
            avail = (FULL - (book.stay[g] - stay_out.get(g, 0))
                     - (book.claimed[g] - claimed_out.get(g, 0)))
            if whole:
                if avail >= FULL:
                    full += 1
                    if full >= whole:
                        return True
            elif avail >= req.charge:
                return True
        return False
