"""The reservation form's endpoint pickers in headless chromium: a host and a port picked from the
topology fill the fields, typing still works (and the picker follows it), and the reservation is held."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.lib.webserver import create_user_cli, serve_cli
from tests.web.conftest import browser_login, shot

pytestmark = pytest.mark.browser


def test_pick_endpoints_from_the_topology(tmp_path: Path, browser_page) -> None:  # noqa: ANN001
    page = browser_page
    db = str(tmp_path / "form.db")
    create_user_cli(db, "ada", password="ada-secret")
    with serve_cli(db, log_path=tmp_path / "server.log") as url:
        browser_login(page, url, "ada", "ada-secret")
        page.goto(f"{url}/reservations/new")
        page.select_option("#src-picker", label="h1 (at A:1)")
        page.select_option("#dst-picker", label="C:3 — host h3")
        assert (page.input_value("#src"), page.input_value("#dst")) == ("A:1", "C:3")
        page.fill("#src", "A:2")  # typing still works, and the picker shows what was typed
        page.dispatch_event("#src", "input")
        assert page.eval_on_selector("#src-picker", "s => s.selectedOptions[0].text") == "h2 (at A:2)"
        page.fill("#src", "Q:9")  # not in the topology: the picker lets go, the field keeps it
        page.dispatch_event("#src", "input")
        assert page.input_value("#src-picker") == "" and page.input_value("#src") == "Q:9"
        page.select_option("#src-picker", label="h1 (at A:1)")
        page.fill("#name", "picked")
        page.fill("#bandwidth", "3")
        page.fill("#end", time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 7200)))
        shot(page, "40-form-picked")
        page.click("#reservation-form button[type=submit]")
        page.wait_for_selector("#res-state")
        assert page.inner_text("#res-state") == "HELD"
        kv = page.inner_text("table.kv")
        assert "Source\tA:1" in kv and "Destination\tC:3" in kv
