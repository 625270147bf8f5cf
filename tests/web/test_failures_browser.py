"""A fibre cut as the web shows it, in headless chromium over the real ``mlte web --topology controller``
(issue 23 item 6): the controller's snapshot marks the fibre X:3–Z:3 and its ports failed
(``topology_publisher.mark_failures``, as it publishes them); the open topology page draws the fibre
red and dashed and the ports ringed, with the reason as their tooltip, a legend entry and a "Failed
now" list — and drops the marks when a repaired snapshot arrives, without a reload. Then the
reservation the cut broke: RESTORING, then ACTIVE again with its restoration (old → new path, the
fibre it left struck out)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.controller.failures import Failures
from app.controller.topology_publisher import mark_failures
from app.db.engine import Database
from app.db.feed import Feed
from app.db.migrate import open_migrated
from tests.lib.webserver import create_user_cli, serve_cli
from tests.web.conftest import browser_login, shot
from topology.spec import fig2_testbed, spec_to_graph

pytestmark = pytest.mark.browser

FIBRE = 'svg.topology .edge[data-key="optical:X:3-Z:3"]'
CUT = {("X", 3): "loss of light at X:3", ("Z", 3): "loss of light at Z:3"}
DETOUR = ["access:A:1-h1", "adaptation:A:4-X:4", "xcon:X:4-X:5", "optical:X:5-Z:5", "xcon:Z:4-Z:5",
          "adaptation:C:2-Z:4", "access:C:3-h3"]
NODES = ["A", "X:4", "X:5", "Z:5", "Z:4", "C"]


def test_a_cut_fibre_is_drawn_failed_and_the_restoration_listed(tmp_path, browser_page) -> None:  # noqa: ANN001
    try:
        _scenario(tmp_path, browser_page)
    except BaseException:
        shot(browser_page, "failure-fibre-cut")
        raise


def _style(page, selector: str, prop: str) -> str:  # noqa: ANN001
    return page.eval_on_selector(selector, f"e => getComputedStyle(e).{prop}")


def _scenario(tmp_path: Path, page) -> None:  # noqa: ANN001
    import requests

    from app.db.provisioning import ProvisioningStore
    from tests.lib.provisioning import installation

    db = str(tmp_path / "cut.db")
    token = create_user_cli(db, "ada", password="ada-secret")
    feed = Feed(Database(db))
    try:
        feed.topology(spec_to_graph(fig2_testbed()).to_dict())
        with serve_cli(db, log_path=tmp_path / "server.log", extra=["--topology", "controller"]) as url:
            h = {"Authorization": f"Bearer {token}"}
            now = time.time()
            body = {"name": "cut me", "src": "A:1", "dst": "C:3", "bandwidth": 2,
                    "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                    "end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 3600))}
            r = requests.post(f"{url}/api/v1/reservations", json=body, headers=h, timeout=30)
            assert r.status_code == 201, r.text
            rid = r.json()["id"]
            assert requests.post(f"{url}/api/v1/reservations/{rid}/commit", headers=h, timeout=30).ok

            browser_login(page, url, "ada", "ada-secret")
            page.goto(f"{url}/topology")
            assert "failed" not in page.get_attribute(FIBRE, "class")
            assert page.locator("#legend-failed").count() == 0
            page.evaluate("window.__sameDocument = true")  # gone if anything reloads the page

            feed.topology(mark_failures(spec_to_graph(fig2_testbed()).to_dict(), Failures(CUT)))  # the cut
            page.wait_for_selector(f"{FIBRE}.failed")  # the live part's next poll
            assert _style(page, FIBRE, "stroke") == "rgb(208, 49, 45)"
            assert _style(page, FIBRE, "strokeDasharray") not in ("none", "")
            assert "failed: loss of light at" in page.text_content(f"{FIBRE} title")
            assert "failed" not in page.get_attribute('svg.topology .edge[data-key="optical:X:5-Z:5"]', "class")
            port = 'svg.topology .node-oport[data-id="X:3"]'
            assert "failed" in page.get_attribute(port, "class")
            assert page.locator(f"{port} circle.fail-ring").is_visible()
            assert page.text_content(f"{port} > title") == "X:3 (oport, ODU2) — failed: loss of light at X:3"
            assert page.locator("#legend-failed").is_visible()
            assert page.locator("#failure-list tbody tr", has_text="fibre X:3–Z:3").count() == 1
            shot(page, "30-fibre-cut")

            feed.topology(spec_to_graph(fig2_testbed()).to_dict())  # repaired
            page.wait_for_selector(f"{FIBRE}.failed", state="detached")
            assert page.locator("svg.topology .fail-ring").count() == 0
            assert page.locator("#failure-list").count() == 0
            assert page.evaluate("window.__sameDocument") is True

            store = ProvisioningStore(open_migrated(db))  # the controller lights it, the cut breaks it, it restores it
            try:
                order = {o.id: o for o in store.due(time.time())}[rid]
                circuit, rules = installation(order.path)
                assert store.mark_active(rid, circuit, rules, time.time())
                t = time.time()
                assert store.mark_restoring(rid, "loss of light at X:3", t)
                page.goto(f"{url}/reservations?state=RESTORING")
                assert page.inner_text(f'#reservation-list tr[data-id="{rid}"] .state') == "RESTORING"
                assert _style(page, f'#reservation-list tr[data-id="{rid}"] .state', "backgroundColor") == \
                    "rgb(255, 225, 166)"  # amber
                page.goto(f"{url}/reservations/{rid}")
                assert "loss of light at X:3" in page.inner_text("#res-restoring")
                shot(page, "31-restoring")
                new, _ = installation({**order.path, "edges": DETOUR, "xcons": [["X:4", "X:5"], ["Z:5", "Z:4"]]})
                assert store.mark_restored(rid, [new], rules, {**order.path, "edges": DETOUR, "nodes": NODES},
                                           {"cause": "loss of light at X:3", "detected_ts": t, "started_ts": t,
                                            "old_path": order.path["edges"], "new_path": DETOUR}, t + 0.45)
            finally:
                store.db.dispose()
            page.reload()
            assert page.inner_text("#res-state") == "ACTIVE"
            row = page.locator('#restoration-list tr[data-outcome="restored"]')
            assert row.count() == 1 and "loss of light at X:3" in row.inner_text()
            assert "0.45 s" in row.inner_text()
            gone = row.locator(".old-path .fibre-gone[title='optical:X:3-Z:3']")
            assert gone.inner_text().strip() == "⇒"
            assert "line-through" in gone.evaluate("e => getComputedStyle(e).textDecorationLine")
            assert row.locator(".new-path .fibre-new[title='optical:X:5-Z:5']").count() == 1
            shot(page, "32-restored")
    finally:
        feed.db.dispose()
