"""Fixtures of the PostgreSQL and browser tests of the reservation service (warnings are errors here):
the PostgreSQL server, a headless Debian chromium page (Playwright) and ``shot`` for screenshots."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lib.postgres import find_bindir, postgres_server
from tests.lib.webserver import ROOT


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    for item in items:
        if "/tests/web/" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings("error"))


@pytest.fixture(scope="session")
def pg():  # noqa: ANN201
    """One PostgreSQL server for the whole session (stopped and removed at the end)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb/pg_ctl) are not installed: apt-get install postgresql")
    with postgres_server(bindir) as server:
        yield server


CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "test-artifacts" / "web"


@pytest.fixture
def browser_page(tmp_path):  # noqa: ANN001, ANN201
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM, args=ARGS,
                                                   headless=True, viewport={"width": 1280, "height": 900})
        try:
            page = ctx.new_page()
            page.set_default_timeout(20_000)
            yield page
        finally:
            ctx.close()


def shot(page, name: str) -> Path:  # noqa: ANN001
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def browser_login(page, url: str, name: str, password: str) -> None:  # noqa: ANN001
    """Log in through the login form; the browser lands on the reservation list."""
    page.goto(f"{url}/login")
    page.fill("#username", name)
    page.fill("#password", password)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{url}/reservations")
