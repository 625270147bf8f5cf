"""Reservation path computation (pce/reservation.py) on the Fig. 2 graph and small hand-built graphs."""
from __future__ import annotations

import math

import pytest

from pce.errors import InvalidInputError, NoPathError, UnknownTopologyError
from pce.reservation import (
    Booking,
    BookingCalendar,
    PathRequest,
    available_bandwidth,
    compute_path,
    disjoint_paths,
    k_shortest_paths,
)
from topology.graph import MultiLayerGraph
from topology.spec import fig2_testbed, spec_to_graph


@pytest.fixture
def fig2() -> MultiLayerGraph:
    return spec_to_graph(fig2_testbed())


def diamond() -> MultiLayerGraph:
    """A - B - C fast (1 ms per link, 10 Mbit/s) and A - D - C slow (5 ms per link, 10 Mbit/s)."""
    g = MultiLayerGraph()
    for n in "ABCD":
        g.add_packet_switch(n)
    g.add_packet_link("A", 1, "B", 1, 10, 1.0)
    g.add_packet_link("B", 2, "C", 1, 10, 1.0)
    g.add_packet_link("A", 2, "D", 1, 10, 5.0)
    g.add_packet_link("D", 2, "C", 2, 10, 5.0)
    return g


AB, BC, AD, DC = "packet:A:1-B:1", "packet:B:2-C:1", "packet:A:2-D:1", "packet:C:2-D:2"


def req(src="A", dst="C", bw=5.0, start=0.0, end=100.0, **kw) -> PathRequest:
    return PathRequest(src, dst, bw, start, end, **kw)


def assert_valid_optical(g: MultiLayerGraph, nodes: list[str]) -> None:
    """Light enters an OTS port, is cross-connected within the OTS, leaves by a port."""
    kinds = [g.kind(n) for n in nodes]
    i = 0
    while i < len(nodes):
        if kinds[i] == "oport":
            a, b = nodes[i], nodes[i + 1]
            assert kinds[i + 1] == "oport"
            assert g.g.nodes[a]["ots"] == g.g.nodes[b]["ots"]
            assert g.g.nodes[a]["granularity"] == g.g.nodes[b]["granularity"]
            i += 2
        else:
            i += 1


# ---------------------------------------------------------------------- basic paths on Fig. 2
def test_fig2_path_crosses_the_optical_layer(fig2):
    res = compute_path(fig2, req("h1", "h3"))
    assert res.nodes[0] == "h1" and res.nodes[-1] == "h3"
    assert res.nodes[1] == "A" and res.nodes[-2] == "C"
    assert_valid_optical(fig2, res.nodes)
    assert res.oports == [n for n in res.nodes if fig2.kind(n) == "oport"]
    assert all(fig2.g.nodes[a]["ots"] == fig2.g.nodes[b]["ots"] for a, b in res.xcons)
    assert res.available == 10.0  # an ODU2 port, taken whole
    assert "X:6" not in res.nodes and "Z:6" not in res.nodes  # ODU0 ports cannot join ODU2 ones


def test_switch_port_endpoints_include_access_links(fig2):
    res = compute_path(fig2, req("A:1", "C:3"))
    assert res.nodes[0] == "A" and res.nodes[-1] == "C"
    assert res.edges[0] == "access:A:1-h1" and res.edges[-1] == "access:C:3-h3"


def test_odu0_port_cannot_carry_more_than_its_capacity():
    g = MultiLayerGraph()
    g.add_packet_switch("A")
    g.add_packet_switch("C")
    g.add_ots("X", ports={1: "ODU0", 2: "ODU0"})
    g.add_ots("Z", ports={1: "ODU0", 2: "ODU0"})
    g.add_adaptation("A", 1, "X:1")
    g.add_optical_link("X:2", "Z:1")
    g.add_adaptation("C", 1, "Z:2")
    assert compute_path(g, req(bw=1.0)).oports == ["X:1", "X:2", "Z:1", "Z:2"]
    with pytest.raises(NoPathError) as err:
        compute_path(g, req(bw=2.0))
    assert err.value.bottleneck in {"X:1", "X:2", "Z:1", "Z:2"}
    assert err.value.available == 1.25
    assert "granularity" in str(err.value)


