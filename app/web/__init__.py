"""The reservation service: REST API under ``/api/v1`` and the web UI (Flask application factory).

``create_app(test_config)`` opens the database, runs the Alembic migrations of ``app/db/migrations``
(docs/database.md) and registers one blueprint per resource. Configuration keys (all optional):
``DATABASE`` (SQLAlchemy URL or SQLite path), ``TOPOLOGY`` (``auto`` | ``controller`` | ``fig2`` | JSON file),
``UNIT_MBPS``, ``HOLD_SECONDS``, ``CLOCK`` (a ``() -> float`` epoch clock, for tests), ``SECRET_KEY``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.web.factory import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """``create_app`` is loaded on first use: importing ``app.web`` stays cheap (no Flask until needed)."""
    if name == "create_app":
        from app.web.factory import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
