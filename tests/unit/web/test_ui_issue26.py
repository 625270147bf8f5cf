"""Issue 26 item 6, the pages a new user met: no 404 for the favicon, a 404 page that names the
missing reservation, and the topology page saying "built-in" (not "live") over the built-in lab."""
from __future__ import annotations

from tests.unit.web.conftest import login


def test_favicon_is_served_and_linked(ui) -> None:  # noqa: ANN001
    r = ui.get("/favicon.ico")
    assert r.status_code == 200 and r.mimetype == "image/svg+xml" and b"<svg" in r.data
    r.close()
    page = ui.get("/login").get_data(as_text=True)
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in page
    r = ui.get("/static/favicon.svg")
    assert r.status_code == 200
    r.close()


def test_missing_reservation_page_names_it(ui) -> None:  # noqa: ANN001
    login(ui)
    r = ui.get("/reservations/99999")
    assert r.status_code == 404 and "no reservation 99999" in r.get_data(as_text=True)


def test_topology_page_says_built_in_over_the_lab(ui) -> None:  # noqa: ANN001
    login(ui)
    page = ui.get("/topology").get_data(as_text=True)
    assert 'id="live-status" class="live-status" data-label="built-in">built-in</small>' in page
    assert ">live<" not in page
