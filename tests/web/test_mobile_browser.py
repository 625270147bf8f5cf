"""The UI on a phone (375×667, headless chromium): no page scrolls sideways — wide tables scroll
inside their own box — and the list, topology and form stay usable."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from tests.lib.webserver import create_user_cli, serve_cli
from tests.web.conftest import browser_login, shot

pytestmark = pytest.mark.browser

OVERFLOW = "document.documentElement.scrollWidth <= window.innerWidth"


def test_pages_fit_a_phone(tmp_path: Path, browser_page) -> None:  # noqa: ANN001
    page = browser_page
    db = str(tmp_path / "phone.db")
    token = create_user_cli(db, "ada", password="ada-secret")
    with serve_cli(db, log_path=tmp_path / "server.log") as url:
        now = time.time()
        body = {"name": "a reservation with a long name to wrap on a phone", "src": "A:1", "dst": "C:3",
                "src_vlan": 100, "dst_vlan": 200, "bandwidth": 2.5, "description": "x" * 120,
                "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 600)),
                "end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 4200))}
        r = requests.post(f"{url}/api/v1/reservations", json=body, headers={"Authorization": f"Bearer {token}"},
                          timeout=30)
        assert r.status_code == 201, r.text
        res_id = r.json()["id"]
        page.set_viewport_size({"width": 375, "height": 667})
        browser_login(page, url, "ada", "ada-secret")
        for name, path in (("detail", f"/reservations/{res_id}"), ("list", "/reservations"),
                           ("topology", "/topology"), ("form", "/reservations/new"), ("events", "/events")):
            page.goto(url + path)
            page.wait_for_load_state("load")
            shot(page, f"30-phone-{name}")
            widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert page.evaluate(OVERFLOW), f"{path} scrolls sideways on a phone: {widths}"
        # still usable: the list's row links to the detail page, the topology is drawn within the screen
        page.goto(url + "/reservations")
        page.locator("#reservation-list tbody a").first.click()
        page.wait_for_url(f"{url}/reservations/{res_id}")
        # the list says that more columns are a swipe away (issue 26 item 6)
        page.goto(url + "/reservations")
        assert page.locator("#list-scroll-hint").is_visible()
        assert page.evaluate("(e => e.scrollWidth > e.clientWidth)(document.querySelector('#reservation-list')"
                             ".parentElement)")
        # the drawing keeps a readable size and scrolls in its own box; the legend wraps, nothing cut
        page.goto(url + "/topology")
        box = page.locator("svg.topology").bounding_box()
        assert box is not None and box["width"] >= 720
        assert page.evaluate("(e => e.scrollWidth > e.clientWidth && e.clientWidth <= 375)"
                             "(document.querySelector('.drawing-scroll'))")
        assert page.locator(".scroll-hint").first.is_visible()
        assert page.evaluate(OVERFLOW)
        items = page.locator(".legend .item")
        for i in range(items.count()):
            item = items.nth(i).bounding_box()
            assert item is not None and item["x"] >= 0 and item["x"] + item["width"] <= 375, items.nth(i).inner_text()
        assert "red ≥ 70%)" in page.inner_text(".legend")
