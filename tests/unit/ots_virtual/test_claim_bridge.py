"""An OTS agent started while Mininet's batch start-up has not created its bridge yet waits for it
(a CI run lost that race: `OVS bridge 'v3X' does not exist`), and still refuses a bridge that never comes."""
from __future__ import annotations

import subprocess

import pytest

from ots_virtual import ovs


def fake_vsctl(monkeypatch, appears_after: int | None):
    calls = {"br_exists": 0, "set": []}

    def run(cmd, **kw):
        calls["br_exists"] += 1
        if appears_after is None or calls["br_exists"] <= appears_after:
            raise subprocess.CalledProcessError(2, cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(ovs.subprocess, "run", run)
    monkeypatch.setattr(ovs, "vsctl", lambda *a: calls["set"].append(a) or "[]")
    return calls


def test_a_bridge_created_a_moment_later_is_claimed(monkeypatch):
    calls = fake_vsctl(monkeypatch, appears_after=3)
    slept: list[float] = []
    ovs.claim_bridge("v3X", 6653, sleep=slept.append)
    assert calls["br_exists"] == 4 and len(slept) == 3
    assert any("set-fail-mode" in a for a in calls["set"][-1])


def test_a_bridge_that_never_comes_is_refused_after_the_wait(monkeypatch):
    calls = fake_vsctl(monkeypatch, appears_after=None)
    slept: list[float] = []
    with pytest.raises(ovs.OvsError, match=r"'nope' does not exist \(waited 1 s\)"):
        ovs.claim_bridge("nope", 6653, wait_s=1.0, sleep=slept.append)
    assert sum(slept) == pytest.approx(1.0) and calls["set"] == []


def test_release_points_the_bridge_at_nothing_instead_of_deleting_its_controller(monkeypatch):
    """del-controller would make OVS flush every XCON flow of the bridge (a bridge left with no controller)."""
    calls = fake_vsctl(monkeypatch, appears_after=0)
    ovs.release_bridge("v3X")
    (args,) = calls["set"]
    assert "del-controller" not in args
    assert f'target="{ovs.RELEASED_TARGET}"' in args
    assert args[-4:] == ("set", "bridge", "v3X", "controller=@c")
