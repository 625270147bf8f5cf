"""Error pages: HTML routes answer with a page that has the site's navigation and style (not
Werkzeug's bare page), also when the error breaks the page's own context; the API keeps JSON."""
from __future__ import annotations

import pytest

from tests.unit.web.conftest import login

NAV = ('<a href="/reservations">Reservations</a>', '<a href="/topology">Topology</a>', "style.css",
       'id="error-page"')


def _page(r, status: int) -> str:  # noqa: ANN001
    html = r.get_data(as_text=True)
    assert r.status_code == status and r.mimetype == "text/html", html[:200]
    for part in NAV:
        assert part in html, part
    return html


def test_not_found_pages_have_the_navigation(ui) -> None:  # noqa: ANN001
    assert "Not found" in _page(ui.get("/no/such/page"), 404)
    login(ui)
    html = _page(ui.get("/reservations/999999"), 404)
    assert "dora" in html and "Log out" in html  # the user's header, as on every page


def test_method_not_allowed_page_keeps_the_allow_header(ui) -> None:  # noqa: ANN001
    r = ui.delete("/topology")
    _page(r, 405)
    assert "GET" in r.headers["Allow"]


def test_internal_error_page_even_when_the_context_breaks(ui, app, monkeypatch) -> None:  # noqa: ANN001
    """The error page reads the user and topology source like every page; when that read is what
    fails, the page is rendered without them instead of falling back to the bare server page."""
    login(ui)

    def broken(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("database went away")

    monkeypatch.setattr(app.extensions["mlte"].topology, "describe", broken)
    html = _page(ui.get("/events"), 500)
    assert "internal error (logged)" in html and "database went away" not in html


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/reservations/999999"])
def test_api_errors_stay_json(client, users, path) -> None:  # noqa: ANN001
    r = client.get(path, headers=users.h("alice"))
    assert r.status_code == 404 and r.get_json()["error"]["status"] == 404


def test_api_internal_error_is_json(client, users, monkeypatch) -> None:  # noqa: ANN001
    def broken(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("boom")

    monkeypatch.setattr("app.web.monitor_read.merged_events", broken)
    r = client.get("/api/v1/events", headers=users.h("alice"))
    assert r.status_code == 500 and r.get_json()["error"]["message"] == "internal error (logged)"
