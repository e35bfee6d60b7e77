"""A fit probe: "would this request fit if these owners were gone?", without
changing the book.

Victim searches (SPEC 6.5) take candidates out one at a time and ask after
each whether the preemptor fits. Taking an owner out only changes the nodes
it uses, so the probe counts, once, how many pods of the request fit in its
scope now (from the scope's index, exact for greedy packing), and then keeps
the removed use per device on the side and re-counts only the nodes it
changed: no index updates, nothing to undo.

The availability rule is the book's, with exiting victims ignored (searches
treat them as gone): a device offers ``1000 - stay - claimed`` milli, nothing
on a node that is not ready or not in the request's scope. A node holds
``full // N`` pods of N whole devices (``full`` its fully available devices)
and ``sum(avail // charge)`` shared pods.
"""

from __future__ import annotations

from apportion.engine.placement.book import ALL_NODES, Constraints, DeviceBook, FilterKey
from apportion.engine.placement.index import FULL
from apportion.engine.placement.types import Owner, PlacementRequest


class FitProbe:
    """Fit of ``req`` within one scope as owners are taken out
    (:meth:`take_out`) and put back (:meth:`put_back`).

    ``fitting`` is how many pods fit in the scope on the book as it is; the
    book must not change while the probe is in use.
    """

    __slots__ = (
        "_book",
        "_claimed",
        "_constraints",
        "_count",
        "_dirty",
        "_fitting",
        "_fkey",
        "_gain",
        "_member",
        "_req",
        "_stay",
    )

    def __init__(
        self, book: DeviceBook, req: PlacementRequest, fkey: FilterKey | None,
        constraints: Constraints, fitting: int,
    ) -> None:
        self._book, self._req, self._fkey, self._constraints = book, req, fkey, constraints
        self._fitting = fitting
        self._stay: dict[int, int] = {}  # device -> stay milli taken out
        self._claimed: dict[int, int] = {}  # device -> claimed milli taken out
        self._dirty: set[int] = set()  # node ranks changed since the last count
        self._count: dict[int, int] = {}  # node rank -> pods it holds now (touched nodes)
        self._gain = 0  # pods gained over ``fitting`` on the touched nodes
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
            self._touch(book.dev_node[g])
            self._stay[g] = self._stay.get(g, 0) + sign * milli
        claim = book.claims.get(owner)
        if claim is not None:
            for g, milli in claim[1]:
                self._touch(book.dev_node[g])
                self._claimed[g] = self._claimed.get(g, 0) + sign * milli

    def _touch(self, rank: int) -> None:
        if rank not in self._count:  # first change on this node: its count before
            self._count[rank] = self._node_pods(rank)
        self._dirty.add(rank)

    def fits(self) -> bool:
        """Do at least ``min_pods`` pods fit now, with every owner taken out gone?"""
        for rank in self._dirty:
            now = self._node_pods(rank)
            self._gain += now - self._count[rank]
            self._count[rank] = now
        self._dirty.clear()
        return self._fitting + self._gain >= self._req.min_pods

    def _is_member(self, rank: int) -> bool:
        found = self._member.get(rank)
        if found is None:
            book, fkey = self._book, self._fkey
            found = fkey is not None and book.is_ready[rank] and (
                (fkey == ALL_NODES and not self._constraints)
                or book._matches(book.nodes[rank], fkey, self._constraints)
            )
            self._member[rank] = found
        return found

    def _node_pods(self, rank: int) -> int:
        """Pods of the request that node ``rank`` holds with the changes so far."""
        if not self._is_member(rank):
            return 0
        book, req = self._book, self._req
        first = book.first_dev[rank]
        stay_out, claimed_out = self._stay, self._claimed
        whole, charge = req.whole_devices, req.charge
        count = 0
        for g in range(first, first + book.nodes[rank].gpus):
            avail = (FULL - (book.stay[g] - stay_out.get(g, 0))
                     - (book.claimed[g] - claimed_out.get(g, 0)))
            if whole:
                count += avail >= FULL
            elif avail > 0:
                count += avail // charge
        return count // whole if whole else count
