"""`mlte lab testbed --discover` from the command line (discovery + a circuit), end to end.

The CLI takes the machine-wide network lock itself, so this test must not hold it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from topology.compare import graph_diff, without_hosts
from topology.graph import MultiLayerGraph
from topology.spec import fig2_testbed, spec_to_graph

pytestmark = [pytest.mark.integration, pytest.mark.lab()]  # `mlte lab` itself: `make test-labs` runs it

ROOT = Path(__file__).resolve().parents[2]


def _bridges() -> set[str]:
    out = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True, timeout=30, check=True)
    return set(out.stdout.split())


@pytest.mark.timeout(600)
def test_lab_discover_with_circuit_writes_graph_and_png_and_cleans_up(tmp_path):
    before = _bridges()
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "lab", "testbed", "--discover", "--circuit", "initial",
         "--out", str(out)],
        capture_output=True, text=True, timeout=540, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "discovered graph = the fig2 spec" in proc.stdout
    assert "lab stopped" in proc.stdout

    graph = MultiLayerGraph.from_json((out / "topology.json").read_text())
    # the discovered optical domain and adaptations are the spec's; the circuit adds its XCONs and links
    assert graph_diff(without_hosts(graph), without_hosts(spec_to_graph(fig2_testbed())),
                      edge_kinds=("adaptation", "optical"), node_kinds=("packet", "optical", "oport")) == []
    active = sorted(k for k in graph.edges_of_kind("xcon") if graph.edge(k)["active"])
    assert active == ["xcon:X:1-X:2", "xcon:Y:1-Y:2", "xcon:Y:3-Y:4", "xcon:Z:1-Z:2"]  # the initial path
    assert sorted(sorted(graph.edge(k)["ports"].items()) for k in graph.edges_of_kind("packet")) == [
        [("A", 3), ("B", 1)], [("B", 2), ("C", 1)]]

    png = (out / "topology.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert json.loads((out / "scan.json").read_text())  # the scan's own record is written too

    assert _bridges() == before  # every bridge the lab made is gone
