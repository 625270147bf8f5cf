"""Circuits shared by several reservations (grooming): what a new one still has to light, what a
leaving one may take down.

Plain code (no os-ken). Admission lets a reservation ride a circuit other reservations booked
(pce/grooming.py); its stored path is then the very path of that circuit, so its
:class:`ReservationCircuit` has the same XCONs. Here a segment (one circuit of a path) counts as lit
when another lit reservation has a segment with exactly the same XCONs (either direction): a new
reservation then installs only its packet rules (and meter) on it, and a leaving reservation removes
its XCONs only when no other installation still uses them — the in-memory lit set and the database's
installed circuits both count, so a restarted controller, which re-adopts every installation first,
never takes a circuit down under a live reservation.

:class:`SegmentLocks` serialises the decide-then-run of reservations that share a circuit: two
sharers starting together must not both light it, and a release must not race a new sharer.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from app.controller.reservation_circuits import ReservationCircuit, XconId, xcon_id
from app.update.model import Port, XconSpec

__all__ = ["XconId", "xcon_id"]  # kept here for the modules that name them through grooming


def segment_ids(c: ReservationCircuit) -> tuple[frozenset[XconId], ...]:
    """Each segment of ``c`` as the set of its XCONs (the identity of a circuit in the network)."""
    return c.segment_keys


def lit_segments(c: ReservationCircuit, others: Iterable[ReservationCircuit]) -> set[int]:
    """Indices of ``c``'s segments some other lit reservation already has (the same XCONs)."""
    lit = {s for o in others for s in segment_ids(o)}
    return {i for i, s in enumerate(segment_ids(c)) if s and s in lit}


def to_light(c: ReservationCircuit, others: Iterable[ReservationCircuit]
             ) -> tuple[tuple[XconSpec, ...], tuple[tuple[Port, Port], ...]]:
    """The XCONs and segments (packet-port pairs) of ``c`` that nobody has lit: what its plan lights."""
    shared = lit_segments(c, others)
    keep = [i for i in range(len(c.segments)) if i not in shared]
    return (tuple(x for i in keep for x in c.segment_xcons[i]), tuple(c.segments[i] for i in keep))


def shared_ports(c: ReservationCircuit, others: Iterable[ReservationCircuit]) -> dict[str, set[int]]:
    """The optical ports (per OTS) of ``c``'s segments another lit reservation holds: busy, but for ``c``
    too (they are its own circuit's), so they do not make its stored path 'taken'."""
    out: dict[str, set[int]] = {}
    for i in lit_segments(c, others):
        for x in c.segment_xcons[i]:
            out.setdefault(x.ots, set()).update(x.ports)
    return out


def to_release(c: ReservationCircuit, others: Iterable[ReservationCircuit],
               installed_elsewhere: Iterable[XconId] = ()) -> tuple[XconSpec, ...]:
    """The XCONs of ``c`` that may go: those no other lit reservation and no other installation recorded
    in the database (``installed_elsewhere``) uses."""
    used = {xcon_id(x) for o in others for x in o.xcons} | set(installed_elsewhere)
    return tuple(x for x in c.xcons if xcon_id(x) not in used)


def xcon_tuples(c: ReservationCircuit) -> list[tuple[str, int, int]]:
    """The XCONs of ``c`` as (ots, in_port, out_port): what a release asks the store about."""
    return [(x.ots, x.in_port, x.out_port) for x in c.xcons]


def others_of(active: Mapping[int, ReservationCircuit], res_id: int) -> list[ReservationCircuit]:
    return [c for k, c in active.items() if k != res_id]


class SegmentLocks:
    """One lock per circuit (its XCON set); :meth:`holding` takes those of a reservation's segments in a
    fixed order (no deadlock between two reservations sharing two circuits)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[frozenset[XconId], threading.Lock] = {}

    @contextmanager
    def holding(self, c: ReservationCircuit) -> Iterator[None]:
        keys = sorted({s for s in segment_ids(c) if s}, key=lambda s: sorted((o, sorted(p)) for o, p in s))
        with self._guard:
            locks = [self._locks.setdefault(k, threading.Lock()) for k in keys]
        taken: list[threading.Lock] = []
        try:
            for lock in locks:
                lock.acquire()
                taken.append(lock)
            yield
        finally:
            for lock in reversed(taken):
                lock.release()
