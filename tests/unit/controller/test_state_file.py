"""The controller's state file: what the optical scan learnt survives a restart (app/controller/state_file.py)."""
from __future__ import annotations

import json
import os

import pytest

from app.cli.main import main
from app.config import DEFAULTS, dump_toml, merge_config
from app.controller import state_file
from app.controller.model import PortRef
from app.controller.state_file import StateFileError

X, Y, A, B = 0xF01, 0xF02, 0xA1, 0xB1
NAMES = {X: "X", Y: "Y", A: "A", B: "B"}
SCAN = {(X, 1): PortRef(A, 3), (X, 2): None, (Y, 2): PortRef(B, 1)}


def test_round_trip_by_names(tmp_path):
    path = tmp_path / "state.json"
    state_file.save_attached(str(path), SCAN, NAMES.__getitem__)
    doc = json.loads(path.read_text())
    assert doc["format"] == state_file.FORMAT and doc["version"] == state_file.VERSION
    assert {"ots": "X", "ots_dpid": X, "oport": 1, "switch": "A", "switch_dpid": A, "port": 3} in doc["adaptations"]
    assert doc["dark"] == [{"ots": "X", "ots_dpid": X, "oport": 2}]
    assert state_file.load_attached(str(path), NAMES) == SCAN


def test_names_win_over_stored_dpids_and_dpids_fill_in(tmp_path):
    """The lab names nodes; a node renumbered under the same name is still found by its name, and a
    node the names do not cover (named after its bridge on connect) by the dpid stored with it."""
    path = tmp_path / "state.json"
    state_file.save_attached(str(path), SCAN, NAMES.__getitem__)
    renumbered = {0xF11: "X", 0xA2: "A"}  # X and A got new dpids, Y and B are not in the names
    assert state_file.load_attached(str(path), renumbered) == {
        (0xF11, 1): PortRef(0xA2, 3), (0xF11, 2): None, (Y, 2): PortRef(B, 1)}


def test_off_and_first_start(tmp_path):
    assert state_file.load_attached("", NAMES) == {}
    assert state_file.load_attached(str(tmp_path / "none-yet.json"), NAMES) == {}
    state_file.save_attached("", SCAN, NAMES.__getitem__)  # off: writes nothing
    assert os.listdir(tmp_path) == []
    assert DEFAULTS["controller"]["state_file"] == ""
    assert 'state_file = ""' in dump_toml(merge_config({}))  # `mlte config show` lists it


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not JSON"),
    ('{"version": 1}', "not an mlte controller state file"),
    ('{"format": "mlte-controller-state", "version": 2}', "version 2"),
    ('{"format": "mlte-controller-state", "version": 1, "adaptations": {}}', "'adaptations' must be a list"),
    ('{"format": "mlte-controller-state", "version": 1, "adaptations": [{"ots": "X", "ots_dpid": 1, "oport": 1}]}',
     "'switch' must be a non-empty string"),
    ('{"format": "mlte-controller-state", "version": 1, "dark": [{"ots": "X", "ots_dpid": -1, "oport": 1}]}',
     "'ots_dpid' must be a non-negative integer"),
])
def test_bad_files_are_one_line_errors(tmp_path, text, problem):
    path = tmp_path / "state.json"
    path.write_text(text)
    with pytest.raises(StateFileError, match=problem):
        state_file.load_attached(str(path), NAMES)


def test_write_is_atomic(tmp_path, monkeypatch):
    """A write that fails half-way leaves the previous file as it was and no temporary file behind."""
    path = tmp_path / "state.json"
    state_file.save_attached(str(path), SCAN, NAMES.__getitem__)
    before = path.read_text()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(state_file.os, "replace", broken_replace)
    with pytest.raises(OSError):
        state_file.save_attached(str(path), {(X, 1): PortRef(A, 4)}, NAMES.__getitem__)
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["state.json"]


def test_controller_refuses_a_bad_state_file_in_one_line(tmp_path, capsys):
    path = tmp_path / "state.json"
    path.write_text('{"format": "mlte-controller-state", "version": 99}')
    assert main(["controller", "--state-file", str(path), "--of-port", "1", "--api-port", "2"]) == 2
    err = capsys.readouterr().err
    assert "version 99" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
