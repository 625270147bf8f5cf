"""What the network view announces: one small value type per kind of change (plain code, no os-ken).

:class:`app.controller.network_view.NetworkView` hands one of these to its listeners for every change
it makes, so nobody has to poll the journal or diff the view to learn what changed. The inventory app
bridges them onto the os-ken events of :mod:`app.controller.events` (each a subclass of its change
here), so apps subscribe with ``@set_ev_cls``. They carry value objects, never a live Datapath.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from app.controller.model import HostInfo, PacketLink, PortInfo, PortRef, SwitchInfo


@dataclass(frozen=True)
class ViewChange:
    """Base of every change; ``graph``: an input of the merged graph changed (the view's version moved)."""

    graph: ClassVar[bool] = True


@dataclass(frozen=True)
class _SwitchChange(ViewChange):
    switch: SwitchInfo


class SwitchEntered(_SwitchChange):
    """A datapath connected and was classified (packet switch or OTS); ports are known."""


class SwitchLeft(_SwitchChange):
    """A datapath disconnected."""


class CapabilitiesChanged(_SwitchChange):
    """An OTS reported its VENDOR capabilities (port granularities; its own name when the lab gave none)."""


@dataclass(frozen=True)
class PortChanged(_SwitchChange):
    """A port was added, deleted, or went up/down (``old`` is None for a new port, ``new`` for a gone one)."""

    old: PortInfo | None
    new: PortInfo | None
    at: float

    @property
    def port_no(self) -> int:
        """The port's number, from ``new`` or else ``old`` (a change has at least one of them)."""
        port = self.new or self.old
        if port is None:
            raise ValueError("a port change without the port")
        return port.port_no


@dataclass(frozen=True)
class NamesChanged(ViewChange):
    """Switches or hosts were given names (the lab's names file)."""

    names: Mapping[int, str]
    host_names: Mapping[str, str]


@dataclass(frozen=True)
class _LinkChange(ViewChange):
    link: PacketLink


class LinkAdded(_LinkChange):
    """LLDP found a new directed packet link."""


class LinkDeleted(_LinkChange):
    """A directed packet link expired, was replaced, or one of its ports or switches went away."""


@dataclass(frozen=True)
class _HostChange(ViewChange):
    host: HostInfo


class HostAdded(_HostChange):
    """A host was learned at an edge port, moved, or its IP became known."""


class HostRemoved(_HostChange):
    """A host is no longer believed to be where it was (its port went down or turned out to be a link)."""


@dataclass(frozen=True)
class XconsChanged(ViewChange):
    """The applied XCONs of the OTS ``dpid`` changed (set, adopted, removed, or forgotten on (re)connect)."""

    dpid: int


@dataclass(frozen=True)
class AdaptationsChanged(ViewChange):
    """The scan found (or the state file restored) packet ports cabled to OTS ports."""

    attached: Mapping[tuple[int, int], PortRef | None]


@dataclass(frozen=True)
class StaticLoaded(ViewChange):
    """The static vendor file was loaded (``path`` "": dropped)."""

    path: str


@dataclass(frozen=True)
class ReservedPortsChanged(ViewChange):
    """The packet ports kept for plans and reservations changed: default forwarding re-plans around them."""

    graph: ClassVar[bool] = False
