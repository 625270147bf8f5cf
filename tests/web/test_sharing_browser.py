"""Who rides each circuit, live in headless chromium over the real ``mlte web --grooming``: three VLAN
reservations admitted on one circuit and lit (recorded as the controller records them) appear in the
topology page's "Who rides each circuit" table as one circuit shared by three with 1 Mbit/s free; one
cancelled and released, the same row says two riders and 4 Mbit/s free — without a reload."""
from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from app.db.migrate import open_migrated
from app.db.provisioning import ProvisioningStore
from tests.lib.provisioning import light
from tests.lib.webrace import iso
from tests.lib.webserver import create_user_cli, serve_cli
from tests.web.conftest import browser_login, shot

pytestmark = pytest.mark.browser

ROW = '#sharing-list tr[data-link="packet:A:3-C:1"]'


def _post(url: str, token: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body or {}).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_the_topology_page_follows_who_rides_a_shared_circuit(tmp_path: Path, browser_page) -> None:  # noqa: ANN001
    try:
        _scenario(tmp_path, browser_page)
    except BaseException:
        shot(browser_page, "failure-sharing")
        raise


def _scenario(tmp_path: Path, page) -> None:  # noqa: ANN001
    db = str(tmp_path / "sharing.db")
    token = create_user_cli(db, "ada", password="ada-secret")
    with serve_cli(db, log_path=tmp_path / "server.log", extra=["--grooming"]) as url:
        browser_login(page, url, "ada", "ada-secret")
        page.goto(f"{url}/topology")
        assert page.locator("#sharing-list").count() == 0  # nothing lit, nobody rides anything
        page.evaluate("window.__sameDocument = true")
        now = time.time()
        ids = []
        for i in range(3):  # started a few seconds ago: due at once
            r = _post(url, token, "/api/v1/reservations",
                      {"name": f"g{i}", "src": "A:1", "dst": "C:3", "bandwidth": 3.0, "start": iso(now - 5),
                       "end": iso(now + 3600), "src_vlan": 100 + i, "dst_vlan": 100 + i})
            ids.append(r["id"])
            _post(url, token, f"/api/v1/reservations/{r['id']}/commit")
        for rid in ids:
            assert light(db, rid, time.time())
        row = page.locator(ROW)
        row.wait_for()
        assert row.get_attribute("data-riders") == ",".join(map(str, ids))
        assert "shared by 3" in row.inner_text() and row.locator("td.free").inner_text() == "1"
        assert "VLAN 100" in row.inner_text() and "VLAN 102" in row.inner_text()
        shot(page, "30-sharing-three")
        _post(url, token, f"/api/v1/reservations/{ids[0]}/cancel")
        store = ProvisioningStore(open_migrated(db))
        try:
            assert [i.reservation_id for i in store.to_release()] == [ids[0]]
            assert store.mark_released(ids[0], time.time())
        finally:
            store.db.dispose()
        page.wait_for_selector(f'{ROW}[data-riders="{ids[1]},{ids[2]}"]')  # the next poll, no reload
        assert "shared by 2" in row.inner_text() and row.locator("td.free").inner_text() == "4"
        assert page.evaluate("window.__sameDocument") is True
        shot(page, "31-sharing-two")
