"""Reservations sharing one circuit (grooming, issue 28) over the fake Fig. 2 network: the first lights
the circuit, the next ones install only their packet rules and meters, a circuit stays lit until the
last reservation on it is released, and a restarted controller (or one that only has the database)
never takes a circuit down under a live reservation."""
from __future__ import annotations

import threading
import time

from app.controller import groomed_circuits as gc
from app.update.model import XconSpec
from pce.bookings import Booking
from pce.reservation import PathRequest, compute_path
from tests.unit.controller.test_reservations import TIMING, FakeStore, Order, manager, net  # noqa: F401
from topology import rule_plan
from topology.spec import fig2_testbed, spec_to_graph

CIRCUIT = {("X", frozenset({1, 3})), ("Z", frozenset({2, 3}))}


def groomed_orders(n: int, bw: float = 3.0) -> list[Order]:
    """``n`` reservations A:1 → C:3 told apart by VLAN (100, 101, ...), admitted with grooming: they all
    ride the first one's circuit."""
    g = spec_to_graph(fig2_testbed())
    books: list[Booking] = []
    out = []
    for i in range(n):
        res = compute_path(g, PathRequest("A:1", "C:3", bw, 0, 3600, groom=True, tag=100 + i), books)
        books.append(res.booking(str(i + 1), 0, 3600, bw, tag=100 + i))
        out.append(Order(i + 1, src_vlan=100 + i, dst_vlan=100 + i, bandwidth=bw, path=res.to_dict()))
    assert all(o.path == out[0].path | {"rides": o.path["rides"], "circuits": o.path["circuits"],
                                        "available": o.path["available"], "bottleneck": o.path["bottleneck"]}
               for o in out)
    return out


def vlan_probes(fabric):  # noqa: ANN001, ANN201
    """Probe frames with each ingress rule's own match (its VLAN) while a plan runs."""

    def start(c):  # noqa: ANN001, ANN202
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(0.005):
                for r in c.ingress:
                    m = r.match_dict()
                    fabric.send((r.switch, m["in_port"]), {"eth_type": 0x88B6, **{k: v for k, v in m.items()
                                                                                if k != "in_port"}})

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        return lambda: (stop.set(), t.join())

    return start


def lit(fabric) -> set:  # noqa: ANN001
    return {(x.ots, x.ports) for x in fabric.all_xcons()}


def reaches(fabric, vlan: int) -> str | None:  # noqa: ANN001
    return fabric.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03", "vlan_vid": 0x1000 | vlan})


def two_sharers_lit(fabric) -> FakeStore:  # noqa: ANN001
    """Reservations 1 and 2 lit on one circuit by one manager; their store."""
    store = FakeStore()
    m, _ = manager(fabric, store)
    m.probes = vlan_probes(fabric)
    a, b = groomed_orders(2)
    assert m.provision(a).ok and m.provision(b).ok
    return store


def test_sharers_install_only_rules_and_meters_and_the_last_one_takes_the_circuit_down(net) -> None:  # noqa: F811
    store = FakeStore()
    m, _ = manager(net, store, meter_static=True)
    m.probes = vlan_probes(net)
    orders = groomed_orders(3)
    assert m.provision(orders[0]).ok and lit(net) == CIRCUIT
    for o in orders[1:]:
        out = m.provision(o)
        assert out.ok, out
        kinds = {s["kind"] for s in store.plans[-1]["steps"]}
        assert not any(k.startswith("xcon") for k in kinds) and "circuit_up" not in kinds, kinds
    assert lit(net) == CIRCUIT and all(reaches(net, 100 + i) == "h3" for i in range(3))
    # every reservation metered at its bandwidth, static ones too
    assert {mid: kbps for mid, kbps in net.meters["A"].items()} == {
        rule_plan.reservation_meter(o.id): 3000.0 for o in orders}
    m.release(store.installed[1])
    assert lit(net) == CIRCUIT and reaches(net, 100) is None and reaches(net, 101) == "h3"
    m.release(store.installed[2])
    assert lit(net) == CIRCUIT and reaches(net, 102) == "h3"
    m.release(store.installed[3])
    assert lit(net) == set() and net.all_flows() == [] and not net.meters.get("A")


def test_a_restarted_manager_adopts_shared_circuits_from_the_store(net) -> None:  # noqa: F811
    store = two_sharers_lit(net)
    again, _ = manager(net, store)  # a new controller: adopts what the store lists, first
    for inst in store.installed.values():
        again.adopt(inst)
    assert again.release(store.installed[1]).ok
    assert lit(net) == CIRCUIT and reaches(net, 101) == "h3"
    assert again.release(store.installed[2]).ok and lit(net) == set()


def test_the_database_alone_keeps_a_shared_circuit_lit(net) -> None:  # noqa: F811
    """Even a manager that adopted nothing (its lit set empty) keeps XCONs another installation records."""
    store = two_sharers_lit(net)
    bare, _ = manager(net, store)
    assert bare.release(store.installed[1]).ok
    assert lit(net) == CIRCUIT and reaches(net, 101) == "h3"


