"""Alembic environment: runs on the connection handed over by :func:`app.db.migrate.upgrade`.

Operators run ``python -m app.db.migrate URL``; plain ``alembic -x url=URL ...`` from this directory
works too and takes the same migration lock (:func:`app.db.migrate.migration_lock`).
"""
from __future__ import annotations

from alembic import context

from app.db.migrate import owned_only
from app.db.models import METADATA

config = context.config


def _run(connection) -> None:  # noqa: ANN001 (a SQLAlchemy Connection)
    context.configure(connection=connection, target_metadata=list(METADATA), render_as_batch=True,
                      include_name=owned_only)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from app.db.engine import make_engine
    from app.db.migrate import migration_lock

    engine = make_engine(context.get_x_argument(as_dictionary=True).get("url", "sqlite:///mlte.db"))
    try:
        with migration_lock(engine) as conn:
            _run(conn)
    finally:
        engine.dispose()


run_migrations_online()
