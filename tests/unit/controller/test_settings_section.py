"""Settings are read one way: ``SETTINGS.section(name)`` = app/config.py's defaults overlaid with what the
launcher set; the apps no longer each merge (or getattr) their own copy."""
from __future__ import annotations

from app.config import DEFAULTS
from app.controller.runtime import Settings


def test_a_section_is_the_defaults_overlaid_with_the_launchers_values():
    s = Settings()
    assert s.section("te") == DEFAULTS["te"]
    s.te = {"poll": 0.25, "mapping_sites": ["A", "Z"]}
    te = s.section("te")
    assert te["poll"] == 0.25 and te["mapping_sites"] == ["A", "Z"]
    assert te["mapping_interval"] == DEFAULTS["te"]["mapping_interval"]  # not set: its default
    assert s.te == {"poll": 0.25, "mapping_sites": ["A", "Z"]}  # the launcher's values are not changed
    s.monitor = {"interval": 2.0}
    assert s.section("monitor") == {**DEFAULTS["monitor"], "interval": 2.0}
