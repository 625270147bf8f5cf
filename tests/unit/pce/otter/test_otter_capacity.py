"""The network's fitted parameters (capacity_factor, shared_factor, edge_factor) and their CLI options."""
import json

import numpy as np
import pytest

from app.cli.main import main
from pce.errors import InvalidInputError
from pce.otter.calibration import CALIBRATED_CAPACITY_FACTOR, CALIBRATED_EDGE_FACTOR, CALIBRATED_SHARED_FACTOR
from pce.otter.matrix import build_matrix
from pce.otter.problem import make_problem
from pce.otter.scenario import generate_flows, generate_network


def test_capacity_factor_scales_links_only():
    base = generate_network(3, 4, 3, seed=2, scale=0.01)
    big = generate_network(3, 4, 3, seed=2, scale=0.01, capacity_factor=1.65)
    np.testing.assert_allclose(big.link_cap, 1.65 * base.link_cap)
    np.testing.assert_allclose(big.path_metrics[:, 3], 1.65 * base.path_metrics[:, 3])  # bottleneck
    np.testing.assert_array_equal(big.path_metrics[:, :3], base.path_metrics[:, :3])  # rtt, jitter, loss
    np.testing.assert_array_equal(big.dest_cap, base.dest_cap)  # edge resources are not links


def test_shared_factor_sizes_access_links():
    net = generate_network(2, 4, 3, seed=4, shared_factor=0.25, capacity_factor=2.0)
    S, D, K = 2, 4, 3
    core = net.link_cap[S * K + D * K:]
    src_access = net.link_cap[: S * K]
    # access link (s, k) = 0.25 × the summed core capacity of the paths (s, *, k)
    for s in range(S):
        for k in range(K):
            ids = net.pair_paths[s, :, k]
            assert src_access[s * K + k] == pytest.approx(0.25 * core[ids].sum())


def test_more_capacity_never_lowers_the_lp_optimum():
    objectives = []
    for cf in (0.5, 1.0, CALIBRATED_CAPACITY_FACTOR, 4.0):
        net = generate_network(2, 4, 3, seed=7, scale=0.001, capacity_factor=cf)
        fl = generate_flows(net, n=300, seed=7)
        objectives.append(build_matrix(make_problem(net, fl, top_n=4)).solve().objective)
    assert all(b >= a - 1e-6 for a, b in zip(objectives, objectives[1:], strict=False))
    assert objectives[-1] > objectives[0]  # the small network is link-bound


def test_edge_factor_scales_edge_resources_only():
    base = generate_network(3, 4, 3, seed=2, scale=0.01)
    big = generate_network(3, 4, 3, seed=2, scale=0.01, edge_factor=30.0)
    edge = base.dest_is_edge
    assert edge.any() and not edge.all()
    np.testing.assert_allclose(big.dest_cap[edge], 30.0 * base.dest_cap[edge])
    assert np.isinf(big.dest_cap[~edge]).all()  # DCs stay unlimited
    np.testing.assert_array_equal(big.link_cap, base.link_cap)
    np.testing.assert_array_equal(big.path_metrics, base.path_metrics)


def test_larger_edge_sites_take_flows_the_small_ones_refuse():
    """Flows needing more cores than a literal Table 4 site has left are placed only when the
    edge sites are larger; DC-only capacity is the same in both networks."""
    objectives, edge_share = [], []
    for ef in (1.0, 100.0):
        net = generate_network(2, 4, 3, seed=5, scale=0.01, edge_factor=ef)
        fl = generate_flows(net, n=400, seed=5)
        prob = make_problem(net, fl, top_n=4)
        sol = build_matrix(prob).solve()
        objectives.append(sol.objective)
        x = sol.x
        to_edge = net.dest_is_edge[net.path_dst[prob.col_path]]
        edge_share.append(float(x[to_edge].sum() / max(x.sum(), 1e-12)))
    assert objectives[1] > objectives[0]
    assert edge_share[1] > edge_share[0]


@pytest.mark.parametrize("kw", [{"capacity_factor": 0.0}, {"shared_factor": -1.0}, {"edge_factor": 0.0}])
def test_invalid_factors(kw):
    with pytest.raises(InvalidInputError):
        generate_network(2, 4, 2, **kw)


def test_cli_capacity_factor_default_and_override(tmp_path, capsys):
    common = ["pce", "otter-solve", "--sources", "2", "--dests", "4", "--paths", "2", "--flows", "200",
              "--scale", "0.001"]
    out1, out2 = tmp_path / "a.json", tmp_path / "b.json"
    assert main([*common, "--json", str(out1)]) == 0
    assert main([*common, "--capacity-factor", "1", "--shared-factor", "0.5", "--json", str(out2)]) == 0
    a, b = json.loads(out1.read_text()), json.loads(out2.read_text())
    assert (a["config"]["capacity_factor"], a["config"]["shared_factor"]) == (
        CALIBRATED_CAPACITY_FACTOR, CALIBRATED_SHARED_FACTOR)
    assert a["config"]["edge_factor"] == CALIBRATED_EDGE_FACTOR
    assert (b["config"]["capacity_factor"], b["config"]["shared_factor"]) == (1.0, 0.5)
    out3 = tmp_path / "c.json"
    assert main([*common, "--capacity-factor", "4", "--shared-factor", "1", "--edge-factor", "100",
                 "--json", str(out3)]) == 0
    c = json.loads(out3.read_text())
    assert c["config"]["edge_factor"] == 100.0
    assert c["objective"] >= max(a["objective"], b["objective"]) - 1e-6  # more of everything
    assert main([*common, "--capacity-factor", "-2"]) == 2
    assert "capacity_factor" in capsys.readouterr().err
    assert main([*common, "--edge-factor", "0"]) == 2
    assert "edge_factor" in capsys.readouterr().err


def test_cli_help_states_the_fitted_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["pce", "otter-sim", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default {CALIBRATED_CAPACITY_FACTOR}" in text
    assert f"default {CALIBRATED_SHARED_FACTOR}" in text
    assert f"default {CALIBRATED_EDGE_FACTOR}" in text