def test_xcon_between_different_granularities_is_never_used():
    g = MultiLayerGraph()
    g.add_packet_switch("A")
    g.add_packet_switch("C")
    g.add_ots("X", ports={1: "ODU2", 2: "ODU0"})
    g.add_adaptation("A", 1, "X:1")
    g.add_adaptation("C", 1, "X:2")
    # a bogus mixed-granularity XCON (e.g. from a bad file) must still be ignored by the PCE
    g.g.add_edge("X:1", "X:2", key="xcon:X:1-X:2", kind="xcon", active=False, capacity=10.0)
    with pytest.raises(NoPathError):
        compute_path(g, req(bw=1.0))


def test_active_xcon_ports_belong_to_the_lit_circuit(fig2):
    fig2.set_xcon_active("X:1", "X:3")
    res = compute_path(fig2, req())
    assert not {"X:1", "X:3"} & set(res.nodes)


# ---------------------------------------------------------------------- time windows
def test_bookings_outside_the_window_do_not_count():
    g = diamond()
    books = [Booking("early", 0, 10, 10, (AB,)), Booking("late", 20, 30, 10, (AB,))]
    assert compute_path(g, req(bw=10, start=10, end=20), books).edges == [AB, BC]  # half-open ends


def test_overlapping_booking_reduces_headroom():
    g = diamond()
    books = [Booking("r1", 5, 15, 6, (AB,))]
    res = compute_path(g, req(bw=4, start=10, end=20), books)
    assert res.edges == [AB, BC] and res.available == 4
    assert compute_path(g, req(bw=5, start=10, end=20), books).edges == [AD, DC]


def test_peak_not_sum_for_bookings_that_do_not_overlap_each_other():
    g = diamond()
    # both overlap the window [5, 15) but never each other: the peak on A-B is 6, not 12
    books = [Booking("r1", 0, 10, 6, (AB,)), Booking("r2", 10, 20, 6, (AB,))]
    assert compute_path(g, req(bw=4, start=5, end=15), books).edges == [AB, BC]
    assert available_bandwidth(g, "A", "C", 5, 15, books)[0] == 10  # the slow path is empty


def test_overlapping_bookings_add_up():
    g = diamond()
    books = [Booking("r1", 0, 10, 3, (AB,)), Booking("r2", 5, 15, 4, (AB,)), Booking("r3", 0, 20, 2, (AD,))]
    bw, path = available_bandwidth(g, "A", "C", 0, 20, books)
    assert bw == 8 and path.edges == [AD, DC]  # A-B peaks at 7 (3 Mbit/s left), A-D has 8 left
    assert available_bandwidth(g, "A", "C", 15, 20, books)[0] == 10  # r1/r2 over: A-B free again


def test_oport_booked_by_anyone_is_taken_whole(fig2):
    first = compute_path(fig2, req(bw=1))
    cal = BookingCalendar([first.booking("r1", 0, 50, 1)])
    second = compute_path(fig2, req(bw=1, start=40, end=60), cal)
    assert not set(first.oports) & set(second.oports)
    later = compute_path(fig2, req(bw=1, start=50, end=60), cal)
    assert later.oports == first.oports  # window after the booking: the ports are free again


def test_second_and_third_oport_booking_exhaust_the_uplinks(fig2):
    books = []
    for i in range(2):
        res = compute_path(fig2, req(bw=1), books)
        books.append(res.booking(f"r{i}", 0, 100, 1))
    with pytest.raises(NoPathError) as err:
        compute_path(fig2, req(bw=1), books)
    assert err.value.available == 0
    assert err.value.bottleneck is not None and "booked whole by" in str(err.value)


