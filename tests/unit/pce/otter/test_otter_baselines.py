"""GREEDY, pinning and LP installation on hand-built cases."""
import numpy as np
import pytest

from pce.errors import InvalidInputError
from pce.otter.aggregate import candidates
from pce.otter.baselines import PIN_DST, PIN_NONE, PIN_PATH, Placement, get_policy
from pce.otter.scenario import generate_flows, generate_network
from tests.lib.otter_helpers import flows, two_path_network

AR = 4  # Table 5 "augmented reality": latency 10 ms ≤ 60 → pinned by PATHPIN/DSTPIN


def placement(net, fl, ties="first"):
    return Placement(net, fl, candidates(net, fl, top_n=4), ties)


def path_of(pl, f):
    g = pl.flow_group[f]
    return pl.groups[g][0].tolist() if g >= 0 else []


def test_greedy_best_score_then_partial_then_next_path():
    net = two_path_network(p0_cap=10.0, p1_cap=10.0)
    fl = flows(*[{"src": 0, "bw": 8.0, "rtt": ("step", 50.0)}] * 3)
    pl = placement(net, fl)
    assert pl.greedy_place(0) == pytest.approx(8.0) and path_of(pl, 0) == [0]  # best score
    # p0 still has 2 left and scores best: partial allocation there, not the whole flow elsewhere
    assert pl.greedy_place(1) == pytest.approx(2.0) and path_of(pl, 1) == [0]
    assert pl.greedy_place(2) == pytest.approx(8.0) and path_of(pl, 2) == [1]  # p0 full
    assert pl.rate[1] == pytest.approx(2.0)
    assert pl.residual_ok()


def test_greedy_respects_edge_resources_and_release_frees():
    net = two_path_network(edge_cpu=8.0)
    fl = flows({"src": 0, "bw": 8.0, "rtt": ("step", 50.0), "res": (16.0, 0.0, 0.0)},
               {"src": 0, "bw": 8.0, "rtt": ("step", 50.0), "res": (16.0, 0.0, 0.0)})
    pl = placement(net, fl)
    assert pl.greedy_place(0) == pytest.approx(4.0)  # 8 vCPU / 16 per 8 Mbit/s
    assert pl.dest_use[0, 0] == pytest.approx(8.0)
    assert pl.greedy_place(1) == pytest.approx(8.0) and path_of(pl, 1) == [1]  # edge full → DC
    pl.release(0)
    assert pl.dest_use[0, 0] == pytest.approx(0.0)
    assert pl.link_load[net.link_names.index("l0")] == pytest.approx(0.0)


def test_greedy_tie_rules():
    net = two_path_network(p0_cap=10.0, p1_cap=20.0)
    fl = flows({"src": 0, "bw": 1.0})  # no demands: both paths score 4
    assert path_of(_placed(net, fl, "first"), 0) == [0]
    assert path_of(_placed(net, fl, "room"), 0) == [1]
    with pytest.raises(InvalidInputError):
        placement(net, fl, "random")


def _placed(net, fl, ties):
    pl = placement(net, fl, ties)
    pl.greedy_place(0)
    return pl


def _stranded_on_slow_path(edge_cpu=None):
    """f1 (sensitive) lands on slow p1 because blocker f0 filled p0; then f0 departs."""
    net = two_path_network(p0_cap=10.0, p1_cap=10.0, edge_cpu=edge_cpu)
    fl = flows({"src": 0, "bw": 10.0, "rtt": ("step", 50.0)},
               {"src": 0, "bw": 5.0, "rtt": ("step", 50.0), "profile": AR})
    pl = placement(net, fl)
    pl.greedy_place(0)
    pl.greedy_place(1)
    assert path_of(pl, 1) == [1]
    pl.release(0)
    return pl


@pytest.mark.parametrize("pin,edge,expected", [
    (PIN_NONE, None, [0]),  # PER: moved to the better path
    (PIN_PATH, None, [1]),  # PATHPIN: keeps its path
    (PIN_DST, None, [0]),  # DSTPIN: same destination, better path allowed
    (PIN_DST, 1e6, [1]),  # DSTPIN: the better path goes to another destination → stays
])
def test_reoptimise_with_pins(pin, edge, expected):
    pl = _stranded_on_slow_path(edge)
    active = np.array([1])
    sol, secs = pl.solve(active, pin)
    mask = np.zeros(2, bool)
    mask[1] = True
    pl.install(sol, mask)
    assert path_of(pl, 1) == expected
    assert pl.rate[1] == pytest.approx(5.0)
    assert secs >= 0


def test_unpinned_when_insensitive():
    pl = _stranded_on_slow_path()
    pl.sensitive[:] = False
    allowed, key = pl.pins(np.array([1]), PIN_PATH)
    assert allowed.all() and (key == -1).all()


def test_greedy_and_lp_never_exceed_capacity():
    net = generate_network(4, 4, 4, seed=2, scale=0.01)
    fl = generate_flows(net, n=600, seed=2)
    pl = placement(net, fl)
    for f in range(len(fl)):
        pl.greedy_place(f)
    assert pl.residual_ok()
    greedy_total = pl.rate.sum()
    active = np.arange(len(fl))
    sol, _ = pl.solve(active, PIN_NONE)
    pl.install(sol, np.ones(len(fl), bool))
    assert pl.residual_ok()
    assert pl.rate.sum() == pytest.approx(sol.allocated(), rel=1e-6)
    assert greedy_total > 0


def test_policy_names():
    assert get_policy("per+pathpin").pin == PIN_PATH
    assert get_policy("OPT").mode == "opt"
    with pytest.raises(InvalidInputError, match="unknown policy"):
        get_policy("SMART")
