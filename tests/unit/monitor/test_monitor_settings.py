"""Where the monitor app's [monitor] settings come from (launcher, $MLTE_CONFIG, defaults)."""
from __future__ import annotations

import pytest

from app.config import DEFAULTS
from app.controller.monitor_app import monitor_settings
from app.controller.runtime import SETTINGS


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.delenv("MLTE_CONFIG", raising=False)
    monkeypatch.setattr(SETTINGS, "monitor", {})  # a controller started without [monitor] settings
    yield monkeypatch


def test_defaults_without_launcher_or_file(clean):
    assert monitor_settings() == DEFAULTS["monitor"]


def test_file_named_by_env(clean, tmp_path):
    conf = tmp_path / "m.toml"
    conf.write_text('[monitor]\nfine_backend = "flowstats"\nprobe_interval = 0.5\n')
    clean.setenv("MLTE_CONFIG", str(conf))
    cfg = monitor_settings()
    assert cfg["fine_backend"] == "flowstats" and cfg["probe_interval"] == 0.5 and cfg["interval"] == 1.0


def test_launcher_settings_win_and_missing_keys_are_defaults(clean, tmp_path):
    conf = tmp_path / "m.toml"
    conf.write_text('[monitor]\nfine_backend = "flowstats"\n')
    clean.setenv("MLTE_CONFIG", str(conf))
    SETTINGS.monitor = {"interval": 2.0}
    cfg = monitor_settings()
    assert cfg["interval"] == 2.0 and cfg["fine_backend"] == DEFAULTS["monitor"]["fine_backend"]



@pytest.mark.parametrize("text, msg", [('fine_backend = "netflow"', "fine_backend"),
                                       ("probe_interval = -1.0", "probe_interval")])
def test_bad_monitor_settings_are_user_errors(tmp_path, text, msg):
    from app.config import load_config
    from app.errors import ConfigError

    conf = tmp_path / "m.toml"
    conf.write_text(f"[monitor]\n{text}\n")
    with pytest.raises(ConfigError, match=msg) as exc:
        load_config(conf)
    assert exc.value.user_error