# ---------------------------------------------------------------------- objectives
def test_objectives_on_the_diamond():
    g = diamond()
    books = [Booking("r1", 0, 100, 3, (AB,))]
    assert compute_path(g, req(bw=1), books).edges == [AB, BC]  # shortest: 2 ms
    assert compute_path(g, req(bw=1, objective="widest"), books).edges == [AD, DC]  # 10 vs 7
    assert compute_path(g, req(bw=1, objective="fits"), books).edges == [AB, BC]  # tighter fit
    assert compute_path(g, req(bw=8, objective="fits"), books).edges == [AD, DC]  # only one fits


def test_least_hops_with_latency_bound():
    g = diamond()
    g.add_packet_link("A", 3, "C", 3, 10, 20.0)  # one hop, but 20 ms
    assert compute_path(g, req(objective="least-hops")).edges == ["packet:A:3-C:3"]
    assert compute_path(g, req(objective="least-hops", max_latency=10)).edges == [AB, BC]
    with pytest.raises(NoPathError, match="longer than 1 ms"):
        compute_path(g, req(max_latency=1))


# ---------------------------------------------------------------------- ERO, include, exclude
def test_strict_ero_is_followed(fig2):
    ero = ("A", "X:4", "X:5", "Z:5", "Z:4", "C")
    assert compute_path(fig2, req(ero=ero)).nodes == list(ero)


def test_loose_ero_through_an_ots(fig2):
    res = compute_path(fig2, req(ero=("A", "Y", "C")))
    assert {"Y:1", "Y:4"} <= set(res.nodes)
    assert_valid_optical(fig2, res.nodes)


def test_include_and_exclude(fig2):
    assert any(n.startswith("Y:") for n in compute_path(fig2, req(include=("Y",))).nodes)
    res = compute_path(fig2, req(exclude=("X:3", "X:5")))
    assert {"Y:1", "Y:4"} <= set(res.nodes)
    with pytest.raises(NoPathError, match="not connected"):
        compute_path(fig2, req(exclude=("Z",)))


def test_include_crossed_on_the_way_is_satisfied():
    g = diamond()
    assert compute_path(g, req(include=("B",))).edges == [AB, BC]
    assert compute_path(g, req(include=("D",))).edges == [AD, DC]


# ---------------------------------------------------------------------- k paths
def test_k_shortest_paths_are_distinct_and_ordered(fig2):
    paths = k_shortest_paths(fig2, req(), k=10)
    assert len(paths) == 10
    assert len({tuple(p.edges) for p in paths}) == 10
    costs = [(p.latency, p.hops) for p in paths]
    assert costs == sorted(costs)
    for p in paths:
        assert len(set(p.nodes)) == len(p.nodes)
        assert_valid_optical(fig2, p.nodes)


def test_disjoint_paths_share_no_link(fig2):
    a, b = disjoint_paths(fig2, req(), k=2)
    assert not set(a.edges) & set(b.edges)
    with pytest.raises(NoPathError, match="only 2 link-disjoint"):
        disjoint_paths(fig2, req(), k=3)  # A has two uplinks


# ---------------------------------------------------------------------- errors
def test_bottleneck_is_named_with_its_headroom():
    g = MultiLayerGraph()
    for n in "ABC":
        g.add_packet_switch(n)
    g.add_packet_link("A", 1, "B", 1, 100, 1.0)
    g.add_packet_link("B", 2, "C", 1, 10, 1.0)
    books = [Booking("big", 0, 100, 7, ("packet:B:2-C:1",))]
    with pytest.raises(NoPathError) as err:
        compute_path(g, req(bw=5), books)
    assert err.value.bottleneck == "packet:B:2-C:1"
    assert err.value.available == 3
    assert "big" in str(err.value) and "packet:B:2-C:1" in str(err.value)


@pytest.mark.parametrize("kw", [
    {"bw": -1}, {"bw": 0}, {"bw": math.nan}, {"bw": math.inf}, {"start": 10, "end": 5},
    {"start": 5, "end": 5}, {"objective": "fastest"}, {"max_latency": -3}, {"src": "C"},
    {"src": "X:1"}, {"exclude": ("A",)}, {"src": "A:x"},
])
def test_invalid_input(fig2, kw):
    with pytest.raises(InvalidInputError):
        compute_path(fig2, req(**kw))


