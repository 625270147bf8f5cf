"""50 parallel creates at the last capacity against a live waitress server on SQLite: exactly the
feasible number win (SQLite ``BEGIN IMMEDIATE`` write lock), the rest get 409, nothing overbooks."""
from __future__ import annotations

import pytest

from app.web import create_app
from app.web.auth import create_user
from tests.lib.webrace import check_race, scenario_topology


@pytest.mark.parametrize("scenario", ["packet-line", "fig2"])
def test_race_sqlite(tmp_path, scenario) -> None:  # noqa: ANN001
    app = create_app({"DATABASE": str(tmp_path / "race.db"), "TOPOLOGY": scenario_topology(tmp_path, scenario),
                      "SECRET_KEY": "x"})
    with app.extensions["mlte"].db.session() as s:
        _, token = create_user(s, "racer")
        s.commit()
    check_race(app, token, scenario)
