"""Alembic environment: runs on the connection handed over by :func:`app.db.migrate.upgrade` (or by a
caller of Alembic's command API with ``app.db.migrate.config()`` and ``attributes["connection"]``,
e.g. to autogenerate a revision: docs/database.md). There is no ``alembic.ini``: use
``python -m app.db.migrate URL``, which takes the migration lock.
"""
from __future__ import annotations

from alembic import context

from app.db.migrate import owned_only
from app.db.models import METADATA

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run mlte's migrations through app.db.migrate (python -m app.db.migrate URL)")
context.configure(connection=connection, target_metadata=list(METADATA), render_as_batch=True,
                  include_name=owned_only)
with context.begin_transaction():
    context.run_migrations()
