"""Optical scan logic (plain): which probe XCONs to make, and what their PORT_STATUS means.

Light model (docs/contracts.md section 3): an OTS port is dark unless it is in an active XCON, and a
lit OTS port brings up the packet port cabled to it. A probe XCON ``p<->q`` lights both ``p`` and
``q``, so the packet ports that come up are the attachments of ``p`` *and* ``q`` together. To tell
them apart each port is paired with two different partners:

- with a partner whose attachment is already known: ``att(u) = lit - att(partner)``;
- otherwise one anchor ``u0`` is probed with every other unknown port ``uk``: ``att(u0)`` is what
  all those probes share, and ``att(uk) = lit_k - att(u0)`` (needs three unknown ports);
- two unknown ports and no known partner: one probe; if something lit, it is ambiguous.

An attachment of ``None`` means the far end is not a packet port (a fibre, or nothing).

A port that carries an XCON — applied, in an unknown state, or read back from the OTS after a
controller restart — is *busy*: it is never probed (a probe on it would change or, once removed,
delete a live circuit) and never used as a partner (:func:`plan_ots`, :func:`probe_allowed`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from app.controller.model import PortRef

Attachment = PortRef | None


@dataclass(frozen=True)
class Probe:
    """One tentative XCON ``a<->b`` on an OTS (port numbers)."""

    a: int
    b: int


@dataclass
class GroupPlan:
    """Probes for one granularity group of one OTS, and how to read them."""

    probes: list[Probe]
    known: dict[int, Attachment]  # partner ports whose attachment was known before the scan
    unknown: list[int]
    anchor: int | None = None  # set when the intersection method is used


@dataclass
class ScanOutcome:
    attached: dict[int, Attachment] = field(default_factory=dict)
    ambiguous: dict[int, list[PortRef]] = field(default_factory=dict)  # port -> candidates
    unscannable: list[int] = field(default_factory=list)  # alone in its group: nothing to pair with


def busy_ports(*tables: dict[int, int]) -> set[int]:
    """Every port that is an end of an XCON in any of ``tables`` (in_port -> out_port: the applied,
    unknown-state and read-back XCONs of one OTS)."""
    return {p for table in tables for pair in table.items() for p in pair}


def plan_ots(groups: dict[int, str], busy: set[int], known: dict[int, Attachment]) -> list[GroupPlan]:
    """The probes for one OTS: per granularity group (``groups``: port -> granularity), over the ports
    that carry no XCON; ``known``: ports whose far end is known (not probed, used as partners)."""
    by_gran: dict[str, list[int]] = {}
    for port_no, g in sorted(groups.items()):
        by_gran.setdefault(g, []).append(port_no)
    plans = []
    for _g, ports in sorted(by_gran.items()):
        free = [p for p in ports if p not in busy]
        unknown = [p for p in free if p not in known]
        partners = {p: known[p] for p in free if p in known}
        plans.append(plan_group(unknown, partners))
    return plans


def probe_allowed(probe: Probe, busy: set[int]) -> bool:
    """False when an XCON appeared on one of the probe's ports since the plan was made (e.g. a circuit
    set up during the scan): such a probe must not be sent, nor its port deleted afterwards."""
    return probe.a not in busy and probe.b not in busy


def plan_group(unknown: Iterable[int], known: dict[int, Attachment]) -> GroupPlan:
    """Plan the probes for one granularity group (only free ports: no active XCON on them)."""
    u = sorted(unknown)
    if not u:
        return GroupPlan([], known, u)
    if known:
        partner = min(known)
        return GroupPlan([Probe(x, partner) for x in u], {partner: known[partner]}, u)
    if len(u) == 1:
        return GroupPlan([], known, u)
    anchor = u[0]
    return GroupPlan([Probe(anchor, x) for x in u[1:]], {}, u, anchor=anchor)


def infer_group(plan: GroupPlan, lit: list[frozenset[PortRef]]) -> ScanOutcome:
    """Attachments of ``plan.unknown`` from the packet ports each probe lit (same order)."""
    out = ScanOutcome()
    if not plan.probes:
        out.unscannable.extend(plan.unknown)
        return out
    if plan.anchor is None:  # every probe pairs an unknown port with one known partner
        for probe, seen in zip(plan.probes, lit, strict=True):
            partner = plan.known[probe.b]
            rest = set(seen) - ({partner} if partner else set())
            _assign(out, probe.a, rest)
        return out
    common = set.intersection(*(set(s) for s in lit))
    if len(plan.probes) == 1:  # two unknown ports, one probe: only "nothing attached" is certain
        if not common:
            out.attached[plan.anchor] = None
            out.attached[plan.probes[0].b] = None
        else:
            for p in (plan.anchor, plan.probes[0].b):
                out.ambiguous[p] = sorted(common)
        return out
    _assign(out, plan.anchor, common)
    anchor_att = out.attached.get(plan.anchor)
    for probe, seen in zip(plan.probes, lit, strict=True):
        rest = set(seen) - ({anchor_att} if anchor_att else set())
        _assign(out, probe.b, rest)
    return out


def _assign(out: ScanOutcome, port: int, candidates: set[PortRef]) -> None:
    if len(candidates) <= 1:
        out.attached[port] = next(iter(candidates), None)
    else:
        out.ambiguous[port] = sorted(candidates)
