"""An optical port booked by one reservation is taken whole: no request, however small, may share it.

Regression: with an absolute epsilon (``width + 1e-9 < need``) a request of 1e-9 or 1e-12 Mbit/s
"fitted" through ports whose headroom was 0 and was admitted on the very ports another
reservation held (``available`` 0.0).
"""
from __future__ import annotations

import pytest

from pce.errors import NoPathError
from pce.reservation import Booking, PathRequest, compute_path, disjoint_paths, k_shortest_paths
from topology.graph import MultiLayerGraph
from topology.spec import fig2_testbed, spec_to_graph


@pytest.fixture
def fig2() -> MultiLayerGraph:
    return spec_to_graph(fig2_testbed())


def _all_uplinks_taken(g: MultiLayerGraph) -> list[Booking]:
    """Book A:1 → C:3 twice (6 Mbit/s): both optical routes X–Z are then held whole."""
    books: list[Booking] = []
    for i in range(2):
        res = compute_path(g, PathRequest("A:1", "C:3", 6.0, 0.0, 100.0), books)
        books.append(res.booking(f"r{i}", 0.0, 100.0, 6.0))
    return books


@pytest.mark.parametrize("tiny", [1e-9, 1e-12, 1e-300])
def test_tiny_request_does_not_share_a_taken_optical_port(fig2: MultiLayerGraph, tiny: float) -> None:
    first = compute_path(fig2, PathRequest("A:1", "C:3", 6.0, 0.0, 100.0))
    assert first.oports == ["X:1", "X:3", "Z:3", "Z:2"]
    books = [first.booking("a", 0.0, 100.0, 6.0)]
    second = compute_path(fig2, PathRequest("A:1", "C:3", tiny, 0.0, 100.0), books)
    assert not set(second.oports) & set(first.oports)  # the other optical route, never A's ports
    assert second.available > 0

    books = _all_uplinks_taken(fig2)
    for call in (compute_path, k_shortest_paths):
        with pytest.raises(NoPathError) as err:
            call(fig2, PathRequest("A:1", "C:3", tiny, 0.0, 100.0), books)
        assert err.value.available == 0.0 and "booked whole by" in str(err.value)
    with pytest.raises(NoPathError):
        disjoint_paths(fig2, PathRequest("A:1", "C:3", tiny, 0.0, 100.0), books, k=1)


def test_tiny_request_does_not_overfill_a_full_link() -> None:
    g = MultiLayerGraph()
    g.add_packet_switch("A")
    g.add_packet_switch("B")
    g.add_packet_link("A", 1, "B", 1, 10, 1.0)
    books = [Booking("full", 0.0, 100.0, 10.0, ("packet:A:1-B:1",))]
    with pytest.raises(NoPathError) as err:
        compute_path(g, PathRequest("A", "B", 1e-12, 0.0, 100.0), books)
    assert err.value.bottleneck == "packet:A:1-B:1" and err.value.available == 0.0


def test_fits_is_relative_and_zero_headroom_carries_nothing() -> None:
    from pce.cspf import fits

    assert not fits(0.0, 1e-12) and not fits(0.0, 1e-300)
    assert fits(10.0 - 1e-12, 10.0)  # float drift of summed bookings (3 + 4 + 3) is tolerated
    assert not fits(9.99, 10.0)
    assert fits(0.0, 0.0)  # no demand (what-if) fits anywhere
