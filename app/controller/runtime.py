"""Process-wide settings the launcher hands to the apps before they are instantiated.

os-ken instantiates apps itself (no constructor arguments), so the launcher stores the parsed
mlte configuration here first; apps read it in ``__init__``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.config import DEFAULTS


@dataclass
class Settings:
    controller: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS["controller"]))
    ots: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS["ots"]))
    db_url: str = ""  # capability store ("" = in-memory only)
    monitor: dict[str, Any] = field(default_factory=dict)  # [monitor], read by the monitor app (docs/monitor.md)
    te: dict[str, Any] = field(default_factory=dict)  # [te], read by the TE app (docs/te-loop.md)
    ha: dict[str, Any] = field(default_factory=dict)  # [ha]: several controllers (app/controller/mastership_app.py)
    names: dict[int, str] = field(default_factory=dict)  # dpid -> node name given by the lab
    host_names: dict[str, str] = field(default_factory=dict)  # host MAC (lower case) -> node name

    def section(self, name: str) -> dict[str, Any]:
        """The ``[name]`` section as every app reads it: app/config.py's defaults overlaid with what the
        launcher set (the one way settings are read; a missing key is its default)."""
        return {**DEFAULTS.get(name, {}), **(getattr(self, name, None) or {})}


SETTINGS = Settings()
