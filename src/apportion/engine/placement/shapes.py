"""The pod shapes a pool typically runs: what fragmentation is measured against.

A :class:`PodShape` is one pod's request (GPU share or whole devices, CPU,
memory, acceptable GPU types); a :class:`ShapeMix` counts how often each shape
occurs (running and waiting pods of the snapshot, plus a configured prior).
Counts are integers, so fragmentation stays exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

FULL = 1000


@dataclass(frozen=True, slots=True, order=True)
class PodShape:
    """One pod's request. ``charge``: milli-GPU of one device for a share (for
    whole-device pods 1000); ``whole_devices``: N whole devices on one node, 0
    for a share. ``gpu_types``: acceptable types, () = any."""

    charge: int
    whole_devices: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_types: tuple[str, ...] = ()

    @property
    def uses_gpus(self) -> bool:
        return self.whole_devices > 0 or 0 < self.charge <= FULL


def shape_order(item: tuple[PodShape, int]) -> tuple[int, int, int, int, tuple[str, ...]]:
    """Sort key of a (shape, count) pair whose shapes are distinct: the
    shape's fields in order, as PodShape's own ordering compares them (built
    once per item instead of twice per comparison)."""
    s = item[0]
    return (s.charge, s.whole_devices, s.cpu_milli, s.memory_mib, s.gpu_types)


@dataclass(frozen=True, slots=True)
class ShapeMix:
    """Shapes with their counts (> 0), sorted by shape."""

    shapes: tuple[tuple[PodShape, int], ...] = ()

    @classmethod
    def of(cls, items: Iterable[PodShape | tuple[PodShape, int]]) -> ShapeMix:
        """Count shapes (a bare shape counts 1; a pair adds its count)."""
        counts: dict[PodShape, int] = {}
        for item in items:
            shape, count = (item, 1) if isinstance(item, PodShape) else item
            if count > 0:
                counts[shape] = counts.get(shape, 0) + count
        return cls(tuple(sorted(counts.items(), key=shape_order)))

    def plus(self, other: ShapeMix) -> ShapeMix:
        return ShapeMix.of([*self.shapes, *other.shapes])

    @property
    def gpu_shapes(self) -> tuple[tuple[PodShape, int], ...]:
        """The shapes that use GPUs (the others cannot be stranded by GPUs)."""
        return tuple((s, c) for s, c in self.shapes if s.uses_gpus)

    def __bool__(self) -> bool:
        return bool(self.gpu_shapes)
