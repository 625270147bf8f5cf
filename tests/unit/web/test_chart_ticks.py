"""The chart's y ticks (``static/chart.js`` ``niceTicks``), run in node: nice values with the
precision they need (0.25/0.75, not 0.3/0.8 rounded to one decimal)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

CHART = Path(__file__).resolve().parents[3] / "app" / "web" / "static" / "chart.js"


def ticks(vmax: float) -> list[str]:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed (apt-get install nodejs); the browser test checks the ticks too")
    script = f"const c = require({json.dumps(str(CHART))}); console.log(JSON.stringify(c.niceTicks({vmax})));"
    out = subprocess.run([node, "-e", script], check=True, capture_output=True, text=True, timeout=30).stdout
    return [t["label"] for t in json.loads(out)]


@pytest.mark.parametrize(("vmax", "labels"), [
    (1.0, ["0", "0.25", "0.5", "0.75", "1"]),
    (0.9, ["0", "0.25", "0.5", "0.75", "1"]),
    (7.5, ["0", "2", "4", "6", "8"]),
    (10.0, ["0", "2.5", "5", "7.5", "10"]),
    (0.012, ["0", "0.005", "0.01", "0.015"]),
    (950.0, ["0", "250", "500", "750", "1000"]),
    (0.0, ["0", "0.25", "0.5", "0.75", "1"]),  # no samples: a unit axis
])
def test_nice_ticks(vmax: float, labels: list[str]) -> None:
    assert ticks(vmax) == labels
