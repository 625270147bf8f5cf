"""What the controller's topology_publisher writes (lit circuits, snapshots) and how the web serves it (``auto``)."""
from __future__ import annotations

import time

from app.controller.lit_circuits import lit_circuits
from app.db.engine import Database
from app.db.feed import CircuitRecord, Feed
from app.db.migrate import open_migrated
from app.web.factory import create_app
from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS
from tests.unit.web.conftest import T0, Clock, new_user
from topology.spec import fig2_testbed, spec_to_graph


def lit(name: str):  # noqa: ANN201
    g = spec_to_graph(fig2_testbed())
    for ots, a, b in FIG2_CIRCUITS[name]:
        g.set_xcon_active(g.oport(ots, a), g.oport(ots, b))
    return g


def test_lit_circuits_follow_xcons_and_fibres_to_packet_ports() -> None:
    for name, links in FIG2_CIRCUIT_LINKS.items():
        found = lit_circuits(lit(name))
        assert {(c.a_end, c.z_end) for c in found} == {(f"{a}:{ap}", f"{b}:{bp}") for a, ap, b, bp in links}, name
    initial = lit_circuits(lit("initial"))
    assert initial[0].xcons == (("X", 1, 2), ("Y", 1, 2)) and initial[1].xcons == (("Y", 3, 4), ("Z", 1, 2))
    assert all(c.capacity == 10.0 for c in initial)  # ODU2 at unit 1
    assert lit_circuits(spec_to_graph(fig2_testbed())) == []


def test_a_dark_chain_is_no_circuit() -> None:
    g = spec_to_graph(fig2_testbed())
    g.set_xcon_active(g.oport("X", 1), g.oport("X", 2))  # A:3 → X → fibre to Y:1, where nothing is lit
    assert lit_circuits(g) == []


def test_sync_circuits_inserts_releases_and_logs(tmp_path) -> None:  # noqa: ANN001
    feed = Feed(open_migrated(str(tmp_path / "f.db")))
    try:
        a = CircuitRecord("A:3", "C:1", 10.0, (("X", 1, 3), ("Z", 3, 2)))
        b = CircuitRecord("A:4", "C:2", 10.0, (("X", 4, 5), ("Z", 5, 4)))
        assert feed.sync_circuits([a, b]) == (2, 0)
        assert feed.sync_circuits([a, b]) == (0, 0)  # nothing changed, nothing written
        assert feed.sync_circuits([a]) == (0, 1)
        from sqlalchemy import select

        from app.db.models import Circuit, Event

        with feed.db.session() as s:
            rows = {c.a_end: (c.state, [x.active for x in c.xcons]) for c in s.execute(select(Circuit)).scalars()}
            kinds = [e.kind for e in s.execute(select(Event).order_by(Event.id)).scalars()]
        assert rows == {"A:3": ("ACTIVE", [True, True]), "A:4": ("RELEASED", [False, False])}
        assert kinds == ["circuit.up", "circuit.up", "circuit.down"]
        assert a.name == "A:3-C:1 via X,Z"
    finally:
        feed.db.dispose()


def test_snapshots_are_bounded(tmp_path) -> None:  # noqa: ANN001
    feed = Feed(open_migrated(str(tmp_path / "s.db")), keep_snapshots=3)
    try:
        for i in range(5):
            feed.topology({"n": i})
        from sqlalchemy import func, select

        from app.db.models import TopologySnapshot

        with feed.db.session() as s:
            assert s.execute(select(func.count()).select_from(TopologySnapshot)).scalar() == 3
        assert feed.latest_topology() == {"n": 4}
    finally:
        feed.db.dispose()


def test_default_topology_is_the_controllers_with_no_silent_fallback(tmp_path) -> None:  # noqa: ANN001
    """Issue 14 item 3: without a snapshot the service used the Fig. 2 lab without saying so."""
    db = str(tmp_path / "auto.db")
    clock = Clock(T0)
    app = create_app({"DATABASE": db, "CLOCK": clock, "SECRET_KEY": "x"})  # TOPOLOGY defaults to controller
    h = new_user(app, "u")
    c = app.test_client()
    feed = Feed(Database(db))
    try:
        r = c.get("/api/v1/topology", headers=h)
        assert r.status_code == 503 and "no topology yet" in r.get_json()["error"]["message"]
        g = lit("direct")
        feed.topology(g.to_dict())
        clock.t = time.time() + 42  # the snapshot is stamped with the wall clock
        topo = c.get("/api/v1/topology", headers=h).get_json()
        assert topo["graph"] == g.to_dict()
        src = topo["source"]
        assert src["kind"] == "controller" and 41 <= src["age_seconds"] <= 60 and "old" in src["text"]
    finally:
        feed.db.dispose()
        app.extensions["mlte"].db.dispose()


def test_auto_is_refused_and_lab_and_file_sources_are_named(tmp_path) -> None:  # noqa: ANN001
    import pytest

    from app.web.errors import ApiError
    from app.web.topology_source import TopologySource

    with pytest.raises(ApiError, match="'auto' is gone"):
        TopologySource("auto")
    assert TopologySource("fig2").describe()["text"] == "the built-in lab topology fig2 (not the live network)"
    f = tmp_path / "g.json"
    f.write_text(lit("direct").to_json())
    d = TopologySource(str(f)).describe(now=f.stat().st_mtime + 600)
    assert d["kind"] == "file" and d["age_seconds"] == 600 and "10 min" in d["text"]


def test_feed_does_not_import_flask() -> None:
    import subprocess
    import sys

    code = "import sys, app.db.feed, app.controller.lit_circuits; print('flask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_migration_0002_drops_link_samples_and_downgrades(tmp_path) -> None:  # noqa: ANN001
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import inspect, text

    from app.db.migrate import MIGRATIONS_DIR

    db = Database(str(tmp_path / "old.db"))
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))

    def run(fn, rev: str) -> None:  # noqa: ANN001
        with db.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            fn(cfg, rev)

    try:
        run(command.upgrade, "0001")  # a database from before this change, with a sample in it
        with db.engine.begin() as conn:
            conn.execute(text("INSERT INTO link_samples (ts, link, mbps, utilization) VALUES (1, 'x', 2, 0.2)"))
        run(command.upgrade, "head")
        tables = inspect(db.engine).get_table_names()
        assert "link_samples" not in tables and "reservations" in tables
        run(command.downgrade, "0001")
        assert "link_samples" in inspect(db.engine).get_table_names()
    finally:
        db.dispose()
