"""Events the mlte controller apps broadcast to each other (os-ken ``event.py`` idiom).

Each event carries value objects from :mod:`app.controller.model`, never a live Datapath.
"""
from __future__ import annotations

from os_ken.controller import event

from app.controller.model import HostInfo, PacketLink, PortInfo, SwitchInfo


class EventSwitchEnter(event.EventBase):
    """A datapath connected and was classified (packet switch or OTS); ports are known."""

    def __init__(self, switch: SwitchInfo) -> None:
        super().__init__()
        self.switch = switch


class EventSwitchLeave(event.EventBase):
    """A datapath disconnected."""

    def __init__(self, switch: SwitchInfo) -> None:
        super().__init__()
        self.switch = switch


class EventPortChange(event.EventBase):
    """A port was added, deleted, or went up/down (``old`` is None for a new port)."""

    def __init__(self, switch: SwitchInfo, old: PortInfo | None, new: PortInfo | None, at: float) -> None:
        super().__init__()
        self.switch = switch
        self.old = old
        self.new = new
        self.at = at


class EventLinkAdd(event.EventBase):
    """LLDP found a new directed packet link."""

    def __init__(self, link: PacketLink) -> None:
        super().__init__()
        self.link = link


class EventLinkDelete(event.EventBase):
    """A directed packet link expired or one of its ports went down."""

    def __init__(self, link: PacketLink) -> None:
        super().__init__()
        self.link = link


class EventHostAdd(event.EventBase):
    """Forwarding learned a host at an edge port."""

    def __init__(self, host: HostInfo) -> None:
        super().__init__()
        self.host = host


class EventReservedPorts(event.EventBase):
    """The packet ports kept for plans and reservations changed: default forwarding re-plans around them."""


class EventDecision(event.EventBase):
    """A TE decision, taken or skipped, with its reason (``data``: decision, reason, flows, plan, ...)."""

    def __init__(self, data: dict) -> None:
        super().__init__()
        self.data = data


class EventReservation(event.EventBase):
    """A reservation was lit, failed, or released (``kind``: reservation_active, reservation_failed,
    reservation_released, reservation_release_failed); ``data`` is a small JSON-able dict."""

    def __init__(self, kind: str, data: dict) -> None:
        super().__init__()
        self.kind = kind
        self.data = data


class EventPlan(event.EventBase):
    """An update plan moved on (``data["event"]``: plan_started, step_done, step_failed,
    plan_rolled_back, plan_done), with the plan id and step."""

    def __init__(self, data: dict) -> None:
        super().__init__()
        self.data = data
