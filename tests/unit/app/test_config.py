"""The config loader rejects unknown keys and wrong types, naming the key."""
from __future__ import annotations

import pytest

from app.config import DEFAULTS, dump_toml, load_config, merge_config
from app.errors import ConfigError


def test_defaults_load():
    cfg = load_config(None)
    assert cfg == DEFAULTS
    assert cfg is not DEFAULTS


def test_override_and_int_to_float(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[monitor]\ninterval = 2\newma_alpha = 0.5\n[controller]\nlisten_port = 6633\n")
    cfg = load_config(f)
    assert cfg["monitor"]["interval"] == 2.0 and isinstance(cfg["monitor"]["interval"], float)
    assert cfg["controller"]["listen_port"] == 6633
    assert cfg["pce"] == DEFAULTS["pce"]


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"nope": {}}, "unknown config section [nope]"),
        ({"monitor": {"intervall": 1.0}}, "unknown key [monitor] intervall"),
        ({"controller": {"listen_port": "6653"}}, "[controller] listen_port must be int"),
        ({"controller": {"listen_port": True}}, "[controller] listen_port must be int"),
        ({"monitor": {"ewma_alpha": 0.0}}, "ewma_alpha"),
        ({"ots": {"provision_delay_min": 0.3, "provision_delay_max": 0.2}}, "provision_delay_min"),
        ({"monitor": 3}, "[monitor] must be a table"),
        ({"pce": {"k_paths": -3}}, "[pce] k_paths must be >= 1"),
        ({"pce": {"k_paths": 0}}, "[pce] k_paths must be >= 1"),
        ({"pce": {"solver": "gurobi"}}, "[pce] solver must be one of highs, cbc, got 'gurobi'"),
        ({"controller": {"revert_hold_s": -1.0}}, "[controller] revert_hold_s must be"),
        ({"controller": {"revert": "yes"}}, "[controller] revert must be bool"),
    ],
)
def test_bad_config_names_the_key(overrides, needle):
    with pytest.raises(ConfigError) as exc:
        merge_config(overrides)
    assert needle in str(exc.value)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[monitor\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="is a directory"):  # `mlte -c /some/dir`: one line, not IsADirectoryError
        load_config(tmp_path)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not a text"):
        load_config(binary)


def test_dump_round_trips(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(dump_toml(DEFAULTS))
    assert load_config(f) == DEFAULTS


def test_growth_and_elastic_keys_are_known_and_checked():
    """The TE app and the reservations app read these from [te]; a config naming them must load."""
    cfg = merge_config({"te": {"grow_hold_s": 5, "grow_calm_intervals": 3, "elastic_hold_s": 2.0,
                               "elastic_calm_intervals": 3, "split_bits": 2}})
    assert cfg["te"]["grow_hold_s"] == 5.0 and cfg["te"]["split_bits"] == 2
    with pytest.raises(ConfigError, match="shrink_util"):
        merge_config({"te": {"shrink_util": 0.8}})
    with pytest.raises(ConfigError, match="elastic_shrink_at"):
        merge_config({"te": {"elastic_grow_at": 0.4}})
