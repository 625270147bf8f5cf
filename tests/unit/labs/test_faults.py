"""Fault injection helpers (mininet_labs/faults.py) against a fake running lab: the commands they run."""
from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from mininet_labs import faults
from mininet_labs.testbed import LabNet, OtsSwitch
from topology.spec import fig2_testbed

PREFIX = "t9"


class FakeOts(OtsSwitch):
    """An OtsSwitch that only records what is done to its agent."""

    def __init__(self, name: str, ports: list[int]) -> None:  # noqa: D107 - no Mininet behind it
        self.name = name
        self.intfs = {p: SimpleNamespace(name=f"{name}-eth{p}") for p in ports}
        self.agent = SimpleNamespace(poll=lambda: None)
        self.calls: list[str] = []

    def intfList(self):  # noqa: N802 (Mininet's name)
        return list(self.intfs.values())

    def stop_agent(self, timeout: float = 5.0, kill: bool = False) -> None:
        self.calls.append("kill" if kill else "stop")
        self.agent = None

    def start_agent(self) -> None:
        self.calls.append("start")


class FakeSwitch:
    def __init__(self, name: str, ports: list[int]) -> None:
        self.name = name
        self.intfs = {p: SimpleNamespace(name=f"{name}-eth{p}") for p in ports}


@pytest.fixture
def lab(monkeypatch):
    spec = fig2_testbed()
    nodes = {PREFIX + "X": FakeOts(PREFIX + "X", [1, 2, 3, 4, 5, 6]), PREFIX + "Z": FakeOts(PREFIX + "Z", [1, 2, 3]),
             PREFIX + "A": FakeSwitch(PREFIX + "A", [1, 2, 3, 4])}
    net = LabNet(spec, prefix=PREFIX)
    net.net = SimpleNamespace(get=lambda n: nodes[n])  # type: ignore[assignment]
    ran: list[tuple[list[str], str | None]] = []
    outputs = {"controller": "[8c1e, 77aa]", "target": '"tcp:127.0.0.1:6653"', "max_backoff": "1000"}

    def run(cmd, input=None, **kw):
        ran.append((list(cmd), input))
        out = next((v for k, v in outputs.items() if cmd[-1] == k), "")
        if cmd[-1] == "max_backoff" and cmd[-2] == "77aa":
            out = "[]"
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(faults.subprocess, "run", run)
    return SimpleNamespace(net=net, nodes=nodes, ran=ran)


def test_parse_port_and_fibre():
    spec = fig2_testbed()
    assert faults.parse_port("X:3") == ("X", 3)
    assert faults.fibre(spec, "Z:3", "X:3").kind == "optical"
    with pytest.raises(faults.FaultError, match="no fibre"):
        faults.fibre(spec, "X:1", "Z:2")  # both OTS ports, but no fibre between them
    with pytest.raises(faults.FaultError, match="NODE:NUMBER"):
        faults.parse_port("X3")


def test_cut_and_repair_set_the_first_end_down_and_up(lab):
    t = faults.cut_fibre(lab.net, "X:3", "Z:3")
    assert isinstance(t, float)
    faults.repair_fibre(lab.net, "X:3", "Z:3")
    assert lab.ran == [(["ip", "-batch", "-"], f"link set dev {PREFIX}X-eth3 down\n"),
                       (["ip", "-batch", "-"], f"link set dev {PREFIX}X-eth3 up\n")]
    with pytest.raises(faults.FaultError):
        faults.cut_fibre(lab.net, "X:3", "Z:2")


def test_flap_port_comes_back_up_after_hold(lab):
    slept: list[float] = []
    faults.flap_port(lab.net, "A:3", hold=0.5, sleep=slept.append)
    assert slept == [0.5]
    assert [i for _, i in lab.ran] == [f"link set dev {PREFIX}A-eth3 down\n", f"link set dev {PREFIX}A-eth3 up\n"]


def test_power_off_kills_the_agent_darkens_every_port_and_clears_flows(lab):
    faults.power_off_ots(lab.net, "Z")
    z = lab.nodes[PREFIX + "Z"]
    assert z.calls == ["kill"]
    assert lab.ran[0][1] == "".join(f"link set dev {PREFIX}Z-eth{p} down\n" for p in (1, 2, 3))
    assert lab.ran[1][0] == ["ovs-ofctl", "-O", "OpenFlow10", "del-flows", PREFIX + "Z"]
    faults.power_on_ots(lab.net, "Z")
    assert z.calls[-1] == "start" and lab.ran[-1][0][-2:] == ["del-flows", PREFIX + "Z"]


def test_kill_and_restart_agent(lab):
    faults.kill_agent(lab.net, "X")
    with pytest.raises(faults.FaultError, match="not running"):
        faults.kill_agent(lab.net, "X")
    faults.restart_agent(lab.net, "X")
    assert lab.nodes[PREFIX + "X"].calls == ["kill", "start"]
    lab.nodes[PREFIX + "X"].agent = SimpleNamespace(poll=lambda: None)  # running again
    with pytest.raises(faults.FaultError, match="still running"):
        faults.restart_agent(lab.net, "X")
    with pytest.raises(faults.FaultError, match="not an OTS"):
        faults.kill_agent(lab.net, "A")


def test_disconnect_and_reconnect_keep_the_controller_records(lab, monkeypatch):
    monkeypatch.setattr(faults, "closed_port", lambda: 9)
    faults.disconnect_switch(lab.net, "A")
    assert lab.ran[-1][0] == ["ovs-vsctl", "--timeout=10", "--", "--id=@c0", "create", "controller",
                              'target="tcp:127.0.0.1:9"', "max_backoff=1000", "--", "set", "bridge", PREFIX + "A",
                              "controller=[@c0]"]  # not del-controller: OVS would flush the flows
    faults.reconnect_switch(lab.net, "A")
    assert lab.ran[-1][0] == ["ovs-vsctl", "--timeout=10",
                              "--", "--id=@c0", "create", "controller", 'target="tcp:127.0.0.1:6653"', "max_backoff=1000",
                              "--", "--id=@c1", "create", "controller", 'target="tcp:127.0.0.1:6653"',
                              "--", "set", "bridge", PREFIX + "A", "controller=[@c0,@c1]"]
    with pytest.raises(faults.FaultError, match="not disconnected"):
        faults.reconnect_switch(lab.net, "A")
    with pytest.raises(faults.FaultError, match="is an OTS"):
        faults.disconnect_switch(lab.net, "X")


def test_a_lab_that_is_not_running_is_refused():
    with pytest.raises(faults.FaultError, match="not running"):
        faults.cut_fibre(LabNet(fig2_testbed()), "X:3", "Z:3")
