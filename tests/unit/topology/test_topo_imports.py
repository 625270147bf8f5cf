"""topology/ (the lab specs of topology.spec included) is a plain library: no os-ken, no Flask, no app/."""
from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
import topology, topology.graph, topology.granularity, topology.merge, topology.compare
import topology.vendor_file, topology.capabilities, topology.draw, topology.errors
import topology.spec
from topology.spec import fig2_testbed, spec_to_graph
from topology.draw import draw_png
import tempfile, os
g = spec_to_graph(fig2_testbed())
draw_png(g, os.path.join(tempfile.mkdtemp(), "x.png"))
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("os_ken", "flask", "app", "mininet", "eventlet"))
print(",".join(bad))
"""


def test_no_controller_or_web_imports():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == ""
