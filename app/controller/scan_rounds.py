"""Coded optical scan (plain logic): many probe XCONs per round, and which packet port each one lit.

Why it works: a packet port is cabled to at most one OTS port, and it is up exactly while that port
is lit (docs/contracts.md section 3). So if every unknown OTS port ``u`` is lit in a distinct set of
rounds — its *code* ``c(u)``, a bitmask over rounds — the rounds in which a packet port came up (its
*signature*) name the one OTS port it is cabled to, whatever else was lit in the same rounds, on
any OTS. ``N`` unknown ports need only ~``log2 N`` rounds instead of ~``N`` probes. All codes light
the same number ``w`` of the ``R`` rounds (``C(R, w) >= N``): then no code lies inside another, so a
lost or an extra port-up gives a signature that is no code (detected) instead of another port's code.

Constraints on the codes, per OTS and granularity group (an XCON joins two free ports of one group;
one XCON per port):

- each round lights an even number of the group's ports, paired into probes; a group with a free
  port whose far end is known (a *partner*) can light an odd number (the partner makes the pair);
- without a partner, the codes of the group's unknown ports must therefore XOR to 0 (``n >= 3``);
- two unknown ports and no partner (*twins*) can only be lit together: they share one code, and a
  packet port with that signature is ``ambiguous`` between them (as in the one-probe scan); one
  port alone with no partner is ``unscannable``.

Decoding (:func:`decode`) trusts what was actually lit (the runner reports the probes that went in,
so a skipped or refused probe changes the codes it touched) and leaves *undecided* every port it
cannot read with certainty: two ports lit in the same rounds, two packet ports with the same
signature, a port never lit, or one whose code overlaps the signature of a packet port that matches
no code (a missed or late PORT_STATUS). Undecided ports get follow-up single probes
(:func:`followup_plans`, the one-probe planning of :mod:`app.controller.scan_inference`) with the
ports decoded meanwhile as partners; :func:`finish` merges both.

Busy ports (an end of an XCON: applied, unknown or read back) are neither probed nor partners, here
as in :func:`app.controller.scan_inference.plan_ots`.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import reduce
from operator import xor

from app.controller.model import PortRef
from app.controller.scan_inference import Attachment, GroupPlan, Probe, ScanOutcome, plan_group

Key = tuple[int, int]  # (OTS dpid, port number)


@dataclass(frozen=True)
class PortGroup:
    """The free ports of one granularity group of one OTS: those to find, those already known."""

    dpid: int
    granularity: str
    unknown: tuple[int, ...]
    partners: tuple[int, ...]  # free ports whose far end is known (usable as the other end of a probe)
    dark: tuple[int, ...] = ()  # the partners whose far end is no packet port (a fibre, nothing)


@dataclass
class RoundPlan:
    """The probes of every round and the code each unknown port was given."""

    rounds: list[list[tuple[int, Probe]]]  # per round: (OTS dpid, probe)
    codes: dict[Key, int]  # unknown port -> bitmask of the rounds it is lit in
    twins: list[tuple[Key, Key]] = field(default_factory=list)  # pairs that share a code (ambiguous if lit)
    unscannable: list[Key] = field(default_factory=list)
    groups: list[PortGroup] = field(default_factory=list)


@dataclass
class ScanResult:
    """A scan's findings keyed by ``(OTS dpid, port)`` (the one-probe :class:`ScanOutcome` per OTS)."""

    attached: dict[Key, Attachment] = field(default_factory=dict)
    ambiguous: dict[Key, list[PortRef]] = field(default_factory=dict)
    unscannable: list[Key] = field(default_factory=list)


@dataclass
class Decoded:
    """What the rounds tell: certain attachments, ambiguous ports, ports that need a follow-up."""

    attached: dict[Key, Attachment] = field(default_factory=dict)
    ambiguous: dict[Key, list[PortRef]] = field(default_factory=dict)
    undecided: set[Key] = field(default_factory=set)
    unexplained: dict[PortRef, int] = field(default_factory=dict)  # packet port -> a signature no code has


def port_groups(ports: Mapping[int, Mapping[int, str]], busy: Mapping[int, set[int]],
                known: Mapping[Key, Attachment]) -> list[PortGroup]:
    """Per OTS (``ports``: dpid -> port -> granularity) and granularity, the free unknown ports and
    the free known ones (partners); busy ports are left out of both."""
    out = []
    for dpid in sorted(ports):
        by_gran: dict[str, list[int]] = {}
        for port_no, g in sorted(ports[dpid].items()):
            if port_no not in busy.get(dpid, set()):
                by_gran.setdefault(g, []).append(port_no)
        for g, free in sorted(by_gran.items()):
            unknown = tuple(p for p in free if (dpid, p) not in known)
            partners = tuple(p for p in free if (dpid, p) in known)
            if unknown:
                out.append(PortGroup(dpid, g, unknown, partners, tuple(p for p in partners if known[(dpid, p)] is None)))
    return out


