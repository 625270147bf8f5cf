"""1+1 protection paths (pce/protection.py) on Fig. 2, mesh6 and a hand-built trap graph."""
from __future__ import annotations

import pytest

from mininet_labs.mesh_spec import mesh6
from pce.errors import NoPathError, PceError
from pce.protection import ProtectedPath, available_protected, protected_paths, reprotect, shared_risks
from pce.reservation import Booking, PathRequest, compute_path
from topology.graph import MultiLayerGraph
from topology.spec import fig2_testbed, spec_to_graph


@pytest.fixture
def fig2() -> MultiLayerGraph:
    return spec_to_graph(fig2_testbed())


def req(src="A:1", dst="C:3", bw=5.0, **kw) -> PathRequest:
    return PathRequest(src, dst, bw, 0.0, 100.0, **kw)


def uplink(g: MultiLayerGraph, edges: list[str], switch: str) -> int:
    """The packet port a path leaves (or enters) ``switch`` by, on the optical side."""
    return next(int(g.edge(k)["ports"][switch]) for k in edges
                if g.edge(k)["kind"] == "adaptation" and switch in g.edge(k)["ports"])


def assert_disjoint(g: MultiLayerGraph, pp: ProtectedPath) -> None:
    keys, oports = shared_risks(g, pp.working.edges)
    assert not set(pp.protection.edges) & keys
    assert not set(pp.protection.oports) & oports
    assert set(pp.working.oports).isdisjoint(pp.protection.oports)


def test_fig2_pair_leaves_a_by_both_uplinks_and_shares_no_fibre(fig2):
    pp = protected_paths(fig2, req())
    assert pp.working == compute_path(fig2, req())  # the working path is the unprotected one
    assert_disjoint(fig2, pp)
    assert (uplink(fig2, pp.working.edges, "A"), uplink(fig2, pp.protection.edges, "A")) == (3, 4)
    assert {uplink(fig2, pp.working.edges, "C"), uplink(fig2, pp.protection.edges, "C")} == {1, 2}
    fibres = [{k for k in p.edges if k.startswith("optical:")} for p in (pp.working, pp.protection)]
    assert fibres[0] and fibres[1] and not fibres[0] & fibres[1]
    assert pp.protection.edges[0] == "access:A:1-h1" and pp.protection.edges[-1] == "access:C:3-h3"


def test_both_paths_are_booked_and_the_access_links_once(fig2):
    pp = protected_paths(fig2, req(bw=5.0))
    b = pp.booking("7", 0.0, 100.0, 5.0)
    assert set(b.oports) == set(pp.working.oports) | set(pp.protection.oports)
    assert b.edges.count("access:A:1-h1") == 1
    with pytest.raises(NoPathError):  # A's two uplinks are both held: not even an unprotected path is left
        compute_path(fig2, req("A:2", "C:4", 1.0), [b])
    assert pp.to_dict()["protection"]["edges"] == pp.protection.edges


def test_no_disjoint_protection_is_a_clear_error(fig2):
    taken = Booking("other", 0.0, 100.0, 1.0, (), ("X:4",))  # A's second uplink is taken
    assert compute_path(fig2, req(), [taken])  # unprotected still fits
    with pytest.raises(NoPathError, match="1\\+1 protection: no protection path from A:1 to C:3") as exc:
        protected_paths(fig2, req(), [taken])
    assert isinstance(exc.value, PceError)


def test_protection_must_fit_the_bandwidth(fig2):
    busy = Booking("other", 0.0, 100.0, 8.0, ("adaptation:A:4-X:4",), ())
    with pytest.raises(NoPathError, match="protection"):
        protected_paths(fig2, req(bw=5.0), [busy])
    assert protected_paths(fig2, req(bw=2.0), [busy]).protection.edges[1] == "adaptation:A:4-X:4"


def test_mesh6_pair_is_disjoint_over_two_fibres():
    g = spec_to_graph(mesh6())
    pp = protected_paths(g, req("A:1", "C:1"))
    assert_disjoint(g, pp)
    assert uplink(g, pp.working.edges, "A") != uplink(g, pp.protection.edges, "A")


def trap() -> MultiLayerGraph:
    """S-A-B-T is shortest (3 ms) but blocks every disjoint partner; S-A-T + S-B-T is the pair."""
    g = MultiLayerGraph()
    for n in ("S", "A", "B", "T"):
        g.add_packet_switch(n)
    g.add_packet_link("S", 1, "A", 1, 10, 1.0)
    g.add_packet_link("A", 2, "B", 1, 10, 1.0)
    g.add_packet_link("B", 2, "T", 1, 10, 1.0)
    g.add_packet_link("S", 2, "B", 3, 10, 3.0)
    g.add_packet_link("A", 3, "T", 2, 10, 3.0)
    return g


def test_a_trap_working_path_gives_way_to_the_least_cost_pair():
    g = trap()
    assert compute_path(g, req("S", "T")).nodes == ["S", "A", "B", "T"]
    pp = protected_paths(g, req("S", "T"))
    assert {tuple(pp.working.nodes), tuple(pp.protection.nodes)} == {("S", "A", "T"), ("S", "B", "T")}
    with pytest.raises(NoPathError, match="protection"):  # an ERO pins the trap path: no partner
        protected_paths(g, req("S", "T", ero=("S", "A", "B", "T")))


def test_reprotect_routes_around_the_survivor_and_the_cut(fig2):
    pp = protected_paths(fig2, req())
    new = reprotect(fig2, req(), pp.protection.edges, failed=["optical:X:3-Z:3"])
    assert "optical:X:3-Z:3" not in new.edges and "optical:X:2-Y:1" in new.edges
    keys, oports = shared_risks(fig2, pp.protection.edges)
    assert not set(new.edges) & keys and not set(new.oports) & oports
    with pytest.raises(NoPathError, match="re-protection"):  # the only other way out of A is gone
        reprotect(fig2, req(), pp.protection.edges, failed=["optical:X:3-Z:3", "Y"])
    with pytest.raises(NoPathError, match="re-protection"):
        reprotect(fig2, req(), pp.working.edges, failed=["A:1"])  # the endpoint port itself
    assert reprotect(fig2, req(), pp.working.edges, failed=["gone:fibre"]).edges == pp.protection.edges


def test_what_if_for_one_plus_one_is_the_narrower_of_the_best_pair(fig2):
    assert available_protected(fig2, "A:1", "C:3", 0.0, 100.0)[0] == 10.0
    busy = Booking("other", 0.0, 100.0, 3.0, ("adaptation:A:4-X:4",), ())
    bw, pp = available_protected(fig2, "A:1", "C:3", 0.0, 100.0, [busy])
    assert bw == 7.0 and pp is not None and "adaptation:A:4-X:4" in pp.protection.edges
    assert protected_paths(fig2, req(bw=7.0), [busy])  # the figure is one a request can get
    with pytest.raises(NoPathError):
        protected_paths(fig2, req(bw=7.5), [busy])
    taken = Booking("other", 0.0, 100.0, 1.0, (), ("X:4",))
    assert available_protected(fig2, "A:1", "C:3", 0.0, 100.0, [taken]) == (0.0, None)
