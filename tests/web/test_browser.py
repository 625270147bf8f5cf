"""The web UI in headless Debian chromium (Playwright): log in, create a reservation through the
form, find it in the list, open its page with the path drawn, modify it (a rejected change shows
its error next to the field), commit, clone it into a new form, cancel it. Screenshots of every page
go to ``test-artifacts/web/``; the server is the real ``mlte web`` command (waitress)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.db.engine import Database
from app.db.feed import Feed
from app.db.migrate import open_migrated
from tests.lib.monitor_feed import MonitorFeed, fig2_lit
from tests.lib.webserver import create_user_cli, serve_cli
from tests.web.conftest import ARTIFACTS, shot

pytestmark = pytest.mark.browser


def test_reserve_and_cancel_in_the_browser(tmp_path, browser_page) -> None:  # noqa: ANN001
    (ARTIFACTS / "failure.png").unlink(missing_ok=True)  # a stale one would suggest this run failed
    try:
        _scenario(tmp_path, browser_page)
    except BaseException:
        shot(browser_page, "failure")  # what the page showed when it went wrong
        raise


def _scenario(tmp_path: Path, page) -> None:  # noqa: ANN001
    db = str(tmp_path / "ui.db")
    create_user_cli(db, "ada", password="ada-secret")
    with serve_cli(db, log_path=tmp_path / "server.log") as url:
        # what the controller would write: a circuit and events (topology_publisher, through Feed), utilization
        # samples of the path's first links (its monitor app, through MonitorStore)
        feed = Feed(Database(db))
        try:
            feed.circuit("A-C via X,Z", "A:3", "C:1", 10.0, [("X", 1, 3), ("Z", 3, 2)])
            feed.event("circuit.up", "circuit A-C via X,Z is up")
        finally:
            feed.db.dispose()
        # the monitor's series of the circuit A:3–C:1 the reservation's path A → X → Z → C becomes
        mon = MonitorFeed(db, fig2_lit(("A", 3, "C", 1)))
        now = time.time()
        try:
            for i in range(30):
                mon.tick(now - 60 + 2 * i, {"packet:A:3-C:1": 2.0 + (i % 7) * 0.8})
        finally:
            mon.close()

        page.goto(f"{url}/reservations")
        assert "/login" in page.url
        page.fill("#username", "ada")
        page.fill("#password", "ada-secret")
        shot(page, "01-login")
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{url}/reservations")

        page.click("text=New reservation")
        page.fill("#name", "browser backup")
        page.fill("#src", "A:1")
        page.fill("#dst", "C:3")
        page.fill("#bandwidth", "4")
        page.fill("#start", time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 3600)))
        page.fill("#end", time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 7200)))
        page.click("#whatif-btn")
        page.wait_for_selector("#whatif-result:has-text('Mbit/s available')")
        assert "A → X:" in page.inner_text("#whatif-result")
        shot(page, "02-form")
        page.click("#reservation-form button[type=submit]")
        page.wait_for_selector("#res-state")
        assert page.inner_text("#res-state") == "HELD"
        detail_url = page.url

        page.click("text=Reservations")
        row = page.locator("#reservation-list tbody tr", has_text="browser backup")
        assert row.count() == 1 and "HELD" in row.inner_text()
        shot(page, "03-list")
        page.fill("input[name=endpoint]", "C:4")  # the filter form: another port → no match
        page.click(".filters button[type=submit]")
        page.wait_for_selector("#reservation-list td.empty")
        page.fill("input[name=endpoint]", "C:3")
        page.select_option("select[name=state]", "HELD")
        page.click(".filters button[type=submit]")
        row = page.locator("#reservation-list tbody tr", has_text="browser backup")
        assert row.count() == 1 and "endpoint=C%3A3" in page.url and "state=HELD" in page.url

        row.locator("a").first.click()
        page.wait_for_url(detail_url)
        assert page.locator("svg.topology .edge.on-path").count() >= 3
        assert page.locator("svg.topology .node.on-path").count() >= 2
        page.wait_for_selector("#chart polyline.series")  # live chart drew the samples
        assert int(page.get_attribute("#chart", "data-samples")) > 0
        shot(page, "04-detail")

        # modify: too much bandwidth is refused next to the field, then a feasible change is applied
        page.fill("#modify-bandwidth", "5000")
        page.click("#modify-btn")
        page.wait_for_selector("#modify-bandwidth-error")
        assert "not admitted" in page.inner_text("#modify-bandwidth-error")
        assert page.get_attribute("#modify-bandwidth", "aria-invalid") == "true"
        shot(page, "05-modify-rejected")
        new_end = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 9000))
        page.fill("#modify-bandwidth", "6")
        page.fill("#modify-end", new_end)
        page.click("#modify-btn")
        page.wait_for_url(detail_url)
        page.wait_for_selector(".flash.ok:has-text('modified')")
        assert "6 Mbit/s" in page.inner_text("table.kv")
        assert new_end.replace("T", " ") + ":00 UTC" in page.inner_text("table.kv")
        assert page.input_value("#modify-bandwidth") == "6"

        page.click("#commit-btn")
        page.wait_for_selector("#res-state:text('RESERVED')")
        shot(page, "06-modified-committed")

        # clone into a new form: the parameters are copied, the name marks the copy
        page.click("#clone-link")
        page.wait_for_selector("#reservation-form")
        assert page.input_value("#name") == "copy of browser backup"
        assert (page.input_value("#src"), page.input_value("#dst"), page.input_value("#bandwidth")) == \
            ("A:1", "C:3", "6")
        assert page.input_value("#end") == new_end
        shot(page, "07-clone-form")
        page.goto(detail_url)

        page.click("#cancel-btn")
        page.wait_for_selector("#res-state:text('CANCELLED')")
        assert page.locator("#cancel-btn").count() == 0
        shot(page, "08-cancelled")

        page.click("text=Topology")
        assert page.locator("svg.topology .band-optical").count() == 1
        assert page.locator("svg.topology .edge.circuit").count() >= 2
        shot(page, "09-topology")
        page.click("text=Events")
        assert page.locator("#event-list", has_text="cancelled by ada").count() == 1
        shot(page, "10-events")


def test_provisioning_lit_and_failed_in_the_browser(tmp_path, browser_page) -> None:  # noqa: ANN001
    """Two reservations whose window starts now: both show PROVISIONING (waiting for the controller);
    the controller lights one (its circuit and rules appear on its page) and fails the other (the
    reason is shown)."""
    try:
        _provisioning_scenario(tmp_path, browser_page)
    except BaseException:
        shot(browser_page, "failure-provisioning")
        raise


def _provisioning_scenario(tmp_path: Path, page) -> None:  # noqa: ANN001
    import requests

    from app.db.provisioning import ProvisioningStore
    from tests.lib.provisioning import installation

    db = str(tmp_path / "prov.db")
    token = create_user_cli(db, "bea", password="bea-secret")
    h = {"Authorization": f"Bearer {token}"}
    with serve_cli(db, log_path=tmp_path / "server.log") as url:
        now = time.time()
        ids = []
        for name, src, dst in (("lit", "A:1", "C:3"), ("broken", "A:2", "C:4")):
            body = {"name": name, "src": src, "dst": dst, "bandwidth": 2,
                    "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                    "end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 3600))}
            r = requests.post(f"{url}/api/v1/reservations", json=body, headers=h, timeout=30)
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
            assert requests.post(f"{url}/api/v1/reservations/{ids[-1]}/commit", headers=h, timeout=30).ok
        page.goto(f"{url}/login")
        page.fill("#username", "bea")
        page.fill("#password", "bea-secret")
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{url}/reservations")
        page.goto(f"{url}/reservations/{ids[0]}")
        assert page.inner_text("#res-state") == "PROVISIONING"
        assert "waiting for the controller" in page.inner_text("#res-provisioning")
        assert "No circuit recorded" in page.inner_text("#res-circuits")
        shot(page, "11-provisioning")

        store = ProvisioningStore(open_migrated(db))  # what the controller does once it has set the network up
        try:
            orders = {o.id: o for o in store.due(time.time())}
            assert set(orders) == set(ids)
            circuit, rules = installation(orders[ids[0]].path)
            assert store.mark_active(ids[0], circuit, rules, time.time())
            assert store.mark_failed(ids[1], "no free port on OTS Z for the second route", time.time())
        finally:
            store.db.dispose()
        page.reload()
        assert page.inner_text("#res-state") == "ACTIVE"
        assert page.locator("#res-circuits tbody tr", has_text="A:3-C:1").count() == 1
        assert page.locator("#res-rules tbody tr").count() == 2
        shot(page, "12-active")
        page.goto(f"{url}/reservations/{ids[1]}")
        assert page.inner_text("#res-state") == "FAILED"
        assert page.inner_text("#res-failure") == "no free port on OTS Z for the second route"
        assert page.locator("#cancel-btn").count() == 0
        shot(page, "13-failed")
