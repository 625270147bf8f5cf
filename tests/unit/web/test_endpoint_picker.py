"""The reservation form's endpoint picker lists the served topology's hosts and switch ports."""
from __future__ import annotations

import re

from app.web import create_app
from app.web.auth import create_user
from app.web.topology_source import endpoint_choices
from tests.lib.monitor_feed import fig2_lit
from tests.unit.web.conftest import login


def _options(html: str, picker: str) -> list[tuple[str, str]]:
    select = re.search(rf'<select class="endpoint-picker" id="{picker}".*?</select>', html, re.S).group(0)
    return re.findall(r'<option value="([^"]+)">([^<]+)</option>', select)


def test_choices_name_what_is_attached() -> None:
    choices = endpoint_choices(fig2_lit(("A", 5, "B", 5)))
    hosts = [(c["value"], c["label"]) for c in choices if c["group"] == "hosts"]
    assert hosts == [("A:1", "h1 (at A:1)"), ("A:2", "h2 (at A:2)"), ("C:3", "h3 (at C:3)"), ("C:4", "h4 (at C:4)")]
    ports = {c["value"]: c["label"] for c in choices if c["group"] == "ports"}
    assert ports["A:3"] == "A:3 — optical port X:1" and ports["A:5"] == "A:5 — packet link to B:5"
    assert ports["C:3"] == "C:3 — host h3" and "X:1" not in ports  # optical ports are no endpoints


def test_form_offers_the_topology_and_typing_still_works(ui) -> None:  # noqa: ANN001
    login(ui)
    html = ui.get("/reservations/new").get_data(as_text=True)
    for picker in ("src-picker", "dst-picker"):
        options = _options(html, picker)
        assert ("A:1", "h1 (at A:1)") in options and ("C:2", "C:2 — optical port Z:4") in options
    assert 'list="endpoint-list"' in html and 'name="src"' in html and "endpoints.js" in html
    assert 'name="src-picker"' not in html  # the picker is not submitted: the field is what counts


def test_no_topology_no_choices(tmp_path) -> None:  # noqa: ANN001
    app = create_app({"DATABASE": str(tmp_path / "w.db"), "TOPOLOGY": "controller", "TESTING": True,
                      "SECRET_KEY": "t"})
    try:
        with app.extensions["mlte"].db.session() as s:
            create_user(s, "dora", password="dora-pw")
            s.commit()
        c = app.test_client()
        login(c)
        html = c.get("/reservations/new").get_data(as_text=True)
        assert "(no topology to pick from)" in html and _options(html, "src-picker") == []
    finally:
        app.extensions["mlte"].db.dispose()
