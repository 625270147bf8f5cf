"""The rule plan: one module declares every band; cookies and priorities as the apps used them."""
from __future__ import annotations

import subprocess
import sys

import pytest

from monitor import flowstats
from topology import rule_plan as rp


def test_cookies_and_priorities_are_the_historic_values():
    assert rp.LLDP.cookie() == 0x4D4C544500000001 and rp.LLDP.priority() == 65000
    assert rp.FORWARDING.cookie() == 0x4D4C544500000002 and rp.FORWARDING.priority() == 100
    assert rp.ARP.priority() == 110 and rp.TABLE_MISS.priority() == 0
    assert rp.PROBE.cookie() == 0x4D4C544500000020 and rp.PROBE.priority() == 64000
    assert rp.XCON.cookie() == 0x4D4C544500000010
    assert flowstats.cookie(flowstats.KIND_COUNT, 7) == rp.FLOW_COUNT.cookie(7) == 0x4D4C544500000731


def test_ids_masks_and_ownership():
    c = rp.RESERVATION.cookie(42)
    assert rp.cookie_id(c) == 42 and rp.band_of(c) is rp.RESERVATION
    assert c & rp.RESERVATION.mask() == rp.RESERVATION.cookie()
    assert c & rp.RESERVATION.mask(by_id=True) == c
    assert rp.STEER.cookie(42) & rp.RESERVATION.mask() != rp.RESERVATION.cookie()
    assert rp.band_of(rp.ARP.cookie()) is rp.FORWARDING
    assert rp.band_of(0x1234) is None
    with pytest.raises(ValueError, match="carry no id"):
        rp.LLDP.cookie(3)
    with pytest.raises(ValueError, match="out of range"):
        rp.STEER.cookie(rp.ID_LIMIT)
    assert rp.STEER.priority(999) == 40999
    with pytest.raises(ValueError, match="outside band"):
        rp.STEER.priority(1000)


def test_check_refuses_overlaps_and_shared_kinds():
    rp.check()
    clash = rp.Band("clash", "someone", 0x77, 29000, 30000)
    with pytest.raises(ValueError, match="overlap"):
        rp.check(rp.BANDS + (clash,))
    thief = rp.Band("thief", "other_app", rp.LLDP.kind, 5, 5)
    with pytest.raises(ValueError, match="used by"):
        rp.check(rp.BANDS + (thief,))
    # the same priority in another table or protocol is no clash
    rp.check(rp.BANDS + (rp.Band("t1", "x", 0x78, 100, 100, table=1),))


def test_every_band_is_in_one_module_and_needs_no_os_ken():
    code = "import sys, topology.rule_plan; assert 'os_ken' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_controller_reaches_the_database_without_the_web_service():
    code = ("import sys, app.controller.lit_circuits, app.controller.reservation_manager, app.db.feed, "
            "app.db.provisioning; bad = [m for m in sys.modules if m.startswith('app.web') or m == 'flask']; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