def test_sharers_starting_together_light_the_circuit_once(net) -> None:  # noqa: F811
    store = FakeStore()
    m, _ = manager(net, store)
    m.probes = vlan_probes(net)
    orders = groomed_orders(3)
    outs: dict[int, object] = {}
    threads = [threading.Thread(target=lambda o=o: outs.__setitem__(o.id, m.provision(o))) for o in orders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(outs[o.id].ok for o in orders), outs  # type: ignore[attr-defined]
    xcon_adds = [s for p in store.plans for s in p["steps"] if s["kind"].startswith("xcon")]
    assert len(xcon_adds) == 2  # X and Z, once
    assert lit(net) == CIRCUIT and all(reaches(net, 100 + i) == "h3" for i in range(3))


def test_pure_helpers() -> None:
    g = spec_to_graph(fig2_testbed())
    from app.controller.reservation_circuits import circuit_for

    a, b = groomed_orders(2)
    ca = circuit_for(g, 1, "A:1", "C:3", a.path["edges"], 100)
    cb = circuit_for(g, 2, "C:3", "A:1", list(reversed(b.path["edges"])), 101)  # the other direction
    assert gc.lit_segments(cb, [ca]) == {0} and gc.to_light(cb, [ca]) == ((), ())
    assert gc.shared_ports(cb, [ca]) == {"X": {1, 3}, "Z": {2, 3}}
    assert gc.to_release(ca, [cb]) == ()
    assert set(gc.to_release(ca, [])) == set(ca.xcons)
    assert gc.to_release(ca, [], [gc.xcon_id(("X", 3, 1))]) == tuple(x for x in ca.xcons if x.ots == "Z")
    assert gc.xcon_id(XconSpec("X", 1, 3)) == gc.xcon_id(("X", 3, 1))
    # a circuit's segment keys are computed once and are the xcon ids of each segment
    assert gc.segment_ids(ca) is gc.segment_ids(ca)
    assert gc.segment_ids(ca) == tuple(frozenset(gc.xcon_id(x) for x in xs) for xs in ca.segment_xcons)
    assert gc.segment_ids(ca) == gc.segment_ids(cb)  # the same circuit, either direction


def test_the_probe_frame_of_a_vlan_reservation_carries_its_tag() -> None:
    """Verification counts a VLAN reservation's rules only if the probe frames carry the VLAN."""
    from app.controller.reservations_app import PROBE_ETHERTYPE, probe_frame

    plain, tagged = probe_frame(), probe_frame(0x1000 | 101)
    assert plain[12:14] == PROBE_ETHERTYPE.to_bytes(2, "big")
    assert tagged[12:16] == bytes([0x81, 0x00, 0x00, 101]) and tagged[16:18] == plain[12:14]


def overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one time."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, d in edges:
        now += d
        most = max(most, now)
    return most


def test_riders_on_a_lit_circuit_run_side_by_side_and_hold_it_lit(net) -> None:  # noqa: F811
    """Riders (every circuit lit already) used to run one at a time under the circuit's lock (~0.35 s
    each on the WAN lab); now their plans overlap, and while they run a sharer's release keeps the circuit."""
    store = FakeStore()
    m, _ = manager(net, store)
    m.probes = vlan_probes(net)
    orders = groomed_orders(5, bw=1.5)
    assert m.provision(orders[0]).ok and lit(net) == CIRCUIT
    run = m.runner.run
    spans: list[tuple[float, float]] = []
    inside = threading.Semaphore(0)

    def slow_run(plan, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        t0 = time.monotonic()
        inside.release()
        time.sleep(0.3)  # a plan's real length on OVS, so that one at a time would show
        out = run(plan, *a, **kw)
        spans.append((t0, time.monotonic()))
        return out

    m.runner.run = slow_run  # type: ignore[method-assign]
    outs: dict[int, object] = {}
    threads = [threading.Thread(target=lambda o=o: outs.__setitem__(o.id, m.provision(o))) for o in orders[1:]]
    for t in threads:
        t.start()
    for _ in threads:
        assert inside.acquire(timeout=10)  # every rider is inside its plan ...
    m.runner.run = run  # type: ignore[method-assign]
    assert m.release(store.installed[1]).ok  # ... when the circuit's first user leaves: the circuit stays
    assert lit(net) == CIRCUIT
    for t in threads:
        t.join(timeout=30)
    assert all(outs[o.id].ok for o in orders[1:]), outs  # type: ignore[attr-defined]
    assert overlap(spans) == 4 and not m.riding
    assert lit(net) == CIRCUIT and all(reaches(net, 100 + i) == "h3" for i in range(1, 5))


def test_a_rider_that_fails_after_the_last_user_left_takes_the_circuit_down(net) -> None:  # noqa: F811
    store = FakeStore()
    m, _ = manager(net, store)
    m.probes = vlan_probes(net)
    first, rider = groomed_orders(2)
    assert m.provision(first).ok
    m.probes = None  # the rider's verification sees no probe frame: its plan fails
    run = m.runner.run
    go, inside = threading.Event(), threading.Event()

    def held_run(plan, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        inside.set()
        assert go.wait(10)
        return run(plan, *a, **kw)

    m.runner.run = held_run  # type: ignore[method-assign]
    out: list = []
    t = threading.Thread(target=lambda: out.append(m.provision(rider)))
    t.start()
    assert inside.wait(10)
    m.runner.run = run  # type: ignore[method-assign]
    assert m.release(store.installed[1]).ok and lit(net) == CIRCUIT  # the rider still claims it
    go.set()
    t.join(timeout=30)
    assert not out[0].ok
    assert lit(net) == set() and net.all_flows() == [] and not m.riding and not m.active
