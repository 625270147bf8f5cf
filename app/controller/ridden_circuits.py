"""What the TE loop must leave alone: the circuits live reservations ride (grooming, issue 28).

Plain code (no os-ken). A circuit several reservations share is one unit that restoration repairs
(:mod:`app.controller.shared_restoration`); the TE loop may neither release nor re-program it, nor
pull the traffic of the reservations riding it onto a circuit of its own — that traffic was admitted
and metered on the circuit, and the loop's elephants are default-forwarded traffic, which keeps off a
reservation's ports anyway. So:

- :func:`plan_refusal` says why a TE plan (an offload's or a growth's release, a takeover's release
  of what no record owns) must not run: it removes, or adds, an XCON a live reservation rides;
- :func:`link_riders` names the live reservations riding a packet link (the monitor's circuit key,
  ``packet:A:3-C:1``): an imbalance or growth named on it is skipped with that reason;
- :func:`held_share` is what the placement holds for each lit reservation: its circuit's capacity split
  among the reservations riding the very same circuits (not the whole capacity once per sharer, which
  made a circuit three riders share look three times over-full).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.controller.groomed_circuits import XconId, segment_ids, xcon_id
from app.controller.reservation_circuits import ReservationCircuit
from app.update.model import Port, XconSpec
from app.update.plan import Plan, XconStep
from topology.graph import edge_key


def ridden_xcons(lit: Mapping[int, ReservationCircuit]) -> dict[XconId, list[int]]:
    """Every XCON a live reservation rides -> the reservations riding it (ascending)."""
    out: dict[XconId, list[int]] = {}
    for rid, c in sorted(lit.items()):
        for x in c.xcons:
            riders = out.setdefault(xcon_id(x), [])
            if rid not in riders:
                riders.append(rid)
    return out


def plan_refusal(plan: Plan, lit: Mapping[int, ReservationCircuit]) -> str | None:
    """Why ``plan`` must not run (None: it may): one of its XCON steps touches a circuit live
    reservations ride."""
    ridden = ridden_xcons(lit)
    for s in plan.steps:
        if isinstance(s, XconStep) and (riders := ridden.get(xcon_id(s.xcon))):
            x = s.xcon
            return (f"XCON {x.ots} {x.in_port}<->{x.out_port} is on a circuit reservation(s) "
                    f"{', '.join(map(str, riders))} ride: the TE loop leaves it alone")
    return None


def link_riders(link: str, lit: Mapping[int, ReservationCircuit]) -> list[int]:
    """The live reservations with a circuit whose packet link is ``link`` (either direction)."""
    return sorted(rid for rid, c in lit.items()
                  if any(edge_key("packet", f"{a[0]}:{a[1]}", f"{z[0]}:{z[1]}") == link for a, z in c.segments))


def held_share(lit: Mapping[int, ReservationCircuit]) -> dict[int, float]:
    """Mbit/s the placement holds for each lit reservation on its circuits: the capacity, split evenly
    among the reservations whose circuits are the same (the sum on a shared circuit is its capacity)."""
    key = {rid: frozenset(s for s in segment_ids(c) if s) for rid, c in lit.items()}
    riders: dict[frozenset, int] = {}
    for k in key.values():
        riders[k] = riders.get(k, 0) + 1
    return {rid: c.capacity / (riders[key[rid]] if key[rid] else 1) for rid, c in lit.items()}



def shared_circuits(lit: Mapping[int, ReservationCircuit]) -> list[dict[str, Any]]:
    """The circuits (segments) several lit reservations ride, each with its ends, XCONs and riders:
    the failure units a cut would restore together (``GET /reservations`` on the control API)."""
    riders: dict[frozenset[XconId], list[int]] = {}
    first: dict[frozenset[XconId], tuple[tuple[Port, Port], tuple[XconSpec, ...]]] = {}
    for rid, c in sorted(lit.items()):
        for seg, ends, xs in zip(segment_ids(c), c.segments, c.segment_xcons, strict=True):
            if seg:
                riders.setdefault(seg, []).append(rid)
                first.setdefault(seg, (ends, xs))
    return [{"ends": [f"{sw}:{p}" for sw, p in first[k][0]], "xcons": [x.to_json() for x in first[k][1]],
             "reservations": ids} for k, ids in riders.items() if len(ids) > 1]
