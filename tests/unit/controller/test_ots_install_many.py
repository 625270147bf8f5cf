"""``OtsDriver.install_many``: several XCONs on one OTS behind one barrier (one provisioning batch at
the OTS), each hop still all or nothing (no switch: the southbound's confirm is replaced)."""
from __future__ import annotations

from app.controller.driver_errors import BarrierTimeout
from app.controller.openflow_southbound import Confirmed, OfError
from app.controller.ots_driver import XconResult
from tests.unit.controller.test_ots_readback import X, make_driver


def _confirming(driver, refuse_in_port: int | None = None, timeout: bool = False) -> list[list]:
    """Replace the southbound's confirm: record each call's messages, refuse FLOW_MODs from one port."""
    calls: list[list] = []

    def confirm(dpid, msgs, timeout_s=None, **_kw):
        for m in msgs:
            driver.southbound.datapath(dpid).set_xid(m)
        calls.append(list(msgs))
        if timeout:
            raise BarrierTimeout("no BARRIER_REPLY")
        errs = [OfError(m.xid, 3, 0) for m in msgs
                if getattr(m, "command", None) == 0 and m.match["in_port"] == refuse_in_port]
        return Confirmed(errs, 1.0, 1.2)

    driver.southbound.confirm = lambda dpid, msgs, timeout=None, kind="": confirm(dpid, msgs, timeout)
    return calls


def test_two_xcons_one_barrier():
    driver, dp, sw, _posted = make_driver()
    calls = _confirming(driver)
    res = driver.install_many("X", [(1, 2), (3, 4)])
    assert all(isinstance(r, XconResult) and r.ok for r in res)
    assert len(calls) == 1 and len(calls[0]) == 4  # four directions, then one barrier
    assert driver.xcons[X] == {1: 2, 2: 1, 3: 4, 4: 3}


def test_a_refused_hop_is_undone_and_the_other_stays():
    driver, dp, sw, _posted = make_driver()
    calls = _confirming(driver, refuse_in_port=4)  # 4 -> 3 refused: hop (3, 4) fails as a whole
    ok, bad = driver.install_many("X", [(1, 2), (3, 4)])
    assert ok.ok and not bad.ok and bad.errors
    assert len(calls) == 2 and [m.match["in_port"] for m in calls[1]] == [3]  # 3 -> 4 went in: deleted
    assert driver.xcons[X] == {1: 2, 2: 1}


def test_a_timed_out_batch_leaves_every_hop_unknown():
    driver, dp, sw, _posted = make_driver()
    _confirming(driver, timeout=True)
    res = driver.install_many("X", [(1, 2), (3, 4)])
    assert all(isinstance(r, BarrierTimeout) for r in res)
    assert driver.unknown[X] == {1: 2, 2: 1, 3: 4, 4: 3}


def test_a_bypass_teardown_is_one_batch():
    driver, dp, sw, _posted = make_driver()
    calls = _confirming(driver)
    driver.install_many("X", [(1, 2), (3, 4)])
    res = driver.remove_many("X", [1, 3])
    assert [r.ok for r in res] == [True, True] and driver.xcons[X] == {}
    assert len(calls) == 2 and sorted(m.match["in_port"] for m in calls[1]) == [1, 2, 3, 4]
