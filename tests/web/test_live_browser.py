"""The topology page live in headless chromium, over the real ``mlte web`` and a database into
which, during the test, the controller's writers put what they put there in a running system: a
circuit lit and released (``Feed.sync_circuits``, what ``topology_publisher`` calls) and utilization samples
(the monitor's own core and store, tests/lib/monitor_feed.py). The page is never reloaded."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.db.engine import Database
from app.db.feed import CircuitRecord, Feed
from tests.lib.monitor_feed import MonitorFeed, fig2_lit
from tests.lib.webserver import create_user_cli, serve_cli
from tests.web.conftest import browser_login, shot

pytestmark = pytest.mark.browser

KEY = "packet:A:3-B:1"  # the circuit A:3–B:1 over X, Y as the monitor keys it
LABEL = f'svg.topology .util-label[data-for="{KEY}"]'


def test_topology_shows_circuits_and_utilization_live(tmp_path, browser_page) -> None:  # noqa: ANN001
    try:
        _live_scenario(tmp_path, browser_page)
    except BaseException:
        shot(browser_page, "failure-live")
        raise


def _label_is(page, text: str) -> None:  # noqa: ANN001
    page.wait_for_function("([sel, text]) => (document.querySelector(sel) || {}).textContent === text",
                           arg=[LABEL, text])


def _live_scenario(tmp_path: Path, page) -> None:  # noqa: ANN001
    db = str(tmp_path / "live.db")
    create_user_cli(db, "ada", password="ada-secret")
    with serve_cli(db, log_path=tmp_path / "server.log") as url:
        browser_login(page, url, "ada", "ada-secret")
        page.goto(f"{url}/topology")
        assert page.inner_text("#circuit-list tbody") == "No circuit is lit."
        page.evaluate("window.__sameDocument = true")  # gone if anything reloads the page

        feed = Feed(Database(db))
        mon = MonitorFeed(db, fig2_lit(("A", 3, "B", 1)))
        try:
            assert mon.circuit_ids == [KEY]
            feed.sync_circuits([CircuitRecord("A:3", "B:1", 10.0, (("X", 1, 2), ("Y", 1, 2)))])
            row = page.locator("#circuit-list tbody tr[data-circuit]", has_text="A:3-B:1 via X,Y")
            row.wait_for()
            assert page.locator(f'svg.topology .edge.circuit-link[data-key="{KEY}"]').count() == 1
            assert page.locator('svg.topology .edge.circuit[data-key="xcon:X:1-X:2"]').count() == 1

            mon.tick(time.time(), {KEY: 1.0})
            _label_is(page, "1.00 Mbit/s")
            assert page.locator(f'#chart polyline.series[data-link="{KEY}"]').count() == 1
            # 1 Mbit/s at the top: the y ticks read 0, 0.25, 0.5, 0.75, 1 (not 0.3 and 0.8)
            assert page.locator("#chart text.ytick").all_text_contents() == ["0", "0.25", "0.5", "0.75", "1"]
            assert "util-low" in page.get_attribute(f'svg.topology .edge[data-key="{KEY}"]', "class")
            shot(page, "20-live-low")

            mon.tick(time.time(), {KEY: 7.5})  # 75 % of the 10 Mbit/s circuit: over the growth threshold
            _label_is(page, "7.50 Mbit/s")
            assert "util-high" in page.get_attribute(f'svg.topology .edge[data-key="{KEY}"]', "class")
            assert page.inner_text(f'#circuit-list td.util-cell[data-for="{KEY}"]') == "7.50 Mbit/s (75 %)"
            shot(page, "21-live-high")

            feed.sync_circuits([])  # the TE loop released it: topology_publisher finds no lit chain any more
            row.wait_for(state="detached")
            page.wait_for_selector(f'svg.topology .edge[data-key="{KEY}"]', state="detached")
            assert page.locator('svg.topology .edge[data-key="xcon:X:1-X:2"]').count() == 0
            assert page.inner_text("#circuit-list tbody") == "No circuit is lit."
            assert "Released recently (1)" in page.inner_text("#released-circuits summary")
        finally:
            mon.close()
            feed.db.dispose()
        assert page.evaluate("window.__sameDocument") is True
        shot(page, "22-live-released")
