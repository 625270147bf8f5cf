"""The xcon-downtime and big-vs-small lab files work as ``sudo mn --custom FILE --topo NAME``: loaded the
way ``mn`` loads a custom file (``exec`` of its text, no ``__file__``), each offers its Fig. 2 testbed,
which builds (not started: no root needed)."""
from __future__ import annotations

from pathlib import Path

import pytest

from topology.spec import fig2_testbed

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("path, name", [("mininet_labs/xcon_downtime.py", "xcon-downtime"),
                                        ("mininet_labs/big_vs_small.py", "big-vs-small")])
def test_the_lab_file_is_an_mn_custom_file_with_its_topology(path: str, name: str, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # mn is run from the project root with a relative path
    customs: dict = {}
    exec(compile((ROOT / path).read_text(), path, "exec"), customs, customs)  # what /usr/bin/mn does
    topo = customs["topos"][name]()
    spec = fig2_testbed()
    assert set(topo.switches()) == {s.name for s in spec.switches} | {o.name for o in spec.ots}
    assert set(topo.hosts()) == {h.name for h in spec.hosts}
    assert len(topo.links()) == len(spec.links)
    # the OTS nodes are agent-driven bridges and the ports follow the spec (A:3 faces X:1)
    assert topo.nodeInfo("Y")["cls"].__name__ == "OtsSwitch"
    assert (3, 1) in topo.port("A", "X")

    def adaptation_bw(t) -> float:  # A:3 - X:1, one ODU2 at the lab's unit
        return next(i["bw"] for a, b, i in t.links(withInfo=True) if {a, b} == {"A", "X"} and 3 in (i["port1"], i["port2"]))

    assert adaptation_bw(customs["topos"][name](unit_mbps=2)) == 2 * adaptation_bw(topo) == 20.0
