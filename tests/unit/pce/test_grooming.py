"""Grooming (issue 28): a request rides a circuit booked by others when the piecewise peak of the
bookings on it over the window leaves room, and lights a new circuit only when none has room; no
circuit is ever over-booked in any instant and no optical port ever serves two circuits at once."""
from __future__ import annotations

import random
from collections import defaultdict

import pytest

from pce.bookings import Booking, BookingCalendar, peak_load
from pce.errors import NoPathError
from pce.grooming import booked_circuits, circuits_of, segments
from pce.reservation import PathRequest, compute_path
from topology.graph import MultiLayerGraph
from topology.spec import fig2_testbed, spec_to_graph

X_Z = "circuit:X:1~X:3~Z:3~Z:2"
X_Z2 = "circuit:X:4~X:5~Z:5~Z:4"


@pytest.fixture(scope="module")
def fig2() -> MultiLayerGraph:
    return spec_to_graph(fig2_testbed())


def _book(g: MultiLayerGraph, books: list[Booking], rid: str, bw: float, start: float, end: float,
          src: str = "A:1", dst: str = "C:3", **kw: object):
    """Admit and book with grooming; each booking gets a VLAN of its own (100, 101, ...) unless ``tag``."""
    tag = kw.pop("tag", 100 + len(books))
    res = compute_path(g, PathRequest(src, dst, bw, start, end, groom=True, tag=tag, **kw),  # type: ignore[arg-type]
                       books)
    books.append(res.booking(rid, start, end, bw, tag=tag))  # type: ignore[arg-type]
    return res


def test_six_of_three_mbps_fit_the_two_circuits_from_a(fig2: MultiLayerGraph) -> None:
    books: list[Booking] = []
    got = [_book(fig2, books, f"r{i}", 3.0, 0.0, 3600.0) for i in range(6)]
    assert [bool(r.rides) for r in got] == [False, True, True, False, True, True]  # light only when full
    assert {r.rides[0] for r in got if r.rides} == {X_Z, X_Z2}
    with pytest.raises(NoPathError) as err:
        _book(fig2, books, "r6", 3.0, 0.0, 3600.0)
    assert err.value.available == 1.0 and err.value.bottleneck in (X_Z, X_Z2)
    assert "shared circuit of 10 Mbit/s with 9 booked at peak" in str(err.value)
    _book(fig2, books, "r7", 1.0, 0.0, 3600.0)  # the last Mbit/s of a circuit still fits


def test_a_groomed_path_is_the_plain_path_of_the_circuit(fig2: MultiLayerGraph) -> None:
    books: list[Booking] = []
    first = _book(fig2, books, "a", 3.0, 0.0, 100.0)
    second = _book(fig2, books, "b", 3.0, 0.0, 100.0)
    back = _book(fig2, books, "c", 3.0, 0.0, 100.0, src="C:3", dst="A:1")  # either direction, one circuit
    assert second.rides == [X_Z] and back.rides == [X_Z]
    assert (second.edges, second.oports, second.xcons, second.nodes) == \
        (first.edges, first.oports, first.xcons, first.nodes)
    assert back.edges == list(reversed(first.edges)) and back.oports == list(reversed(first.oports))
    assert second.hops == first.hops and second.latency == pytest.approx(first.latency)


def test_peaks_are_piecewise_over_the_window(fig2: MultiLayerGraph) -> None:
    """Bookings that never overlap each other do not add up; the peak over the new window counts."""
    books: list[Booking] = []
    _book(fig2, books, "morning", 6.0, 0.0, 50.0)
    _book(fig2, books, "noon", 6.0, 50.0, 100.0)  # rides: the morning booking has ended
    assert books[1].oports == books[0].oports
    res = _book(fig2, books, "day", 4.0, 0.0, 100.0)  # peak 6 at any instant: 4 more fit
    assert res.rides == [X_Z]
    other = _book(fig2, books, "more", 4.0, 20.0, 60.0)  # peak 10 on X_Z now: the other circuit
    assert other.rides == [] and other.oports[0] == "X:4"
    late = _book(fig2, books, "late", 4.0, 90.0, 200.0)  # X_Z holds 10 until 100, X_Z2 is not booked then
    assert late.rides == [] and late.oports[0] == "X:4"
    again = _book(fig2, books, "again", 6.0, 30.0, 95.0)  # X_Z2: 4 (20-60) then 4 (90-): peak 4, 6 fit
    assert again.rides == [X_Z2]


def test_a_circuit_booked_for_part_of_the_window_is_extended(fig2: MultiLayerGraph) -> None:
    books: list[Booking] = []
    _book(fig2, books, "a", 3.0, 0.0, 50.0)
    res = _book(fig2, books, "b", 3.0, 40.0, 500.0)
    assert res.rides == [X_Z]  # its ports are nobody else's after 50 either


def test_exclude_keeps_a_request_off_a_booked_circuit(fig2: MultiLayerGraph) -> None:
    books: list[Booking] = []
    _book(fig2, books, "a", 3.0, 0.0, 100.0)
    res = _book(fig2, books, "b", 3.0, 0.0, 100.0, exclude=("X:3",))
    assert res.rides == [] and "X:3" not in res.oports


