"""The CLI creates users whose token works (the schema itself: tests/unit/db/test_migrate.py)."""
from __future__ import annotations

from sqlalchemy import select

from tests.lib.webserver import create_user_cli


def test_cli_create_user(tmp_path) -> None:  # noqa: ANN001
    from app.web import create_app

    db = str(tmp_path / "cli.db")
    token = create_user_cli(db, "carol", admin=True)
    assert token.startswith("mlte_")
    app = create_app({"DATABASE": db, "SECRET_KEY": "x", "TOPOLOGY": "fig2"})
    try:
        me = app.test_client().get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).get_json()
        assert me["name"] == "carol" and me["admin"] is True
        with app.extensions["mlte"].db.session() as s:
            from app.db.models import ApiToken

            stored = s.execute(select(ApiToken.token_hash)).scalar_one()
            assert token not in stored and len(stored) == 64  # only the hash is kept
    finally:
        app.extensions["mlte"].db.dispose()
