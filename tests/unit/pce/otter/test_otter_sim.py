import json

import numpy as np
import pytest

from app.cli.main import main
from pce.errors import InvalidInputError
from pce.otter.aggregate import candidates
from pce.otter.scenario import generate_flows, generate_network
from pce.otter.sim import simulate


@pytest.fixture(scope="module")
def instance():
    net = generate_network(3, 4, 3, seed=4, scale=0.005)
    fl = generate_flows(net, rate=40.0, duration=4.0, seed=4)
    return net, fl, candidates(net, fl)


def test_metrics_in_range_for_every_policy(instance):
    net, fl, cand = instance
    for pol in ("GREEDY", "PER", "PER+PATHPIN", "PER+DSTPIN", "OPT", "OPT+PATHPIN", "OPT+DSTPIN"):
        r = simulate(net, fl, pol, cand=cand, period=0.5, solve_delay=0.05, opt_epoch=0.5)
        assert 0 < r.allocated_bytes_fraction <= 1 + 1e-9
        assert 0 < r.mean_flow_allocated_fraction <= 1 + 1e-9
        assert 0 < r.satisfaction <= 1 + 1e-9
        assert (r.solves > 0) == (pol != "GREEDY")


def test_per_whose_solve_never_finishes_is_greedy(instance):
    net, fl, cand = instance
    g = simulate(net, fl, "GREEDY", cand=cand)
    p = simulate(net, fl, "PER", cand=cand, period=0.5, solve_delay=1e6)
    assert p.allocated_bytes_fraction == pytest.approx(g.allocated_bytes_fraction)
    assert p.solves == 1 and p.installs == 0 and p.as_dict()["installs"] == 0  # and it says so
    assert simulate(net, fl, "PER", cand=cand, period=0.5, solve_delay=0.05).installs > 0


def test_cli_does_not_pass_greedy_figures_off_as_per(tmp_path, capsys):
    """Issue 14 item 5: a PER solve slower than the run (231 s at full scale) printed GREEDY's figure
    as PER's, with a PER/GREEDY ratio of 1."""
    out = tmp_path / "o.json"
    assert main(["pce", "otter-sim", "--sources", "2", "--dests", "4", "--paths", "2", "--rate", "2000",
                 "--scale", "0.01", "--duration", "2", "--policies", "GREEDY,PER,OPT", "--solve-delay", "100",
                 "--quiet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NOT PER: no LP result was installed before the run ended (--solve-delay 100 s" in text
    assert "GREEDY's figures" in text and "PER/GREEDY" not in text and "OPT/GREEDY" in text
    doc = json.loads(out.read_text())
    assert {r["policy"]: r["installs"] for r in doc["results"]}["PER"] == 0
    assert "PER/GREEDY" not in doc["ratios"] and "OPT/GREEDY" in doc["ratios"]


def test_opt_beats_greedy_under_contention(instance):
    net, fl, cand = instance
    g = simulate(net, fl, "GREEDY", cand=cand)
    o = simulate(net, fl, "OPT", cand=cand, opt_epoch=0.25)
    assert g.allocated_bytes_fraction < 0.99  # the instance is contended
    assert o.satisfaction > g.satisfaction


def test_everything_fits_with_ample_capacity():
    net = generate_network(2, 4, 2, seed=1, scale=100.0)
    fl = generate_flows(net, rate=20.0, duration=2.0, seed=1)
    for pol in ("GREEDY", "PER"):
        r = simulate(net, fl, pol, period=0.5)
        assert r.allocated_bytes_fraction == pytest.approx(1.0, abs=1e-6)


def test_deterministic_for_a_seed(instance):
    net, fl, cand = instance
    a = simulate(net, fl, "GREEDY", cand=cand).allocated_bytes_fraction
    fl2 = generate_flows(net, rate=40.0, duration=4.0, seed=4)
    assert np.array_equal(fl.arrival, fl2.arrival)
    assert simulate(net, fl2, "GREEDY").allocated_bytes_fraction == pytest.approx(a)


def test_invalid_parameters(instance):
    net, fl, cand = instance
    with pytest.raises(InvalidInputError):
        simulate(net, fl, "PER", cand=cand, period=0)
    with pytest.raises(InvalidInputError):
        generate_flows(net, rate=-1, duration=1)


def test_cli_otter_sim_writes_json(tmp_path, capsys):
    out = tmp_path / "o.json"
    rc = main(["pce", "otter-sim", "--sources", "2", "--dests", "4", "--paths", "2", "--rate", "1000",
               "--duration", "2", "--scale", "0.02", "--policies", "GREEDY,PER+PATHPIN,OPT", "--quiet",
               "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert [r["policy"] for r in doc["results"]] == ["GREEDY", "PER+PATHPIN", "OPT"]
    assert "PER+PATHPIN/GREEDY" in doc["ratios"] and doc["effective_rate"] == pytest.approx(20.0)
    assert "allocated bytes" in capsys.readouterr().out


def test_cli_otter_solve_and_errors(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["pce", "otter-solve", "--sources", "2", "--dests", "4", "--paths", "2", "--flows", "50",
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["columns"] > 0 and doc["objective"] > 0
    assert main(["pce", "otter-sim", "--policies", "SMART", "--quiet"]) == 2
    assert "unknown policy" in capsys.readouterr().err
    assert main(["pce", "otter-sim", "--scale", "-1", "--quiet"]) == 2
    assert main(["pce", "otter-sim", "--solve-delay", "soon", "--quiet", "--rate", "10"]) == 2
