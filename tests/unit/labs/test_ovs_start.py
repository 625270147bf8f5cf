"""mininet_labs.ovs: ``mlte lab`` starts Open vSwitch when it is down, and says in one line why not.

The real OVS is shared by every session on the machine, so it is not stopped here: ``ovs_running``
is replaced, and ``ctl`` is a real script standing in for ovs-ctl."""
from __future__ import annotations

import pytest

from mininet_labs import ovs


def _script(tmp_path, body: str):
    p = tmp_path / "ovs-ctl"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return str(p)


def test_running_ovs_is_left_alone(monkeypatch, tmp_path):
    monkeypatch.setattr(ovs, "ovs_running", lambda: True)
    marker = tmp_path / "ran"
    assert ovs.ensure_ovs(log=lambda m: None, ctl=_script(tmp_path, f"touch {marker}")) is False
    assert not marker.exists()


def test_stopped_ovs_is_started_with_ovs_ctl(monkeypatch, tmp_path):
    marker = tmp_path / "started"
    monkeypatch.setattr(ovs, "ovs_running", marker.exists)  # "running" once the script has run
    said: list[str] = []
    assert ovs.ensure_ovs(log=said.append, ctl=_script(tmp_path, f'[ "$1" = start ] && touch {marker}')) is True
    assert marker.exists() and said and "starting" in said[0]


def test_ovs_that_does_not_start_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(ovs, "ovs_running", lambda: False)
    with pytest.raises(ovs.OvsUnavailable, match=r"did not start .*exited 3: ovsdb-server: cannot open"):
        ovs.ensure_ovs(log=lambda m: None, ctl=_script(tmp_path, "echo 'ovsdb-server: cannot open' >&2; exit 3"))
    with pytest.raises(ovs.OvsUnavailable, match="could not start"):
        ovs.ensure_ovs(log=lambda m: None, ctl=str(tmp_path / "missing"))


def test_the_real_check_sees_the_running_ovs():
    import shutil
    if shutil.which("ovs-vsctl") is None:
        pytest.skip("no Open vSwitch on this machine")
    assert ovs.ovs_running() is True  # make test bootstraps (and so starts) OVS first
