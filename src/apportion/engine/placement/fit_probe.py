"""A fit probe: "would this request fit if these owners were gone?", without
changing the book.

Victim searches (SPEC 6.5) take candidates out one at a time and ask after
each whether the preemptor fits. Taking an owner out only changes the nodes
it uses, so the probe counts, once, how many pods of the request fit in its
scope now (from the scope's index, exact for greedy packing), and then keeps
the removed use per device on the side and counts the pods each change
gains or loses: no index updates, nothing to undo.

The availability rule is the book's, with exiting victims ignored (searches
treat them as gone): a device offers ``1000 - stay - claimed`` milli, nothing
on a node that is not ready or not in the request's scope. A node holds
``full // N`` pods of N whole devices (``full`` its fully available devices)
and ``sum(avail // charge)`` shared pods.
"""

from __future__ import annotations

from apportion.engine.placement.device_book import ALL_NODES, Constraints, DeviceBook, FilterKey
from apportion.engine.placement.host_fit import binds
from apportion.engine.placement.scope_index import FULL
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
        "_fitting",
        "_fkey",
        "_full",
        "_gain",
        "_host",
        "_host_out",
        "_member",
        "_node_pods",
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
        self._full: dict[int, int] = {}  # node rank -> fully available devices (touched)
        self._gain = 0  # pods gained over ``fitting`` by the changes so far
        self._member: dict[int, bool] = {}
        #: With host resources binding, pods are counted per node instead:
        #: node rank -> pods it holds with the changes so far (touched nodes).
        self._host = binds(book, req)
        self._node_pods: dict[int, int] = {}
        self._host_out: dict[int, list[int]] = {}  # rank -> [cpu, mem] taken out

    def take_out(self, owner: Owner) -> None:
        """Count ``owner``'s pods (or claim) as gone."""
        self._shift(owner, 1)

    def put_back(self, owner: Owner) -> None:
        """Undo :meth:`take_out` for ``owner``."""
        self._shift(owner, -1)

    def fits(self) -> bool:
        """Do at least ``min_pods`` pods fit now, with every owner taken out gone?"""
        return self._fitting + self._gain >= self._req.min_pods

    def _shift(self, owner: Owner, sign: int) -> None:
        if self._host:
            self._shift_nodes(owner, sign)
            return
        book = self._book
        for g, milli, is_exiting in book.occupancy.get(owner, ()):
            if not is_exiting:  # exiting use is ignored already: searches treat it as gone
                self._change(g, self._stay, sign * milli)
        claim = book.claims.get(owner)
        if claim is not None:
            for g, milli in claim[1]:
                self._change(g, self._claimed, sign * milli)

    def _shift_nodes(self, owner: Owner, sign: int) -> None:
        """:meth:`_shift` when CPU or memory can bind: recount each node the
        owner touches, ``min(GPU pods, CPU pods, memory pods)`` before and after."""
        book = self._book
        touched: dict[int, None] = {}
        devs: list[tuple[int, dict[int, int], int]] = []
        for g, milli, is_exiting in book.occupancy.get(owner, ()):
            if not is_exiting:
                devs.append((g, self._stay, sign * milli))
                touched[book.dev_node[g]] = None
        claim = book.claims.get(owner)
        if claim is not None:
            for g, milli in claim[1]:
                devs.append((g, self._claimed, sign * milli))
                touched[book.dev_node[g]] = None
        hosts: list[tuple[int, int, int]] = []
        for r, cpu, mem, is_exiting in book.host.occupancy.get(owner, ()):
            if not is_exiting:
                hosts.append((r, sign * cpu, sign * mem))
        for r, cpu, mem in book.host.claims.get(owner, ()):
            hosts.append((r, sign * cpu, sign * mem))
        for r, _, _ in hosts:
            touched[r] = None
        members = [r for r in touched if self._is_member(r)]
        before = {r: self._pods_on(r) for r in members}
        for g, out, delta in devs:
            out[g] = out.get(g, 0) + delta
        for r, cpu, mem in hosts:
            taken = self._host_out.setdefault(r, [0, 0])
            taken[0] += cpu
            taken[1] += mem
        for r in members:
            after = self._count_node(r)
            self._node_pods[r] = after
            self._gain += after - before[r]

    def _pods_on(self, r: int) -> int:
        found = self._node_pods.get(r)
        if found is None:
            found = self._node_pods[r] = self._count_node(r)
        return found

    def _count_node(self, r: int) -> int:
        """Pods node ``r`` holds with the changes so far (exiting use ignored)."""
        book, req = self._book, self._req
        first = book.first_dev[r]
        avails = [self._avail(g) for g in range(first, first + book.nodes[r].gpus)]
        if req.whole_devices:
            pods = sum(1 for a in avails if a >= FULL) // req.whole_devices
        else:
            pods = sum(max(0, a) // req.charge for a in avails)
        hb = book.host
        u = hb.use[r]
        taken = self._host_out.get(r, (0, 0))
        if req.cpu_milli:
            pods = min(pods, max(0, hb.cpu_cap[r] - (u[0] - taken[0]) - u[2]) // req.cpu_milli)
        if req.memory_mib:
            pods = min(pods, max(0, hb.mem_cap[r] - (u[3] - taken[1]) - u[5]) // req.memory_mib)
        return pods

    def _avail(self, g: int) -> int:
        book = self._book
        return (FULL - (book.stay[g] - self._stay.get(g, 0))
                - (book.claimed[g] - self._claimed.get(g, 0)))

    def _change(self, g: int, out: dict[int, int], delta: int) -> None:
        """``delta`` more milli of device ``g`` taken out (of its use or claims):
        its availability rises by ``delta``; count the pods that changes."""
        rank = self._book.dev_node[g]
        if not self._is_member(rank):
            out[g] = out.get(g, 0) + delta
            return
        whole = self._req.whole_devices
        if whole and rank not in self._full:
            self._full[rank] = self._node_full(rank)
        before = self._avail(g)
        out[g] = out.get(g, 0) + delta
        after = before + delta
        if whole:
            flip = (after >= FULL) - (before >= FULL)
            if flip:
                full = self._full[rank]
                self._gain += (full + flip) // whole - full // whole
                self._full[rank] = full + flip
        else:
            charge = self._req.charge
            self._gain += max(0, after) // charge - max(0, before) // charge

    def _node_full(self, rank: int) -> int:
        """Fully available devices of node ``rank`` with the changes so far.

        Called before the first change on the node, so without exiting use
        in the pool it is the book's own list of fully available devices."""
        book = self._book
        if not book.exiting_devs:
            return len(book.full_devs[rank])
        first = self._book.first_dev[rank]
        return sum(
            1 for g in range(first, first + self._book.nodes[rank].gpus)
            if self._avail(g) >= FULL
        )

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
