"""Alembic environment: runs on the connection handed over by :func:`app.web.db.upgrade`.

``alembic -x url=sqlite:///mlte.db upgrade head`` from this directory also works (for operators).
"""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from app.web.db import web_tables_only
from app.web.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True,
                          include_name=web_tables_only)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url", "sqlite:///mlte.db")
    engine = create_engine(url)
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True,
                          include_name=web_tables_only)
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
