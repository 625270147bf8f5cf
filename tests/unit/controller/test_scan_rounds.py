"""The coded optical scan (app/controller/scan_rounds.py) over a fake optical model.

The model is the light model of docs/contracts.md section 3: a packet port is up exactly while the OTS
port cabled to it is lit, and a probe ``a->b`` lights ``a`` and ``b``. ``truth`` maps every OTS port
``(dpid, port)`` to the packet port cabled to it (None: a fibre or nothing).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from app.controller.model import PortRef
from app.controller.scan_inference import ScanOutcome, infer_group, plan_ots
from app.controller.scan_rounds import (
    Key,
    PortGroup,
    ScanResult,
    decode,
    finish,
    followup_plans,
    lit_ports,
    merge_passes,
    plan_rounds,
    port_groups,
    undecided_groups,
)

Truth = dict[Key, PortRef | None]
Ports = dict[int, dict[int, str]]


def seen_in(lit: set[Key], truth: Truth) -> set[PortRef]:
    """The packet ports that come up while ``lit`` OTS ports are lit."""
    return {a for k in lit if (a := truth.get(k)) is not None}


def coded_scan(ports: Ports, busy: Mapping[int, set[int]], known: Mapping[Key, PortRef | None], truth: Truth,
               lose: Mapping[int, set[PortRef]] | None = None) -> tuple[ScanResult, int, int]:
    """What scan_runner does, against the model: the rounds, the decoding, the follow-up single probes.
    ``lose``: per round, port-ups that never reach the controller. Returns (result, rounds, follow-ups)."""
    plan = plan_rounds(port_groups(ports, busy, known))
    lit = [lit_ports(r) for r in plan.rounds]
    seen = [seen_in(on, truth) - (lose or {}).get(r, set()) for r, on in enumerate(lit)]
    decoded = decode(plan, lit, seen, known)
    outcomes, n = [], 0
    for dpid, gplan in followup_plans(plan, decoded, busy, known):
        n += len(gplan.probes)
        outcomes.append((dpid, infer_group(gplan, [frozenset(seen_in({(dpid, p.a), (dpid, p.b)}, truth))
                                                   for p in gplan.probes])))
    result = finish(decoded, outcomes)
    result.unscannable.extend(plan.unscannable)  # as the runner reports them
    return result, len(plan.rounds), n


def sequential_scan(ports: Ports, busy: Mapping[int, set[int]], known: Mapping[Key, PortRef | None],
                    truth: Truth) -> tuple[ScanResult, int]:
    """The one-probe-at-a-time scan (``scan_parallel = 1``) against the model. Returns (result, probes)."""
    out, probes = ScanResult(), 0
    for dpid, groups in sorted(ports.items()):
        mine = {p: a for (d, p), a in known.items() if d == dpid}
        for gplan in plan_ots(groups, busy.get(dpid, set()), mine):
            probes += len(gplan.probes)
            o = infer_group(gplan, [frozenset(seen_in({(dpid, p.a), (dpid, p.b)}, truth)) for p in gplan.probes])
            out.attached.update({(dpid, p): a for p, a in o.attached.items()})
            out.ambiguous.update({(dpid, p): c for p, c in o.ambiguous.items()})
            out.unscannable.extend((dpid, p) for p in o.unscannable)
    return out, probes


def wan(n_ots: int, fibres: int, uplinks: int = 2) -> tuple[Ports, Truth]:
    """``n_ots`` OTSes, each with ``uplinks`` ports cabled to its packet switch and ``fibres`` dark ones
    (the shape of a topohub lab)."""
    ports: Ports = {}
    truth: Truth = {}
    for d in range(1, n_ots + 1):
        ports[d] = {p: "ODU2" for p in range(1, uplinks + fibres + 1)}
        for p in range(1, uplinks + fibres + 1):
            truth[(d, p)] = PortRef(0x100 + d, p) if p <= uplinks else None
    return ports, truth


def fibres_known(ports: Ports, uplinks: int = 2) -> dict[Key, PortRef | None]:
    return {(d, p): None for d, ps in ports.items() for p in ps if p > uplinks}


def test_fifty_ots_with_their_fibres_known_take_nine_rounds_not_a_hundred_probes():
    ports, truth = wan(50, 4)
    known = fibres_known(ports)
    result, rounds, followups = coded_scan(ports, {}, known, truth)
    assert result.attached == {k: a for k, a in truth.items() if k not in known}
    assert not result.ambiguous and not result.unscannable and followups == 0
    assert rounds == 9 < math.comb(9, 4)  # 100 ports, one code each of 4 lit rounds out of 9
    assert sequential_scan(ports, {}, known, truth)[1] == 100


def test_a_round_lights_each_port_at_most_once_and_pairs_only_within_a_group():
    ports = {1: {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 5: "ODU2", 6: "ODU0", 7: "ODU0", 8: "ODU0"},
             2: {1: "ODU2", 2: "ODU2", 3: "ODU0"}}
    plan = plan_rounds(port_groups(ports, {}, {(2, 3): None}))
    for probes in plan.rounds:
        ends = [(d, p) for d, probe in probes for p in (probe.a, probe.b)]
        assert len(ends) == len(set(ends))  # one XCON per port per round
        assert all(ports[d][probe.a] == ports[d][probe.b] and probe.a != probe.b for d, probe in probes)
    codes = list(plan.codes.values())
    twins = {k for t in plan.twins for k in t}
    assert len({c for k, c in plan.codes.items() if k not in twins}) == len(plan.codes) - len(twins)
    assert len({c.bit_count() for c in codes}) == 1  # one weight: no code inside another
    assert plan.twins == [((2, 1), (2, 2))]  # two ODU2 ports and no partner: always lit together
    assert plan.unscannable == []  # OTS 2's ODU0 port is known


def test_unambiguous_rounds_across_otses_are_decoded_right():
    """Three OTSes lit at once: each packet port's signature names its OTS port, not just its OTS."""
    ports = {d: {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2"} for d in (1, 2, 3)}
    truth: Truth = {(1, 1): PortRef(0xA, 1), (1, 2): None, (1, 3): PortRef(0xB, 7), (1, 4): None,
                    (2, 1): None, (2, 2): PortRef(0xA, 2), (2, 3): None, (2, 4): PortRef(0xC, 1),
                    (3, 1): PortRef(0xC, 2), (3, 2): PortRef(0xC, 3), (3, 3): PortRef(0xB, 1), (3, 4): None}
    plan = plan_rounds(port_groups(ports, {}, {}))
    assert max(len(r) for r in plan.rounds) > 1 and len({d for r in plan.rounds for d, _ in r}) == 3
    lit = [lit_ports(r) for r in plan.rounds]
    decoded = decode(plan, lit, [seen_in(on, truth) for on in lit], {})
    assert decoded.attached == truth and not decoded.undecided and not decoded.unexplained


def test_a_probe_that_lights_nothing_reads_dark():
    ports, truth = wan(3, 3, uplinks=0)  # every port a fibre: nothing ever comes up
    result, rounds, followups = coded_scan(ports, {}, {}, truth)
    assert result.attached == truth and rounds >= 1 and followups == 0


def test_a_lost_port_up_is_followed_up_not_misread():
    """A PORT_STATUS that never arrives: the signature is no code (one weight), the ports it may belong
    to are probed again one at a time, and the result is the truth."""
    ports, truth = wan(6, 2)
    known = fibres_known(ports)
    plan = plan_rounds(port_groups(ports, {}, known))
    victim = truth[(4, 2)]
    assert victim is not None
    first = min(r for r, probes in enumerate(plan.rounds) if (4, 2) in lit_ports(probes))
    lit = [lit_ports(r) for r in plan.rounds]
    decoded = decode(plan, lit, [seen_in(on, truth) - ({victim} if r == first else set())
                                 for r, on in enumerate(lit)], known)
    assert victim in decoded.unexplained and (4, 2) in decoded.undecided
    assert (4, 2) not in decoded.attached  # never read as dark
    result, _rounds, followups = coded_scan(ports, {}, known, truth, lose={first: {victim}})
    assert result.attached == {k: a for k, a in truth.items() if k not in known}
    assert 1 <= followups < 12


def test_skipped_probes_are_read_by_what_was_lit_and_followed_up_when_unreadable():
    """Probes that did not go in (refused, or a port got an XCON meanwhile): decoding trusts what was
    actually lit; a port never lit is undecided and gets a follow-up probe, never read as dark."""
    ports, truth = wan(4, 2)
    known = fibres_known(ports)
    plan = plan_rounds(port_groups(ports, {}, known))
    first = next(pr for d, pr in plan.rounds[0] if d == 1)  # one probe of OTS 1 skipped in round 1
    never = (2, 1)  # every probe of OTS 2 port 1 refused
    kept = [[(d, pr) for d, pr in r if (n, d, pr) != (0, 1, first) and never not in {(d, pr.a), (d, pr.b)}]
            for n, r in enumerate(plan.rounds)]
    lit = [lit_ports(r) for r in kept]
    decoded = decode(plan, lit, [seen_in(on, truth) for on in lit], known)
    assert never in decoded.undecided and never not in decoded.attached
    assert all(decoded.attached[k] == truth[k] for k in decoded.attached)  # nothing certain is wrong
    followups = followup_plans(plan, decoded, {}, known)
    assert [(d, [(p.a, p.b) for p in g.probes]) for d, g in followups] == [(2, [(1, 2)])]  # a port decoded meanwhile as partner
    outcomes = [(d, infer_group(g, [frozenset(seen_in({(d, p.a), (d, p.b)}, truth)) for p in g.probes]))
                for d, g in followups]
    assert finish(decoded, outcomes).attached == {k: a for k, a in truth.items() if k not in known}


def test_twins_lit_are_ambiguous_as_in_the_one_probe_scan():
    ports = {1: {1: "ODU2", 2: "ODU2"}}
    lit_truth: Truth = {(1, 1): PortRef(0xA, 1), (1, 2): None}
    result, rounds, _ = coded_scan(ports, {}, {}, lit_truth)
    assert rounds == 1 and result.ambiguous == {(1, 1): [PortRef(0xA, 1)], (1, 2): [PortRef(0xA, 1)]}
    dark, _, _ = coded_scan(ports, {}, {}, {(1, 1): None, (1, 2): None})
    assert dark.attached == {(1, 1): None, (1, 2): None}


def test_a_packet_port_claimed_twice_is_ambiguous():
    ports = {1: {1: "ODU2", 2: "ODU2", 3: "ODU2"}}
    known = {(1, 3): None}
    plan = plan_rounds(port_groups(ports, {}, known))
    decoded = decode(plan, [lit_ports(r) for r in plan.rounds], [set() for _ in plan.rounds], known)
    decoded.attached = {(1, 1): PortRef(0xA, 1)}
    result = finish(decoded, [(1, ScanOutcome(attached={2: PortRef(0xA, 1)}))])
    assert result.attached == {} and result.ambiguous == {(1, 1): [PortRef(0xA, 1)], (1, 2): [PortRef(0xA, 1)]}


@st.composite
def networks(draw):
    """Random OTSes (ports of two granularities), cables to distinct packet ports, ports known before
    (with their true far end) and busy ports (an XCON on them)."""
    ports: Ports = {}
    truth: Truth = {}
    next_ref = 1
    for d in range(1, draw(st.integers(1, 5)) + 1):
        n = draw(st.integers(1, 8))
        ports[d] = {p: draw(st.sampled_from(["ODU2", "ODU2", "ODU0"])) for p in range(1, n + 1)}
        for p in ports[d]:
            if draw(st.booleans()):
                truth[(d, p)] = PortRef(draw(st.integers(1, 6)), next_ref)
                next_ref += 1
            else:
                truth[(d, p)] = None
    keys = sorted(truth)
    known = {k: truth[k] for k in draw(st.sets(st.sampled_from(keys), max_size=len(keys) // 2))}
    busy_keys = draw(st.sets(st.sampled_from(keys), max_size=len(keys) // 3))
    busy = {d: {p for dd, p in busy_keys if dd == d} for d in ports}
    return ports, truth, known, busy


@settings(max_examples=150, deadline=None)
@given(networks())
def test_the_coded_scan_finds_what_the_one_probe_scan_finds(net):
    ports, truth, known, busy = net
    coded, rounds, followups = coded_scan(ports, busy, known, truth)
    seq, _probes = sequential_scan(ports, busy, known, truth)
    assert coded.attached == seq.attached
    assert coded.ambiguous == seq.ambiguous
    assert sorted(coded.unscannable) == sorted(seq.unscannable)
    assert followups == 0  # a clean run needs no follow-up


@settings(max_examples=150, deadline=None)
@given(networks())
def test_no_round_ever_touches_a_busy_port(net):
    ports, _truth, known, busy = net
    plan = plan_rounds(port_groups(ports, busy, known))
    touched = {k for r in plan.rounds for k in lit_ports(r)}
    assert not touched & {(d, p) for d, ps in busy.items() for p in ps}


def test_port_groups_leave_busy_ports_out_of_unknowns_and_partners():
    groups = port_groups({1: {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU0"}}, {1: {2}}, {(1, 3): None})
    assert groups == [PortGroup(1, "ODU0", (4,), ()), PortGroup(1, "ODU2", (1,), (3,), dark=(3,))]


def test_probes_use_dark_partners_so_no_probe_joins_two_packet_ports():
    """A probe between two cabled ports joins two packet ports: LLDP sees a link and the controller
    recomputes its paths, every round. With the fibres known, each unknown port goes with a fibre."""
    ports, truth = wan(50, 3)
    known = fibres_known(ports)
    plan = plan_rounds(port_groups(ports, {}, known))
    assert all(known.get((d, p.b), 0) is None for r in plan.rounds for d, p in r)
    assert coded_scan(ports, {}, known, truth)[0].attached == {k: a for k, a in truth.items() if k not in known}
    few = {1: {p: "ODU2" for p in range(1, 8)}}  # 6 unknown, 1 fibre: 2 of 4 rounds each, pairs needed
    plan = plan_rounds(port_groups(few, {}, {(1, 7): None}))
    assert any(p.b != 7 for r in plan.rounds for _d, p in r)
    assert all(len(lit_ports([x])) == 2 for r in plan.rounds for x in r)


def test_a_second_coded_pass_reads_what_lagging_port_ups_left_undecided():
    """A loaded machine: 10 port-ups of the first round arrive too late. The ports they may belong to
    are undecided; a second coded pass over them (every port decoded so far a partner) reads them
    in a few rounds instead of one probe each."""
    ports, truth = wan(50, 3)
    known = fibres_known(ports)
    plan = plan_rounds(port_groups(ports, {}, known))
    lit = [lit_ports(r) for r in plan.rounds]
    late = set(sorted(seen_in(lit[0], truth))[:10])
    first = decode(plan, lit, [seen_in(on, truth) - (late if r == 0 else set()) for r, on in enumerate(lit)], known)
    assert set(first.unexplained) == late and len(first.undecided) >= 10
    assert all(first.attached[k] == truth[k] for k in first.attached)
    again, now = undecided_groups(plan, first, {}, known)
    assert sorted(k for g in again for k in ((g.dpid, u) for u in g.unknown)) == sorted(first.undecided)
    plan2 = plan_rounds(again)
    assert len(plan2.rounds) < len(first.undecided)
    lit2 = [lit_ports(r) for r in plan2.rounds]
    both = merge_passes(first, decode(plan2, lit2, [seen_in(on, truth) for on in lit2], now))
    assert not both.undecided and both.attached == {k: a for k, a in truth.items() if k not in known}
