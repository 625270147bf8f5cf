"""All-or-nothing circuits (app/controller/circuit_request.py) over a fake driver: a plan through the plan runner;
unknown hops are rolled back."""
from __future__ import annotations

from app.controller.circuit_request import CircuitOutcome, run_circuit
from app.controller.control_api import circuit_status
from app.controller.driver_errors import BarrierTimeout, DriverError
from app.controller.network_view import NetworkView
from app.controller.ots_driver import XconResult, delete_ports
from app.controller.plan_log import PlanLog
from app.controller.plan_runner import PlanRunner
from app.update.executor import sequential


def http(out: CircuitOutcome) -> tuple[int, dict]:
    return circuit_status(out), out.body


def setup_circuit(driver, hops, parallel: bool = False, run_all=sequential) -> CircuitOutcome:
    """``POST /circuit``'s work: the hops as a plan, run by a runner whose parallel steps go to ``run_all``."""
    return run_circuit(PlanRunner(None, NetworkView(), run_parallel=run_all, log=PlanLog()), driver, hops, parallel)


HOPS = [{"ots": "X", "in_port": 1, "out_port": 2}, {"ots": "Y", "in_port": 1, "out_port": 2},
        {"ots": "Z", "in_port": 1, "out_port": 2}]


class Driver:
    """Answers per OTS: "ok", "refuse", "timeout"; ``dead_on_delete``: OTSes whose deletes time out too."""

    def __init__(self, behaviour: dict[str, str], dead_on_delete: set[str] = frozenset()):
        self.behaviour, self.dead = behaviour, dead_on_delete
        self.calls: list[tuple[str, str, int]] = []

    def install(self, ots, a, b):
        self.calls.append(("install", ots, a))
        how = self.behaviour.get(ots, "ok")
        if how == "timeout":
            raise BarrierTimeout(f"no BARRIER_REPLY from {ots}", [(a, b), (b, a)])
        if how == "gone":
            raise DriverError(f"{ots} is not connected", 409)
        ok = how == "ok"
        return XconResult(ok, ots, [], [] if ok else [{"code_name": "OFPBAC_BAD_OUT_PORT"}], 1.0, 1.1 if ok else None)

    def remove(self, ots, a):
        self.calls.append(("remove", ots, a))
        if ots in self.dead:
            raise BarrierTimeout(f"no BARRIER_REPLY from {ots}")
        return XconResult(True, ots, [], [], 1.0, 1.1)


def test_all_hops_ok():
    status, body = http(setup_circuit(Driver({}), HOPS))
    assert status == 200 and body["ok"] and len(body["xcons"]) == 3


def test_timed_out_hop_is_rolled_back_with_the_applied_ones():
    d = Driver({"Y": "timeout"})
    status, body = http(setup_circuit(d, HOPS))
    assert status == 504 and "BARRIER_REPLY" in body["error"]
    assert body["unknown"] == [HOPS[1]] and body["rolled_back"] == 2
    # last first; Z was never tried
    assert d.calls == [("install", "X", 1), ("install", "Y", 1), ("remove", "Y", 1), ("remove", "X", 1)]


def test_disconnected_ots_is_not_rolled_back_but_reported():
    d = Driver({"Y": "gone"})
    status, body = http(setup_circuit(d, HOPS))
    assert status == 409 and body["unknown"] == [] and body["rolled_back"] == 1
    assert ("remove", "Y", 1) not in d.calls


def test_refusal_rolls_back_in_parallel_mode_too():
    d = Driver({"Z": "refuse", "X": "timeout"})
    ran: list[int] = []

    def run_all(thunks):  # a stand-in for greenthreads: all hops are attempted
        ran.append(len(thunks))
        return [t() for t in thunks]

    status, body = http(setup_circuit(d, HOPS, parallel=True, run_all=run_all))
    assert ran[0] == 3 and status == 504  # a timeout outranks a refusal: the caller must know the state is unclear
    assert body["rolled_back"] == 2 and {c[1] for c in d.calls if c[0] == "remove"} == {"X", "Y"}


