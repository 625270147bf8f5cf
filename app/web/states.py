"""The life cycle moved to :mod:`app.db.states` (the controller's store applies it too).

Kept only so the modules that still import it from here (``validation.py``) keep working; import from
``app.db.states``.
"""
from __future__ import annotations

from app.db.states import STATES

__all__ = ["STATES"]