def _pool(bits: int, weight: int) -> list[int]:
    """Every code of ``bits`` rounds lit in exactly ``weight`` of them (one weight: no code is a subset
    of another, so a lost or an extra port-up never turns one code into another)."""
    return [c for c in range(1, 1 << bits) if c.bit_count() == weight]


def _zero_xor(n: int, free: list[int]) -> list[int] | None:
    """``n >= 3`` distinct codes from ``free`` (in preference order) whose XOR is 0, or None: the first
    ``n - 3`` as they come, then a ``c`` and a pair ``a ^ b = x`` that closes the XOR."""
    if len(free) < n:
        return None
    head = free[: n - 3]
    for c in free[n - 3:]:
        prefix = [*head, c]
        x = reduce(xor, prefix, 0)
        if x == 0:
            continue
        left = set(free) - set(prefix)
        for a in free:
            b = a ^ x
            if a < b and a in left and b in left:
                return [*prefix, a, b]
    return None


def _assign(groups: list[PortGroup], bits: int, weight: int) -> tuple[dict[Key, int], list[tuple[Key, Key]]] | None:
    """Codes for every codable port with ``bits`` rounds of which each lights ``weight``, or None if
    they do not fit."""
    free = _pool(bits, weight)
    codes: dict[Key, int] = {}
    twins: list[tuple[Key, Key]] = []

    def take(k: int) -> list[int] | None:
        if len(free) < k:
            return None
        got = free[:k]
        del free[:k]
        return got

    # the constrained groups first (no partner, >= 3 ports: codes XOR to 0), largest first
    for g in sorted((g for g in groups if not g.partners and len(g.unknown) >= 3), key=lambda g: -len(g.unknown)):
        got = _zero_xor(len(g.unknown), free)
        if got is None:
            return None
        for c in got:
            free.remove(c)
        codes.update({(g.dpid, u): c for u, c in zip(g.unknown, got, strict=True)})
    for g in groups:
        if not g.partners and len(g.unknown) == 2:
            got = take(1)
            if got is None:
                return None
            a, b = (g.dpid, g.unknown[0]), (g.dpid, g.unknown[1])
            codes[a] = codes[b] = got[0]
            twins.append((a, b))
        elif g.partners:
            got = take(len(g.unknown))
            if got is None:
                return None
            codes.update({(g.dpid, u): c for u, c in zip(g.unknown, got, strict=True)})
    return codes, twins


def _fit(groups: list[PortGroup], symbols: int) -> tuple[dict[Key, int], list[tuple[Key, Key]], int]:
    """The fewest rounds, then the fewest lit per code, whose codes fit (``symbols`` codes needed)."""
    bits = 1
    while True:
        for weight in range(1, bits + 1):
            if math.comb(bits, weight) >= symbols and (fit := _assign(groups, bits, weight)) is not None:
                return fit[0], fit[1], bits
        bits += 1


def plan_rounds(groups: list[PortGroup]) -> RoundPlan:
    """The fewest rounds whose codes fit every group, and the probes of each round."""
    unscannable = [(g.dpid, g.unknown[0]) for g in groups if not g.partners and len(g.unknown) == 1]
    codable = [g for g in groups if g.partners or len(g.unknown) >= 2]
    symbols = sum(1 if not g.partners and len(g.unknown) == 2 else len(g.unknown) for g in codable)
    if not symbols:
        return RoundPlan([], {}, [], unscannable, groups)
    codes, twins, bits = _fit(codable, symbols)
    rounds: list[list[tuple[int, Probe]]] = []
    for r in range(bits):
        probes: list[tuple[int, Probe]] = []
        for g in codable:
            probes.extend((g.dpid, p) for p in _pair(g, [u for u in g.unknown if codes[(g.dpid, u)] >> r & 1]))
        rounds.append(probes)
    while rounds and not rounds[-1]:
        rounds.pop()
    return RoundPlan(rounds, codes, twins, unscannable, groups)


def one_probe_count(groups: list[PortGroup]) -> int:
    """How many probes the one-probe scan (:func:`plan_group`) needs for ``groups``: a coded plan with
    as many rounds is no faster."""
    return sum(len(plan_group(g.unknown, dict.fromkeys(g.partners)).probes) for g in groups)


def _pair(g: PortGroup, lit: list[int]) -> list[Probe]:
    """The probes that light ``lit`` (ports of group ``g``): each with a dark partner while there are
    some — a probe between two packet ports joins them, LLDP sees a link and the controller
    recomputes its paths every round — the rest in pairs, an odd one out with a partner (there is
    one: without partners the codes XOR to 0)."""
    others = [p for p in g.partners if p not in g.dark]
    k = min(len(g.dark), len(lit))
    if (len(lit) - k) % 2 and not others[:1]:
        k -= 1
    probes = [Probe(u, d) for u, d in zip(lit[:k], g.dark[:k], strict=True)]
    rest = lit[k:]
    if len(rest) % 2:
        rest.append(others[0])
    return probes + [Probe(rest[i], rest[i + 1]) for i in range(0, len(rest), 2)]