def test_a_failing_rollback_continues_and_is_reported():
    d = Driver({"Z": "refuse"}, dead_on_delete={"Y"})
    status, body = http(setup_circuit(d, HOPS))
    assert status == 422 and body["rolled_back"] == 1
    assert body["rollback_failed"][0]["ots"] == "Y" and ("remove", "X", 1) in d.calls


def test_delete_ports_uses_applied_and_unknown_reverse_directions():
    assert delete_ports({1: 2, 2: 1}, {}, 1, True) == [1, 2]
    assert delete_ports({}, {3: 8, 8: 3}, 3, True) == [3, 8]
    assert delete_ports({}, {}, 5, True) == [5]  # nothing recorded: the delete is harmless on the OTS
    assert delete_ports({1: 2, 2: 1}, {}, 1, False) == [1]
    assert delete_ports({1: 2, 2: 7}, {}, 1, True) == [1]  # 2 is cross-connected elsewhere: leave it


class BatchingDriver(Driver):
    """A driver that can put one OTS's XCONs behind one barrier (``install_many``), as the OTS driver does."""

    def install_many(self, ots, pairs):
        self.calls.append(("install_many", ots, tuple(pairs)))
        return [self.install(ots, a, b) for a, b in pairs]


def test_parallel_hops_on_one_ots_go_behind_one_barrier():
    """Two hops on Y in parallel mode: one install_many (one batch at the OTS, one provisioning delay)."""
    hops = [{"ots": "Y", "in_port": 1, "out_port": 2}, {"ots": "X", "in_port": 1, "out_port": 2},
            {"ots": "Y", "in_port": 3, "out_port": 4}]
    d = BatchingDriver({})
    status, body = http(setup_circuit(d, hops, parallel=True))
    assert status == 200 and len(body["xcons"]) == 3
    assert ("install_many", "Y", ((1, 2), (3, 4))) in d.calls and ("install", "X", 1) in d.calls
    assert not any(c[0] == "install_many" and c[1] == "X" for c in d.calls)  # a lone hop: plain install


def test_a_refused_hop_in_a_batch_rolls_back_the_others():
    hops = [{"ots": "Y", "in_port": 1, "out_port": 2}, {"ots": "Y", "in_port": 3, "out_port": 4}]
    d = BatchingDriver({"Y": "refuse"})
    status, body = http(setup_circuit(d, hops, parallel=True))
    assert status == 422 and not body["ok"]


def test_hop_by_hop_mode_never_batches():
    hops = [{"ots": "Y", "in_port": 1, "out_port": 2}, {"ots": "Y", "in_port": 3, "out_port": 4}]
    d = BatchingDriver({})
    setup_circuit(d, hops)
    assert [c[0] for c in d.calls] == ["install", "install"]


def test_a_new_path_never_crosses_another_reservations_lit_circuit():
    """LLDP shows a lit circuit A:3-X-Z-C:1 as a packet link A-C; a new reservation must light its own
    circuit (nothing lights a path over another's), so that link is left out of its path search."""
    from app.controller.reservation_circuits import without_circuit_links
    from topology.spec import fig2_testbed, spec_to_graph

    g = spec_to_graph(fig2_testbed())
    assert without_circuit_links(g) is g  # nothing lit: the graph as it is
    g.set_xcon_active("X:1", "X:3", True)
    g.set_xcon_active("Z:3", "Z:2", True)
    key = g.add_packet_link("A", 3, "C", 1, 10.0, source="lldp")
    other = g.add_packet_link("A", 5, "B", 5, 10.0, source="lldp")  # copper, not a circuit
    out = without_circuit_links(g)
    assert key not in out.edges_of_kind("packet") and other in out.edges_of_kind("packet")
    assert key in g.edges_of_kind("packet")  # the live graph itself is untouched
