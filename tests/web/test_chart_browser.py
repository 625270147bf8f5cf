"""The utilization chart (static/chart.js) in headless chromium, fed through a routed API: two
circuits at the same rate draw the same line, so the second is dashed (and its legend key too)
and the first still shows through the gaps (issue 26 item 6)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHART_JS = Path(__file__).resolve().parents[2] / "app" / "web" / "static" / "chart.js"
PAGE = """<!doctype html><html><body>
<div id="chart" data-links='["packet:A:3-C:1", "packet:A:4-C:2"]' data-api="/api/v1/utilization"></div>
<script src="/static/chart.js"></script></body></html>"""


def test_equal_rates_stay_distinguishable(browser_page) -> None:  # noqa: ANN001
    points = [{"time": f"2026-11-27T20:00:0{i}Z", "mbps": 5.0, "utilization": 0.5} for i in range(5)]
    series = {"packet:A:3-C:1": points, "packet:A:4-C:2": points}

    def serve(route) -> None:  # noqa: ANN001
        url = route.request.url
        if url.endswith("/static/chart.js"):
            route.fulfill(body=CHART_JS.read_text(), content_type="text/javascript")
        elif "/api/v1/utilization" in url:
            route.fulfill(body=json.dumps({"series": series, "as_of": points[-1]["time"]}),
                          content_type="application/json")
        else:
            route.fulfill(body=PAGE, content_type="text/html")

    page = browser_page
    page.route("http://mlte.test/**", serve)
    page.goto("http://mlte.test/topology")
    page.wait_for_selector("#chart polyline.series >> nth=1", state="attached")
    lines = page.locator("#chart polyline.series")
    first, second = lines.nth(0), lines.nth(1)
    assert first.get_attribute("points") == second.get_attribute("points")  # the same line...
    assert first.get_attribute("stroke") != second.get_attribute("stroke")
    assert first.get_attribute("stroke-dasharray") is None
    dash = second.get_attribute("stroke-dasharray")
    assert dash  # ...but the one on top has gaps the other shows through
    keys = page.locator(".chart-legend span line")
    assert keys.count() == 2 and keys.nth(1).get_attribute("stroke-dasharray") == dash