@pytest.mark.parametrize("kw", [{"src": "Q"}, {"dst": "Q:1"}, {"exclude": ("nope",)}, {"ero": ("A", "W", "C")}])
def test_unknown_nodes(fig2, kw):
    with pytest.raises(UnknownTopologyError):
        compute_path(fig2, req(**kw))


def test_errors_are_user_errors(fig2):
    with pytest.raises(NoPathError) as err:
        compute_path(fig2, req(bw=50))
    assert err.value.user_error is True
    with pytest.raises(InvalidInputError):
        k_shortest_paths(fig2, req(), k=0)


def test_result_to_dict_is_json_friendly():
    import json

    res = compute_path(diamond(), req())
    d = res.to_dict()
    assert json.loads(json.dumps(d))["edges"] == [AB, BC]


def test_single_string_include_is_one_node(fig2):
    res = compute_path(fig2, req(include="Y", exclude="X:3"))
    assert any(n.startswith("Y:") for n in res.nodes) and "X:3" not in res.nodes


def test_k_paths_with_include_all_cross_the_waypoint(fig2):
    paths = k_shortest_paths(fig2, req(include=("Y",)), k=3)
    assert len(paths) == 3
    assert all(any(n.startswith("Y:") for n in p.nodes) for p in paths)


def test_what_if_on_a_blocked_pair(fig2):
    books = [Booking("all", 0, 100, 1, (), tuple(fig2.oports("X")))]
    bw, path = available_bandwidth(fig2, "A", "C", 10, 20, books)
    assert bw == 0 and path is not None and path.bottleneck.startswith("X:")
    g = diamond()
    g.add_packet_switch("E")
    assert available_bandwidth(g, "A", "E", 0, 10) == (0.0, None)


def test_calendar_is_reused_between_windows():
    g = diamond()
    cal = BookingCalendar([Booking("r1", 0, 10, 10, (AB,))])
    assert compute_path(g, req(bw=1, start=0, end=5), cal).edges == [AD, DC]
    assert compute_path(g, req(bw=1, start=10, end=15), cal).edges == [AB, BC]
    assert set(cal._cache) == {(0.0, 5.0), (10.0, 15.0)}


def test_pce_library_does_not_import_controller_or_web():
    import subprocess
    import sys

    code = ("import sys, pce.reservation, pce.circuits, pce.cli_path; "
            "bad = [m for m in sys.modules if m.startswith(('os_ken', 'flask', 'app.'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_rejection_names_the_paths_maximum_with_its_endpoint_links(fig2):
    """A request wider than every path: the error names the element that limits the widest path,
    endpoint access links included, with the amount the what-if gives (issue 14 item 6)."""
    with pytest.raises(NoPathError) as exc:
        compute_path(fig2, req("A:1", "C:3", bw=1e6))
    bw, res = available_bandwidth(fig2, "A:1", "C:3", 0.0, 100.0)
    assert exc.value.available == bw == 10 and exc.value.bottleneck == res.bottleneck
    assert "access:" not in str(exc.value)
    # the endpoint link is the narrowest: then it is named, with its own headroom
    access = next(k for k in fig2.g.edges(keys=True) if k[2].startswith("access:A:1"))[2]
    booked = [Booking("big", 0.0, 100.0, 15.0, edges=(access,))]
    with pytest.raises(NoPathError) as exc:
        compute_path(fig2, req("A:1", "C:3", bw=1e6), booked)
    bw, _ = available_bandwidth(fig2, "A:1", "C:3", 0.0, 100.0, booked)
    assert exc.value.available == bw == 5 and exc.value.bottleneck == access


def test_window_error_shows_iso_times(fig2):
    with pytest.raises(InvalidInputError, match=r"end \(2030-01-01T00:00:00Z\) must be after start "
                                                r"\(2031-01-01T00:00:00Z\)"):
        compute_path(fig2, req("A", "C", start=1924992000.0, end=1893456000.0))
