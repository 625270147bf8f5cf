"""The schema moved to :mod:`app.db.models` (one owner for every table, docs/database.md).

Kept only so the modules that still import it from here (``validation.py``, ``topology_source.py``)
keep working; import from ``app.db.models``.
"""
from __future__ import annotations

from app.db.models import TopologySnapshot

__all__ = ["TopologySnapshot"]
