"""Bandwidth already booked on the graph, per time window.

Reservations overlap in time, so the load on a link is a function of time: what a new request
must respect is the *peak* of the summed bookings over its window, not the sum of every booking
that touches it (two bookings that do not overlap each other never load the link together).
Optical ports are different: one flow rule per port, so a port booked by anybody in an
overlapping window is taken whole.

``BookingCalendar`` indexes bookings by edge and port once and caches the usage of each window,
because one path computation (Yen, widest binary search, diagnosis) asks for it many times.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from pce.errors import InvalidInputError


@dataclass(frozen=True)
class Booking:
    """Capacity held by one reservation: ``bandwidth`` Mbit/s on ``edges`` and the whole of ``oports``
    during ``[start, end)`` (epoch seconds)."""

    id: str
    start: float
    end: float
    bandwidth: float
    edges: tuple[str, ...] = ()
    oports: tuple[str, ...] = ()
    #: the VLAN that tells its traffic apart from other reservations' on a shared circuit (grooming;
    #: None: untagged, it cannot share one)
    tag: int | None = None


@dataclass(frozen=True)
class WindowUsage:
    """Usage of one window: peak booked Mbit/s per edge key, and the booked oports (-> booking ids)."""

    start: float
    end: float
    edge_peak: dict[str, float] = field(default_factory=dict)
    busy_oports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    peak_holders: dict[str, tuple[str, ...]] = field(default_factory=dict)


def overlaps(start: float, end: float, w_start: float, w_end: float) -> bool:
    """Half-open intervals: a booking ending exactly when the window starts does not overlap."""
    return start < w_end and end > w_start


def peak_load(intervals: Iterable[tuple[float, float, float]], start: float, end: float) -> float:
    """Largest total bandwidth of ``(start, end, bandwidth)`` intervals active at one instant in the window.

    Sweep over the clipped interval ends; at equal times ends are processed before starts
    (half-open intervals), so back-to-back bookings do not add up.
    """
    events: list[tuple[float, int, float]] = []
    for s, e, bw in intervals:
        if not overlaps(s, e, start, end):
            continue
        events.append((max(s, start), 1, bw))
        events.append((min(e, end), 0, -bw))
    events.sort(key=lambda ev: (ev[0], ev[1]))
    level = peak = 0.0
    for _, _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak


class BookingCalendar:
    """Bookings indexed by edge and oport, with the usage of each asked window cached."""

    def __init__(self, bookings: Iterable[Booking] = ()):
        self.bookings: tuple[Booking, ...] = tuple(bookings)
        self._by_edge: dict[str, list[Booking]] = defaultdict(list)
        self._by_oport: dict[str, list[Booking]] = defaultdict(list)
        for b in self.bookings:
            _check_booking(b)
            for key in dict.fromkeys(b.edges):
                self._by_edge[key].append(b)
            for port in dict.fromkeys(b.oports):
                self._by_oport[port].append(b)
        self._cache: dict[tuple[float, float], WindowUsage] = {}

    def usage(self, start: float, end: float) -> WindowUsage:
        """Peak usage per edge and booked oports over ``[start, end)`` (cached per window)."""
        hit = self._cache.get((start, end))
        if hit is not None:
            return hit
        peaks: dict[str, float] = {}
        holders: dict[str, tuple[str, ...]] = {}
        for key, books in self._by_edge.items():
            live = [b for b in books if overlaps(b.start, b.end, start, end)]
            if live:
                peaks[key] = peak_load(((b.start, b.end, b.bandwidth) for b in live), start, end)
                holders[key] = tuple(sorted(b.id for b in live))
        busy = {}
        for port, books in self._by_oport.items():
            ids = tuple(sorted(b.id for b in books if overlaps(b.start, b.end, start, end)))
            if ids:
                busy[port] = ids
        out = WindowUsage(start, end, peaks, busy, holders)
        self._cache[(start, end)] = out
        return out


def as_calendar(bookings: Iterable[Booking] | BookingCalendar | None) -> BookingCalendar:
    """Accept a calendar (reused, keeps its cache) or any iterable of bookings."""
    if isinstance(bookings, BookingCalendar):
        return bookings
    return BookingCalendar(bookings or ())


def _check_booking(b: Booking) -> None:
    for name in ("start", "end", "bandwidth"):
        v = getattr(b, name)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise InvalidInputError(f"booking {b.id}: {name} must be a finite number, got {v!r}")
    if b.end <= b.start:
        raise InvalidInputError(f"booking {b.id}: end must be after start")
    if b.bandwidth < 0:
        raise InvalidInputError(f"booking {b.id}: bandwidth must be >= 0")
    if b.tag is not None and (isinstance(b.tag, bool) or not isinstance(b.tag, int)):
        raise InvalidInputError(f"booking {b.id}: tag must be an integer VLAN or None, got {b.tag!r}")
    if isinstance(b.edges, str) or isinstance(b.oports, str):
        raise InvalidInputError(f"booking {b.id}: edges and oports must be sequences of ids, not a string")
