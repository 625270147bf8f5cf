"""50 parallel creates at the last capacity against a live waitress server on SQLite: exactly the
feasible number win (SQLite ``BEGIN IMMEDIATE`` write lock), the rest get 409, nothing overbooks."""
from __future__ import annotations

import pytest

from app.web import create_app
from app.web.auth import create_user
from tests.lib.webrace import committed_peak, line_topology, run_race
from tests.lib.webserver import serve_app


@pytest.mark.parametrize("scenario", ["packet-line", "fig2"])
def test_race_sqlite(tmp_path, scenario) -> None:  # noqa: ANN001
    topo = "fig2" if scenario == "fig2" else str(line_topology(tmp_path / "line.json"))
    app = create_app({"DATABASE": str(tmp_path / "race.db"), "TOPOLOGY": topo, "SECRET_KEY": "x"})
    st = app.extensions["mlte"]
    with st.db.session() as s:
        _, token = create_user(s, "racer")
        s.commit()
        graph = st.topology.graph(s)
    try:
        with serve_app(app, threads=16) as url:
            winners, expected, codes = run_race(url, token, graph, scenario)
            assert set(codes) <= {201, 409}, codes
            assert expected >= 2 and winners == expected, (winners, expected)
            if scenario == "packet-line":
                assert committed_peak(url, token, "packet:S1:2-S2:2") <= 100.0
    finally:
        st.db.dispose()
