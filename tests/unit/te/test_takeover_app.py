"""The TE app's takeover pass (``TeApp._takeover``) over the controller's real southbound and view, the
switches fake OpenFlow tables wired like Fig. 2 (tests/lib/offabric.py): what a restarted controller
reads back (flow stats by the TE bands' cookies, the OTS driver's XCONs), adopts or releases."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from app.controller import te_app
from app.controller.journal import JOURNAL
from app.controller.plan_runner import PlanRunner
from app.controller.runtime import SETTINGS
from app.te.decisions import OffloadDecider
from app.te.store import MemoryTeStore
from app.te.takeover import LIT, offload_record
from app.update import planner
from app.update.executor import execute
from tests.lib.offabric import OFFabric
from tests.unit.controller.test_openflow_fabric import TCP, Controller
from topology import rule_plan
from topology.flow import FiveTuple
from topology.spec import fig2_testbed, spec_to_vendor_file
from topology.vendor_file import write_vendor_file


@pytest.fixture
def fabric(tmp_path) -> OFFabric:
    """Fig. 2, its OTSes' port granularities known (the VENDOR capabilities) and its fibres from the
    operator's vendor file, as a lab's controller has them: the live graph then shows lit circuits."""
    spec = fig2_testbed()
    f = OFFabric(spec)
    for o in spec.ots:
        ports = {str(p): {"granularity": g} for p, g in dict(o.ports).items()}
        f.view.set_capabilities(f.dpid(o.name), {"ports": ports})
    doc = spec_to_vendor_file(spec, setup_time=0.1)
    doc["adaptations"], doc["packet_switches"] = [], []
    for o in doc["ots"]:  # the fabric's own dpids
        o["dpid"] = hex(f.dpid(o["name"]))
    write_vendor_file(doc, tmp_path / "optical.json")
    f.view.load_static(str(tmp_path / "optical.json"))
    return f


def offloaded(fabric: OFFabric, learn: bool = True):
    """The first controller's offload 7 (h1 -> h3, one TCP 5-tuple) on circuit A:4-C:2, really applied."""
    ctl = Controller(fabric, ["initial"])
    if learn:
        ctl.learn_hosts()
    h1, h3 = fabric.hosts["h1"], fabric.hosts["h3"]
    circuit = SimpleNamespace(id="c-offload", xcons=(("X:4", "X:5"), ("Z:5", "Z:4")), a="A", a_port=4, b="C",
                              b_port=2, capacity=10.0, setup_time=0.1)
    off = OffloadDecider()._build(7, [FiveTuple(h1.ip, h3.ip, 6, 40000, 5001)], ("A", 1), ("C", 3), circuit, 0.0)
    ctl.reserve("te:7", off.ends)
    fabric.auto_links = True
    plan = planner.provision(off.xcons, list(off.ends), [off.ends], list(off.egress), list(off.ingress),
                             verify=False, stable_ms=5, plan_id="offload7")
    assert execute(plan, fabric.live(), sleep=time.sleep).state == "done"
    assert fabric.path("h1", fabric.packet("h1", "h3", **TCP)) == [("A", 1, 4), ("C", 2, 3)]
    fabric.view.unreserve("te:7")  # the new process starts with nothing reserved
    return ctl, off


def restarted(monkeypatch, fabric: OFFabric, store: MemoryTeStore) -> te_app.TeApp:
    """A new TE app over the same switches, its records in ``store``, switches settled long ago."""
    monkeypatch.setattr(te_app, "hub", SimpleNamespace(spawn=lambda f, *a: f(*a), sleep=time.sleep))
    monkeypatch.setattr(SETTINGS, "te", {}, raising=False)
    app = te_app.TeApp(**fabric.contexts(), mlte_plan_runner=PlanRunner(fabric.live(), fabric.view))
    app.store = store
    app.started = app.last_enter = time.monotonic() - 60.0
    return app


def steer_rules(fabric: OFFabric) -> list:
    return [r for sw in "ABC" for r in fabric.table(sw).rules_with(rule_plan.STEER.cookie(), rule_plan.STEER.mask())]


def test_the_offload_is_adopted_with_its_ports_and_released_by_its_new_owner(monkeypatch, fabric):
    _ctl, off = offloaded(fabric)
    store = MemoryTeStore([offload_record(off, state=LIT, since=time.time() - 4.0, threshold_mbps=0.4)])
    app = restarted(monkeypatch, fabric, store)
    since = JOURNAL.since(0)[-1]["seq"] if JOURNAL.since(0) else 0
    assert not app.adopted
    app._poll_once()
    assert app.adopted and list(app.decider.offloads) == [7] and app.thresholds[7] == 0.4
    assert {("A", 4), ("C", 2)} <= fabric.view.reserved_ports
    (taken,) = JOURNAL.since(since, "te_takeover")
    assert (taken["adopted"], taken["released"]) == (1, 0)
    assert next(app.decider._ids) == 8  # a new offload never reuses cookie id 7
    assert fabric.far_end(("A", 4)) == ("C", 2) and len(steer_rules(fabric)) == 4  # nothing touched
    # no traffic: the counters stay flat, three polls later the normal release path takes it down
    for _ in range(4):
        app._poll_once()
    assert app.decider.offloads == {} and store.load() == []
    assert steer_rules(fabric) == [] and fabric.far_end(("A", 4)) is None
    assert ("A", 4) not in fabric.view.reserved_ports


