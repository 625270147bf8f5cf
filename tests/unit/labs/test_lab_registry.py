"""lab_registry: a lab whose owner died is swept by exact name by the next lab; a live one is not."""
from __future__ import annotations

import json
import os
import subprocess

from mininet_labs import lab_registry


def fake_system(monkeypatch, bridges: list[str], links: list[str]) -> list[list[str]]:
    ran: list[list[str]] = []

    def run(cmd, **kw):
        ran.append(list(cmd))
        out = ""
        if cmd[:3] == ["ovs-vsctl", "--timeout=10", "list-br"]:
            out = "\n".join(bridges) + "\n"
        elif cmd[:4] == ["ip", "-o", "link", "show"]:
            out = "".join(f"{i}: {name}@if{i + 100}: <BROADCAST,UP> mtu 1500\n" for i, name in enumerate(links, 1))
        elif "datapath_id" in " ".join(cmd):
            out = json.dumps({"data": [["e0A", "00000000000000a1"], ["k1A", "00000000000000a1"],
                                       ["k1B", "00000000000000b1"], ["other", "0000000000000099"]]})
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(lab_registry.subprocess, "run", run)
    return ran


def test_a_dead_owners_lab_is_removed_by_name_and_a_live_one_kept(tmp_path, monkeypatch):
    ran = fake_system(monkeypatch, ["e0A", "e0B", "k1A", "keep"], ["e0A-eth1", "e0h1-eth0", "k1A-eth1", "e0Ax-eth1"])
    live = lab_registry.record("k1", ["k1A"], ["k1A"], tmp_path)
    dead = tmp_path / "e0-999999999.json"
    dead.write_text(json.dumps({"pid": 999999999, "start": "1", "boot": lab_registry._boot_id(), "prefix": "e0",
                                "bridges": ["e0A", "e0B", "e0C"], "nodes": ["e0A", "e0h1"]}))
    (tmp_path / "torn-1.json").write_text('{"pid": 1, "bri')  # a killed writer: dropped, nothing removed
    removed = lab_registry.sweep_dead(tmp_path)
    assert removed == ["e0A", "e0B", "e0A-eth1", "e0h1-eth0"]  # e0C is not there; e0Ax is not a node of it
    deleted = [c for c in ran if "del-br" in c or c[:3] == ["ip", "link", "del"]]
    assert deleted == [["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", "e0A"],
                       ["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", "e0B"],
                       ["ip", "link", "del", "e0A-eth1"], ["ip", "link", "del", "e0h1-eth0"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]
    assert json.loads(live.read_text())["pid"] == os.getpid()
    lab_registry.forget(live)
    lab_registry.forget(live)  # twice is fine
    assert not list(tmp_path.iterdir())


def test_an_entry_from_another_boot_or_a_reused_pid_is_dead():
    me = {"pid": os.getpid(), "start": lab_registry._start_time(os.getpid()), "boot": lab_registry._boot_id()}
    assert lab_registry.owner_alive(me)
    assert not lab_registry.owner_alive({**me, "boot": "another"})
    assert not lab_registry.owner_alive({**me, "start": "0"})  # same PID, another process


def test_bridges_sharing_a_datapath_id_with_ours_are_named(monkeypatch):
    fake_system(monkeypatch, [], [])
    assert lab_registry.same_datapath_ids({"k1A": 0xA1, "k1B": 0xB1}) == [("k1A", "e0A")]


def test_a_process_left_by_a_killed_owner_is_stopped_and_one_of_a_live_owner_is_not(tmp_path):
    import sys
    import time

    live_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    orphan = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                               "signal.SIG_IGN); time.sleep(60)"])  # needs the SIGKILL
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert lab_registry.track(live_child.pid, tmp_path) is not None
        path = lab_registry.track(orphan.pid, tmp_path)
        entry = json.loads(path.read_text())
        path.write_text(json.dumps({**entry, "pid": 999999999}))  # as if its owner had been killed
        done.wait()
        assert lab_registry.track(done.pid, tmp_path) is None  # already gone: nothing to note
        time.sleep(0.3)  # orphan has its SIGTERM handler set
        assert lab_registry.sweep_dead(tmp_path) == [f"pid {orphan.pid}"]
        assert orphan.wait(timeout=10) == -9
        assert live_child.poll() is None
        assert [p.name for p in tmp_path.iterdir()] == [f"proc-{os.getpid()}-{live_child.pid}.json"]
        live_child.kill()
        live_child.wait()
        assert lab_registry.sweep_dead(tmp_path) == [] and not list(tmp_path.iterdir())  # exited: note dropped
    finally:
        for p in (live_child, orphan):
            p.kill()
            p.wait()
