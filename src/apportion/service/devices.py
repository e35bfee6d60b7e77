"""Devices used by pods the agent does not manage ("unavailable" in a
heartbeat) are hidden from the engine: a node with device 3 of 8 busy is shown
to the engine as a node of 7 devices, numbered 0..6, and placements are
translated between the engine's numbering and the physical one at the edges.

A device with any foreign use is hidden whole (a fraction of it is not offered
to fractional pods). A device that one of our own placements already uses stays
visible, so a late report never invalidates a running workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from apportion.domain.cluster import Node
from apportion.domain.lifecycle import Exiting, WorkloadState
from apportion.domain.workload import DeviceShare, Placement, PodPlacement


@dataclass(frozen=True, slots=True)
class DeviceMap:
    """Per node with hidden devices: physical index <-> engine index."""

    to_engine: Mapping[str, Mapping[int, int]]
    to_physical: Mapping[str, Mapping[int, int]]

    @property
    def is_identity(self) -> bool:
        return not self.to_engine

    def placement(self, placement: Placement, *, physical: bool) -> Placement:
        table = self.to_physical if physical else self.to_engine
        if not placement or not table:
            return placement
        return tuple(
            PodPlacement(p.node, tuple(DeviceShare(table[p.node][d.index], d.milli)
                                       for d in p.devices)) if p.node in table else p
            for p in placement
        )

    def state(self, s: WorkloadState, *, physical: bool, known_attempts: int = 0
              ) -> WorkloadState:
        """``s`` renumbered. Finished attempts are not the engine's business: they
        stay physical, except those the engine added (after ``known_attempts``)."""
        if self.is_identity:
            return s
        attempts = s.attempts
        if physical and len(attempts) > known_attempts:
            attempts = (*attempts[:known_attempts],
                        *(replace(a, placement=self.placement(a.placement, physical=True))
                          for a in attempts[known_attempts:]))
        return replace(
            s,
            placement=self.placement(s.placement, physical=physical),
            nomination=self.placement(s.nomination, physical=physical),
            attempts=attempts,
        )

    def exiting(self, e: Exiting, *, physical: bool) -> Exiting:
        if self.is_identity:
            return e
        return replace(e, placement=self.placement(e.placement, physical=physical))


IDENTITY = DeviceMap({}, {})


class NodeDevices(Protocol):
    """What :func:`build` reads of a node (the store's node rows have it)."""

    @property
    def name(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def unavailable(self) -> list[list[int]]: ...


def build(
    rows: Iterable[NodeDevices], states: Iterable[WorkloadState], exiting: Iterable[Exiting]
) -> DeviceMap:
    used: set[tuple[str, int]] = set()
    for s in states:
        for p in (*s.placement, *s.nomination):
            used.update((p.node, d.index) for d in p.devices)
    for e in exiting:
        for p in e.placement:
            used.update((p.node, d.index) for d in p.devices)
    to_engine: dict[str, dict[int, int]] = {}
    to_physical: dict[str, dict[int, int]] = {}
    for row in rows:
        hidden = {int(i) for i, milli in (row.unavailable or []) if int(milli) > 0}
        hidden -= {i for (node, i) in used if node == row.name}
        if not hidden:
            continue
        visible = [i for i in range(row.gpus) if i not in hidden]
        to_engine[row.name] = {phys: virt for virt, phys in enumerate(visible)}
        to_physical[row.name] = dict(enumerate(visible))
    return DeviceMap(to_engine, to_physical) if to_engine else IDENTITY


def engine_node(node: Node, devmap: DeviceMap) -> Node:
    """The node as the engine sees it: only its visible devices."""
    table = devmap.to_engine.get(node.name)
    return node if table is None else replace(node, gpus=len(table))
