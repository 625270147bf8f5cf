"""Events the mlte controller apps broadcast to each other (os-ken ``event.py`` idiom).

Each event carries value objects from :mod:`app.controller.model`, never a live Datapath. The
network view's changes (:mod:`app.controller.view_changes`) come as one event class each, a subclass
of the change with the same fields; the inventory app broadcasts them (:data:`VIEW_EVENTS`).
"""
from __future__ import annotations

from dataclasses import fields

from os_ken.controller import event

from app.controller import view_changes


class EventSwitchEnter(view_changes.SwitchEntered, event.EventBase):
    """A datapath connected and was classified (packet switch or OTS); ports are known."""


class EventSwitchLeave(view_changes.SwitchLeft, event.EventBase):
    """A datapath disconnected."""


class EventPortChange(view_changes.PortChanged, event.EventBase):
    """A port was added, deleted, or went up/down (``old`` is None for a new port)."""


class EventCapabilities(view_changes.CapabilitiesChanged, event.EventBase):
    """An OTS reported its VENDOR capabilities."""


class EventNames(view_changes.NamesChanged, event.EventBase):
    """Switches or hosts were given names."""


class EventLinkAdd(view_changes.LinkAdded, event.EventBase):
    """LLDP found a new directed packet link."""


class EventLinkDelete(view_changes.LinkDeleted, event.EventBase):
    """A directed packet link expired or one of its ports went down."""


class EventHostAdd(view_changes.HostAdded, event.EventBase):
    """Forwarding learned a host at an edge port (or it moved, or its IP became known)."""


class EventHostDelete(view_changes.HostRemoved, event.EventBase):
    """Forwarding no longer believes a host is where it was."""


class EventXconChange(view_changes.XconsChanged, event.EventBase):
    """The applied XCONs of one OTS changed."""


class EventAdaptations(view_changes.AdaptationsChanged, event.EventBase):
    """The scan (or the state file) found packet ports cabled to OTS ports."""


class EventStaticLoaded(view_changes.StaticLoaded, event.EventBase):
    """The static vendor file was loaded or dropped."""


class EventReservedPorts(view_changes.ReservedPortsChanged, event.EventBase):
    """The packet ports kept for plans and reservations changed: default forwarding re-plans around them."""


#: every change of the network view, as the os-ken event the inventory app broadcasts for it
VIEW_EVENTS: list[type[view_changes.ViewChange]] = [
    EventSwitchEnter, EventSwitchLeave, EventPortChange, EventCapabilities, EventNames, EventLinkAdd,
    EventLinkDelete, EventHostAdd, EventHostDelete, EventXconChange, EventAdaptations, EventStaticLoaded,
    EventReservedPorts]
#: the events whose change moved the merged graph (subscribe to these to follow the graph)
GRAPH_EVENTS = [cls for cls in VIEW_EVENTS if cls.graph]
_EVENT_OF = {cls.__mro__[1]: cls for cls in VIEW_EVENTS}


def event_of(change: view_changes.ViewChange) -> view_changes.ViewChange:
    """The os-ken event that announces ``change`` (same fields, the event class of its type)."""
    cls = _EVENT_OF[type(change)]
    return cls(**{f.name: getattr(change, f.name) for f in fields(change)})


class EventDecision(event.EventBase):
    """A TE decision, taken or skipped, with its reason (``data``: decision, reason, flows, plan, ...)."""

    def __init__(self, data: dict) -> None:
        super().__init__()
        self.data = data


class EventMastership(event.EventBase):
    """This controller became master (``master``, under ``epoch``) or stopped being it (several
    controllers, app/controller/mastership_app.py): apps take over or fall quiet."""

    def __init__(self, master: bool, epoch: int | None, reason: str) -> None:
        super().__init__()
        self.master, self.epoch, self.reason = master, epoch, reason


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
