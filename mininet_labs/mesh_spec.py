"""``mesh6``: a two-site multi-layer mesh for comparing placement policies, as plain data.

Why another topology: on the Fig. 2 testbed an elephant from A to C has exactly one way out (the
circuit A:4–C:2), so every placement policy takes it. Here each site pair has a lit circuit, a
second lit path over the other pair's circuit, and dark circuits to light — the policies can part.

Four packet switches and two virtual OTS (six datapaths, small enough for userspace OVS on two
cores; every link 10 Mbit/s at unit 1):

* west site: A, B (copper A:5–B:5) on OTS X; east site: C, D (copper C:5–D:5) on OTS Y;
* each switch has two ODU2 uplinks (port 3 lit at the start, port 4 dark) into its site's OTS;
  three ODU2 fibres X:5–Y:5, X:6–Y:6, X:7–Y:7;
* lit at the start (:data:`MESH6_CIRCUITS`): ``ac`` = A:3–C:3 over fibre 5, ``bd`` = B:3–D:3 over
  fibre 6; dark: any west uplink 4 to any east uplink 4 over fibre 7, or A:4–B:4 / C:4–D:4 in one OTS;
* hosts h1, h2 on A (ports 1, 2), h3, h4 on C, h5 on B, h6 on D (IP 10.0.0.N, MAC ..:0N).

Also a ``mn`` custom file (``--topo mesh6``), like :mod:`mininet_labs.testbed`.
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

_ROOT = str(Path(inspect.currentframe().f_code.co_filename).resolve().parents[1])  # type: ignore[union-attr]
if _ROOT not in sys.path:  # ``mn`` execs this file: make the project importable
    sys.path.insert(0, _ROOT)

try:  # Mininet present: the testbed module (which also puts the project's .venv on sys.path under ``mn``)
    from mininet_labs import testbed
except ImportError:  # no Mininet: the spec alone
    testbed = None

from topology import granularity as gran  # noqa: E402
from topology.spec import HostSpec, LabSpec, LinkSpec, OtsSpec, SwitchSpec  # noqa: E402

#: name -> [(ots, in_port, out_port), ...] of the circuits lit at the start
MESH6_CIRCUITS: dict[str, list[tuple[str, int, int]]] = {
    "ac": [("X", 1, 5), ("Y", 5, 1)],
    "bd": [("X", 3, 6), ("Y", 6, 3)],
}
#: The packet links (switch, port, switch, port) those circuits make, plus the copper ones.
MESH6_CIRCUIT_LINKS: dict[str, list[tuple[str, int, str, int]]] = {"ac": [("A", 3, "C", 3)], "bd": [("B", 3, "D", 3)]}
MESH6_COPPER = [("A", 5, "B", 5), ("C", 5, "D", 5)]


def mesh6(unit_mbps: float = 1.0) -> LabSpec:
    """The ``mesh6`` lab (see the module docstring)."""
    odu2 = gran.capacity_mbps("ODU2", unit_mbps)
    switches = tuple(SwitchSpec(n, d) for n, d in (("A", 0xA1), ("B", 0xB1), ("C", 0xC1), ("D", 0xD1)))
    ots = (OtsSpec("X", 0x0F01, {p: "ODU2" for p in range(1, 8)}),
           OtsSpec("Y", 0x0F02, {p: "ODU2" for p in range(1, 8)}))
    hosts = tuple(HostSpec(f"h{i}", sw, port, f"10.0.0.{i}", f"00:00:00:00:00:{i:02x}")
                  for i, (sw, port) in enumerate((("A", 1), ("A", 2), ("C", 1), ("C", 2), ("B", 1), ("D", 1)), 1))
    links = [LinkSpec(h.name, 0, h.switch, h.port, "access", 2 * odu2) for h in hosts]
    links += [LinkSpec(a, ap, b, bp, "packet", odu2) for a, ap, b, bp in MESH6_COPPER]
    for sw, ots_name, first in (("A", "X", 1), ("B", "X", 3), ("C", "Y", 1), ("D", "Y", 3)):
        links += [LinkSpec(sw, 3, ots_name, first, "adaptation", odu2),
                  LinkSpec(sw, 4, ots_name, first + 1, "adaptation", odu2)]
    links += [LinkSpec("X", p, "Y", p, "optical", odu2) for p in (5, 6, 7)]
    return LabSpec("mesh6", switches, ots, hosts, tuple(links), unit_mbps)


if testbed is not None:  # ``mn --custom mininet_labs/mesh_spec.py --topo mesh6``
    class Mesh6Topo(testbed.SpecTopo):
        """``--topo mesh6`` (``--topo mesh6,unit_mbps=2`` scales it)."""

        def build(self, unit_mbps: float = 1.0, **kwargs) -> None:  # type: ignore[override]
            super().build(spec=mesh6(float(unit_mbps)), **kwargs)

    topos = {"mesh6": Mesh6Topo}
else:
    topos = {}
