"""A real, throw-away PostgreSQL server for tests: :mod:`app.db.pg_server` (labs use it too)."""
from __future__ import annotations

from app.db.pg_server import PostgresServer, find_bindir, postgres_server

__all__ = ["PostgresServer", "find_bindir", "postgres_server"]
