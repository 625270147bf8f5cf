"""An elastic reservation on the Fig. 2 testbed: lit with one unit (an OF1.3 meter on its ingress rules),
it grows a unit at a time while h1 sends more than it has, never beyond its grant, and shrinks back to one
unit once the traffic stops; the API shows the provisioned bandwidth throughout."""
from __future__ import annotations

import subprocess
import threading
import time

import pytest
import requests

from app.controller.client import wait_until
from app.web.timeutil import to_iso
from mininet_labs.lab_web import get as _get
from mininet_labs.lab_web import lab_web
from mininet_labs.reservation_lifecycle import _state, _udp_mbps
from topology import rule_plan

pytestmark = pytest.mark.integration
GRANT = 5.0


def meter_rates(session, switch: str, meter: int) -> list[int]:
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-meters", session.lab.bridge(switch)],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    rates, mine = [], False
    for line in out.splitlines():
        if "meter=" in line:
            mine = f"meter={meter} " in line + " "
        if mine and "rate=" in line:
            rates.append(int(line.split("rate=")[1].split()[0].rstrip(",")))
    return rates


def metered_rule_bytes(session, switch: str, meter: int) -> int:
    """The byte counter of the rule on ``switch`` that passes ``meter`` (the reservation's ingress rule)."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", session.lab.bridge(switch)],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    (line,) = [x for x in out.splitlines() if f"meter:{meter}," in x]
    return int(line.split("n_bytes=")[1].split(",")[0])


def test_an_elastic_reservation_grows_and_shrinks_within_its_grant(tmp_path):
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    spec = fig2_testbed()
    static = tmp_path / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=0.185), static)
    db = tmp_path / "mlte.db"
    conf = tmp_path / "mlte.toml"
    conf.write_text("[te]\nelastic_hold_s = 2.0\nelastic_calm_intervals = 3\n")
    with net_lock(), LabSession(spec, tmp_path / "work", static_file=str(static), config_file=str(conf),
                                controller_args=("--db-url", f"sqlite:///{db}")) as session:
        for h, ip in (("h1", "10.0.0.3"), ("h3", "10.0.0.1")):
            session.lab.node(h).cmd(f"ping -c1 -W1 {ip} >/dev/null 2>&1")
        with lab_web(db, tmp_path / "web.log") as web:
            url, headers = web.url, web.headers
            start = time.time() + 4
            r = requests.post(url + "/reservations", headers=headers, timeout=30, json={
                "name": "elastic h1-h3", "src": "A:1", "dst": "C:3", "bandwidth": GRANT, "mode": "elastic",
                "start": to_iso(start), "end": to_iso(start + 120)})
            r.raise_for_status()
            rid = r.json()["id"]
            requests.post(f"{url}/reservations/{rid}/commit", headers=headers, timeout=30).raise_for_status()
            assert wait_until(lambda: _state(url, headers, rid, ("ACTIVE", "FAILED")), 40, "lit") == "ACTIVE"
            meter = rule_plan.reservation_meter(rid)
            provisioned = lambda: _get(f"{url}/reservations/{rid}", headers)["provisioned_bandwidth"]  # noqa: E731
            assert wait_until(lambda: provisioned() == 1.25, 10, "one unit")
            assert meter_rates(session, "A", meter) == [1250]
            seen: list[float] = []
            timeline: list[tuple[float, float]] = []  # (s since the traffic started, provisioned Mbit/s)
            stop = threading.Event()
            t0 = time.time()

            def watch() -> None:
                while not stop.wait(0.5):
                    seen.append(provisioned())
                    timeline.append((round(time.time() - t0, 1), seen[-1]))

            th = threading.Thread(target=watch)
            th.start()
            try:
                got, lost = _udp_mbps(session, 12.0, 4.5)  # more than one unit, less than the grant
            finally:
                stop.set()
                th.join()
            assert max(seen) > 1.25 and max(seen) <= GRANT, seen
            steps = sorted(set(seen))
            assert all(abs(b - a - 1.25) < 1e-6 or b == GRANT for a, b in zip(steps, steps[1:], strict=False)), steps
            assert max(meter_rates(session, "A", meter)) <= GRANT * 1000
            t_end = time.time()
            # the design reads the demand from the ingress rule's counter: OVS must count a packet on its
            # rule before the meter drops it. The meter's own statistics cannot show it here (they restart
            # on METER_MOD: after the grows they held 5.1 of the rule's 6.7 MB and 0 dropped), so: the
            # meter dropped (loss while below the grant; the path's only other limit is 10 Mbit/s) and the
            # rule still counted all that was offered
            rule_bytes = metered_rule_bytes(session, "A", meter)
            offered = got / (1 - lost / 100) * 1e6 / 8 * 12.0  # payload bytes iperf3 sent
            # (lost: > 1 % on a quiet machine; 0.06 % with both cores busy, where the grant grew while
            # iperf3 was slow to send: any loss below the grant is the meter's)
            assert lost > 0.0 and rule_bytes >= 0.95 * offered, (lost, rule_bytes, offered)
            assert wait_until(lambda: provisioned() == 1.25, 40, "back to one unit after the traffic")
            changes = [(t, v) for i, (t, v) in enumerate(timeline) if i == 0 or timeline[i - 1][1] != v]
            print(f"\nMEASURED elastic: 4.5 Mbit/s UDP for 12 s, received {got:.2f} Mbit/s ({lost:.1f} % lost); "
                  f"provisioned over time {changes}; back to one unit {time.time() - t_end:.1f} s after the traffic; "
                  f"A's metered rule counted {rule_bytes} B of {offered:.0f} B offered")
            assert meter_rates(session, "A", meter) == [1250]
            requests.post(f"{url}/reservations/{rid}/cancel", headers=headers, timeout=30).raise_for_status()
            wait_until(lambda: meter_rates(session, "A", meter) == [], 30, "the meter removed with the rules")
            assert session.controller_errors() == "", session.controller_errors()
