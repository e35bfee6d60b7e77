"""Free-capacity index over the devices of one scope (a pool or a topology domain).

A scope is a set of ready nodes (optionally filtered by gpu type, node selector
and topology labels). Its index answers, without scanning nodes:

* the best-fit partial device for a shared pod (least free milli that still fits,
  ties by device id, i.e. node name then device index);
* the node with the fewest fully available devices that still holds N of them
  (ties by node name);
* how many identical pods fit now (exactly what greedy packing achieves), and
  the free totals used for quick rejection and failure messages.

Device and node ids are ranks: nodes are numbered in name order and devices
in (node name, device index) order, so comparing ids compares those keys.
The index only stores what :class:`~apportion.engine.placement.device_book.DeviceBook`
tells it; the book calls :meth:`ScopeIndex.device_changed` on every change.
"""

from __future__ import annotations

from bisect import bisect_left, insort

FULL = 1000


def _bucket_add(buckets: dict[int, list[int]], levels: list[int], level: int, item: int) -> None:
    bucket = buckets.get(level)
    if bucket is None:
        buckets[level] = [item]
        insort(levels, level)
    else:
        insort(bucket, item)


def _bucket_remove(
    buckets: dict[int, list[int]], levels: list[int], level: int, item: int
) -> None:
    bucket = buckets[level]
    pos = bisect_left(bucket, item)
    if pos == len(bucket) or bucket[pos] != item:
        raise AssertionError(f"index out of sync: {item} not at level {level}")
    del bucket[pos]
    if not bucket:
        del buckets[level]
        del levels[bisect_left(levels, level)]


class ScopeIndex:
    """Incremental free-capacity index of one scope.

    ``partial`` maps a free milli value (1..999) to the sorted ids of devices
    with exactly that much available; ``by_full`` maps a count of fully
    available devices (>= 1) to the sorted ids of nodes with that count.
    ``free_total`` and ``full_total`` are the scope's available milli and fully
    available devices. ``static_hist`` (gpus per node -> node count, over nodes
    that are not down) answers "could it ever fit" without looking at usage.
    """

    __slots__ = (
        "by_full",
        "free_total",
        "full_levels",
        "full_total",
        "key",
        "node_count",
        "partial",
        "partial_levels",
    )

    def __init__(self, key: object) -> None:
        self.key = key
        self.partial: dict[int, list[int]] = {}
        self.partial_levels: list[int] = []
        self.by_full: dict[int, list[int]] = {}
        self.full_levels: list[int] = []
        self.free_total = 0
        self.full_total = 0
        self.node_count = 0

    # -- maintenance -------------------------------------------------------
    def add_node(self, node: int, avails: list[tuple[int, int]], full: int) -> None:
        """Register a ready node: ``avails`` lists (device id, available milli)."""
        self.node_count += 1
        for dev, avail in avails:
            self.free_total += avail
            if 0 < avail < FULL:
                _bucket_add(self.partial, self.partial_levels, avail, dev)
        if full:
            self.full_total += full
            _bucket_add(self.by_full, self.full_levels, full, node)

    def device_changed(self, dev: int, old: int, new: int) -> None:
        """A device's availability went from ``old`` to ``new`` milli (partial part)."""
        self.free_total += new - old
        if 0 < old < FULL:
            _bucket_remove(self.partial, self.partial_levels, old, dev)
        if 0 < new < FULL:
            _bucket_add(self.partial, self.partial_levels, new, dev)

    def node_full_changed(self, node: int, old: int, new: int) -> None:
        """A node's count of fully available devices went from ``old`` to ``new``."""
        self.full_total += new - old
        if old:
            _bucket_remove(self.by_full, self.full_levels, old, node)
        if new:
            _bucket_add(self.by_full, self.full_levels, new, node)

    # -- queries -----------------------------------------------------------
    def best_partial(self, charge: int) -> int | None:
        """Id of the partial device with the least available milli >= ``charge``."""
        levels = self.partial_levels
        pos = bisect_left(levels, charge)
        if pos == len(levels):
            return None
        return self.partial[levels[pos]][0]

    def tightest_node(self, devices: int) -> int | None:
        """Id of the node with the fewest fully available devices >= ``devices``."""
        levels = self.full_levels
        pos = bisect_left(levels, devices)
        if pos == len(levels):
            return None
        return self.by_full[levels[pos]][0]

    def max_full(self) -> int:
        """Most fully available devices on any one node of the scope."""
        return self.full_levels[-1] if self.full_levels else 0

    def max_device_free(self) -> int:
        """Most available milli on any one device of the scope."""
        if self.full_levels:
            return FULL
        return self.partial_levels[-1] if self.partial_levels else 0

    def fit_count(self, charge: int, whole_devices: int, limit: int) -> int:
        """How many identical pods fit now, counted up to ``limit``.

        Exact for greedy packing: a whole-device pod of N uses N full devices of
        one node, so a node with f of them holds f // N pods; a shared pod of c
        milli never spans devices, so a device with a free holds a // c pods.
        """
        count = 0
        if whole_devices:
            for level in reversed(self.full_levels):
                if level < whole_devices or count >= limit:
                    break
                count += len(self.by_full[level]) * (level // whole_devices)
            return min(count, limit)
        if charge > FULL or charge <= 0:
            return 0
        count = self.full_total * (FULL // charge)
        for level in reversed(self.partial_levels):
            if level < charge or count >= limit:
                break
            count += len(self.partial[level]) * (level // charge)
        return min(count, limit)