def test_without_groom_ports_stay_taken_whole(fig2: MultiLayerGraph) -> None:
    books: list[Booking] = []
    _book(fig2, books, "a", 3.0, 0.0, 100.0)
    res = compute_path(fig2, PathRequest("A:1", "C:3", 3.0, 0.0, 100.0), books)
    assert res.rides == [] and not set(res.oports) & set(books[0].oports)


def test_segments_and_circuits_of(fig2: MultiLayerGraph) -> None:
    books: list[Booking] = []
    res = _book(fig2, books, "a", 3.0, 0.0, 100.0)
    (seg,) = segments(fig2, res.edges)
    assert seg.ends == ("A", "C") and seg.oports == ("X:1", "X:3", "Z:3", "Z:2") and seg.key == X_Z
    cal = BookingCalendar(books)
    (use,) = circuits_of(fig2, res.edges, cal, 0.0, 100.0)
    assert use["use"] == "rides" and use["free"] == 7.0 and use["reservations"] == ["a"]
    (use,) = circuits_of(fig2, res.edges, cal, 100.0, 200.0)  # after it: nothing booked there
    assert use["use"] == "lights" and use["free"] == 10.0
    assert booked_circuits(fig2, cal, 100.0, 200.0) == {}


@pytest.mark.parametrize("seed", [28, 29, 30])
def test_random_calendar_never_overbooks_a_circuit_or_shares_a_port(fig2: MultiLayerGraph, seed: int) -> None:
    """Many random requests, random windows: afterwards, from the bookings alone, every circuit's load
    stays within its capacity in every instant, and no port is in two circuits at overlapping times."""
    rnd = random.Random(seed)
    books: list[Booking] = []
    pairs = [("A:1", "C:3"), ("A:2", "C:4"), ("A:1", "B"), ("B", "C:3")]
    for i in range(150):
        src, dst = rnd.choice(pairs)
        start = rnd.choice(range(0, 2000, 100))
        end = start + rnd.choice((100, 300, 700))
        try:
            _book(fig2, books, f"r{i}", float(rnd.choice((1, 2, 3, 5))), float(start), float(end), src=src, dst=dst)
        except NoPathError:
            pass
    assert len(books) > 40
    by_circuit: dict[str, list[Booking]] = defaultdict(list)
    for b in books:
        for seg in segments(fig2, b.edges):
            by_circuit[seg.key].append(b)
    rode = 0
    for key, bs in by_circuit.items():
        cap = min(fig2.g.nodes[o]["capacity"] for o in key.removeprefix("circuit:").split("~"))
        assert peak_load(((b.start, b.end, b.bandwidth) for b in bs), 0.0, 1e9) <= cap + 1e-9, key
        rode += len(bs) - 1
    assert rode > 20  # grooming happened
    port_use: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for key, bs in by_circuit.items():
        for b in bs:
            for o in key.removeprefix("circuit:").split("~"):
                port_use[o].append((b.start, b.end, key))
    for port, spans in port_use.items():
        for s1, e1, k1 in spans:
            for s2, e2, k2 in spans:
                assert k1 == k2 or not (s1 < e2 and s2 < e1), (port, k1, k2)


def test_a_lit_booked_circuit_is_ridden_through_its_bookings_not_its_packet_link(fig2: MultiLayerGraph) -> None:
    """On a live graph the lit circuit is also a packet link (LLDP) with nothing booked on its key: a
    groomed request must see the circuit's bookings, not that link's full capacity."""
    live = fig2.copy()
    books: list[Booking] = []
    first = _book(live, books, "a", 9.0, 0.0, 100.0)
    live.set_xcon_active("X:1", "X:3", True)
    live.set_xcon_active("Z:3", "Z:2", True)
    live.add_packet_link("A", 3, "C", 1, 10.0, 0.0, source="lldp")
    res = _book(live, books, "b", 1.0, 0.0, 100.0)
    assert res.rides == [X_Z] and res.edges == first.edges
    with pytest.raises(NoPathError):  # not the 10 Mbit/s of the packet link, nor a fresh circuit
        compute_path(live, PathRequest("A:1", "C:3", 1.0, 0.0, 100.0, groom=True, tag=7, exclude=("X:4",)), books)


def test_sharers_need_a_vlan_each_all_different(fig2: MultiLayerGraph) -> None:
    """The packet rules on a shared circuit match the VLAN: an untagged request, or one with a VLAN
    already on the circuit, cannot join (its rules would collide), and nobody joins an untagged one."""
    books: list[Booking] = []
    _book(fig2, books, "a", 3.0, 0.0, 100.0, tag=100)
    assert _book(fig2, books, "untagged", 3.0, 0.0, 100.0, tag=None).rides == []  # lights the other circuit
    for tag in (100, None):
        with pytest.raises(NoPathError) as err:
            _book(fig2, books, "no", 3.0, 0.0, 100.0, tag=tag)
        assert "needs a VLAN for this reservation and every other on it" in str(err.value)
    assert _book(fig2, books, "b", 3.0, 0.0, 100.0, tag=101).rides == [X_Z]
    (c,) = [c for c in booked_circuits(fig2, BookingCalendar(books), 0.0, 100.0).values() if c.key == X_Z]
    assert c.tags == (100, 101) and c.takes(102) and not c.takes(101) and not c.takes(None)