def test_xcons_without_their_rules_are_released_once(monkeypatch, fabric):
    _ctl, off = offloaded(fabric)
    live = fabric.live()
    for r in off.ingress + off.egress:
        assert live.remove_flow(r).ok
    rec = offload_record(off, state=LIT, since=time.time(), threshold_mbps=0.4)
    store = MemoryTeStore([rec])
    app = restarted(monkeypatch, fabric, store)
    since = JOURNAL.since(0)[-1]["seq"] if JOURNAL.since(0) else 0
    app._poll_once()
    assert fabric.far_end(("A", 4)) is None and store.load() == [] and app.decider.offloads == {}
    released = [e for e in JOURNAL.since(since, "te_decision") if e["decision"] == "release"]
    assert len(released) == 1 and released[0]["reason"].startswith("takeover: offload 7")
    done = JOURNAL.since(since, "te_done")
    assert [(d["ok"], d["takeover"]) for d in done] == [(True, True)]
    app._poll_once()  # the pass ran once: nothing more
    assert len(JOURNAL.since(since, "te_done")) == 1


def test_rules_and_circuit_no_record_owns_are_released(monkeypatch, fabric):
    """No state file (memory store, empty after the restart): the steer rules are orphans, and the lit
    circuit they steer into goes with them; 'initial' stays."""
    _ctl, off = offloaded(fabric, learn=False)
    app = restarted(monkeypatch, fabric, MemoryTeStore())
    app._poll_once()
    assert app.adopted and steer_rules(fabric) == [] and fabric.far_end(("A", 4)) is None
    assert fabric.far_end(("A", 3)) == ("B", 1)
    assert next(app.decider._ids) == 8


def test_the_takeover_waits_for_the_switches_to_settle(monkeypatch, fabric):
    _ctl, off = offloaded(fabric)
    app = restarted(monkeypatch, fabric, MemoryTeStore([offload_record(off, state=LIT)]))
    app.last_enter = time.monotonic()  # a switch just (re)connected
    app._poll_once()
    assert not app.adopted and app.decider.offloads == {}


def test_a_first_start_with_nothing_to_take_over_decides_at_once(monkeypatch, fabric):
    """No record and no TE rule on the switches: decisions start before the switches settle; the full
    pass follows once they have, and leaves the offload this process made meanwhile alone."""
    Controller(fabric, ["initial"])
    store = MemoryTeStore()
    app = restarted(monkeypatch, fabric, store)
    app.last_enter = time.monotonic()  # the switches just connected
    app._poll_once()
    assert app.adopted and not app.taken_over
    _ctl, off = offloaded(fabric)  # an offload this process made (its record written as TeApp._run does)
    app._persist(offload_record(off, state=LIT, since=time.time()))
    app.last_enter = time.monotonic() - 60.0
    since = JOURNAL.since(0)[-1]["seq"]
    app._poll_once()
    assert app.taken_over
    (taken,) = JOURNAL.since(since, "te_takeover")
    assert (taken["adopted"], taken["released"]) == (0, 0)
    assert len(steer_rules(fabric)) == 4 and fabric.far_end(("A", 4)) == ("C", 2) and len(store.load()) == 1


def test_orphan_rules_hold_decisions_until_the_pass(monkeypatch, fabric):
    _ctl, _off = offloaded(fabric, learn=False)
    app = restarted(monkeypatch, fabric, MemoryTeStore())
    app.last_enter = time.monotonic()
    app._poll_once()
    assert not app.adopted and len(steer_rules(fabric)) == 4


class LoggedStore(MemoryTeStore):
    """No record left, but the shared plan log already has TE plans up to ``logged``."""

    def __init__(self, logged: int) -> None:
        super().__init__()
        self.logged = logged

    def highest_plan_ident(self) -> int:
        return self.logged


def test_new_plans_are_numbered_above_the_plan_log_at_an_early_start_and_at_the_takeover(monkeypatch, fabric):
    Controller(fabric, ["initial"])
    app = restarted(monkeypatch, fabric, LoggedStore(7))
    app.last_enter = time.monotonic()  # early start: no record, no TE rule
    app._poll_once()
    assert app.adopted and not app.taken_over
    assert next(app.decider._ids) == 8 and next(app.growth._ids) == 8
    app.store = LoggedStore(11)  # more plans logged meanwhile (another controller): the full pass skips again
    app.last_enter = time.monotonic() - 60.0
    app._poll_once()
    assert app.taken_over and next(app.decider._ids) == 12 and next(app.growth._ids) == 12