def lit_ports(probes: Iterable[tuple[int, Probe]]) -> set[Key]:
    """Both ends of every probe (a probe ``a->b`` lights ``a`` and ``b``)."""
    return {(d, p) for d, probe in probes for p in (probe.a, probe.b)}


def decode(plan: RoundPlan, lit: list[set[Key]], seen: list[set[PortRef]],
           known: Mapping[Key, Attachment]) -> Decoded:
    """Read the rounds: ``lit[r]``: the OTS ports actually lit in round ``r``; ``seen[r]``: the packet
    ports that came up in it; ``known``: far ends known before (their packet ports are ignored)."""
    out = Decoded()
    ignore = {a for a in known.values() if a is not None}
    eff = {k: sum(1 << r for r, ports in enumerate(lit) if k in ports) for k in plan.codes}
    sig: dict[PortRef, int] = {}
    for r, ups in enumerate(seen):
        for ref in ups - ignore:
            sig[ref] = sig.get(ref, 0) | 1 << r
    by_code: dict[int, list[Key]] = {}
    for k, c in eff.items():
        if c:
            by_code.setdefault(c, []).append(k)
        else:
            out.undecided.add(k)  # never lit (its probes were skipped or refused)
    out.unexplained = {ref: s for ref, s in sig.items() if s not in by_code}
    twins = {frozenset(t) for t in plan.twins}
    for c, keys in by_code.items():
        refs = sorted(ref for ref, s in sig.items() if s == c)
        if frozenset(keys) in twins:  # always lit together: only "nothing attached" is certain
            for k in keys:
                if refs:
                    out.ambiguous[k] = refs
                else:
                    out.attached[k] = None
        elif len(keys) == 1 and len(refs) <= 1:
            out.attached[keys[0]] = refs[0] if refs else None
        else:
            out.undecided.update(keys)
    for s in out.unexplained.values():  # a dark verdict is not certain where such a port may belong
        for k, a in list(out.attached.items()):
            if a is None and eff[k] & s:
                del out.attached[k]
                out.undecided.add(k)
    return out


def undecided_groups(plan: RoundPlan, decoded: Decoded, busy: Mapping[int, set[int]],
                     known: Mapping[Key, Attachment]) -> tuple[list[PortGroup], dict[Key, Attachment]]:
    """The groups of a second coded pass over the ports ``decoded`` left undecided (and still free),
    with every free port known before or decoded now as a partner; and that knowledge (for
    :func:`decode`)."""
    now = {**known, **decoded.attached}
    out = []
    for g in plan.groups:
        free = busy.get(g.dpid, set())
        todo = tuple(u for u in g.unknown if (g.dpid, u) in decoded.undecided and u not in free)
        if todo:
            partners = tuple(sorted(p for p in (*g.partners, *g.unknown) if (g.dpid, p) in now and p not in free))
            out.append(PortGroup(g.dpid, g.granularity, todo, partners,
                                 tuple(p for p in partners if now[(g.dpid, p)] is None)))
    return out, now


def merge_passes(first: Decoded, second: Decoded) -> Decoded:
    """The first pass's certain results with a second pass's over its undecided ports."""
    return Decoded({**first.attached, **second.attached}, {**first.ambiguous, **second.ambiguous},
                   set(second.undecided), dict(second.unexplained))


def followup_plans(plan: RoundPlan, decoded: Decoded, busy: Mapping[int, set[int]],
                   known: Mapping[Key, Attachment]) -> list[tuple[int, GroupPlan]]:
    """One-probe plans (:func:`plan_group`) for the undecided ports that are still free, with the free
    ports known before or decoded now as partners."""
    out = []
    for g in plan.groups:
        free = busy.get(g.dpid, set())
        todo = [u for u in g.unknown if (g.dpid, u) in decoded.undecided and u not in free]
        if not todo:
            continue
        partners = {p: known[(g.dpid, p)] for p in g.partners if p not in free}
        partners.update({u: decoded.attached[(g.dpid, u)] for u in g.unknown
                         if (g.dpid, u) in decoded.attached and u not in free})
        out.append((g.dpid, plan_group(todo, partners)))
    return out


def finish(decoded: Decoded, followups: Iterable[tuple[int, ScanOutcome]]) -> ScanResult:
    """The rounds' certain results plus the follow-ups' (per OTS dpid); a packet port claimed by two
    OTS ports makes both ambiguous (no cable has two ends at one packet port)."""
    out = ScanResult(dict(decoded.attached), dict(decoded.ambiguous))
    for dpid, o in followups:
        out.attached.update({(dpid, p): a for p, a in o.attached.items()})
        out.ambiguous.update({(dpid, p): c for p, c in o.ambiguous.items()})
        out.unscannable.extend((dpid, p) for p in o.unscannable)
    owners: dict[PortRef, list[Key]] = {}
    for k, a in out.attached.items():
        if a is not None:
            owners.setdefault(a, []).append(k)
    for ref, keys in owners.items():
        if len(keys) > 1:
            for k in keys:
                del out.attached[k]
                out.ambiguous[k] = [ref]
    return out
