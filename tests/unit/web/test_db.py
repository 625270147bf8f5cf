"""Migrations match the models; URL handling; the CLI creates users whose token works."""
from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select

from app.web.db import Database, normalise_url, upgrade
from app.web.models import AdmissionLock, Base
from tests.lib.webserver import create_user_cli


def test_migrations_produce_the_model_schema(tmp_path) -> None:  # noqa: ANN001
    db = Database(str(tmp_path / "m.db"))
    try:
        upgrade(db.engine)
        upgrade(db.engine)  # idempotent: a second start does nothing
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            assert diff == []
            assert conn.execute(select(AdmissionLock.id)).scalars().all() == [1]
        assert "alembic_version" in inspect(db.engine).get_table_names()
    finally:
        db.dispose()


def test_normalise_url() -> None:
    assert normalise_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("/tmp/x.db") == "sqlite:////tmp/x.db"
    assert normalise_url("sqlite:///rel.db") == "sqlite:///rel.db"


def test_cli_create_user(tmp_path) -> None:  # noqa: ANN001
    from app.web import create_app

    db = str(tmp_path / "cli.db")
    token = create_user_cli(db, "carol", admin=True)
    assert token.startswith("mlte_")
    app = create_app({"DATABASE": db, "SECRET_KEY": "x"})
    try:
        me = app.test_client().get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).get_json()
        assert me["name"] == "carol" and me["admin"] is True
        with app.extensions["mlte"].db.session() as s:
            from app.web.models import ApiToken

            stored = s.execute(select(ApiToken.token_hash)).scalar_one()
            assert token not in stored and len(stored) == 64  # only the hash is kept
    finally:
        app.extensions["mlte"].db.dispose()
