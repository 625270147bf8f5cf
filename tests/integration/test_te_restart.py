"""Issue 24's TE-loop restart on the Fig. 2 testbed: an elephant is offloaded onto a temporary circuit,
the controller is SIGKILLed and started again (same ports, same state file), the new process adopts
the offload from its record (app/te/takeover.py) while the elephant still flows, releases it through
the normal release path once the elephant has ended — its XCONs and steer rules gone — and offloads
a later elephant again instead of skipping it with "no free circuit". Before the takeover the new
process re-adopted the 4 XCON directions of the circuit and never released them."""
from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import time

import pytest

from app.controller.client import wait_until
from mininet_labs.circuits import FIG2_CIRCUITS
from mininet_labs.monitor_lab import band_rules, fig2_monitor_lab
from mininet_labs.traffic import SCRIPT
from topology import rule_plan

pytestmark = pytest.mark.integration

SETTINGS = ("interval = 1.0\nfine_backend = \"flowstats\"\n"
            "[te]\nenabled = true\nmin_hold_s = 5.0\npoll = 1.0\ngone_intervals = 3\nmin_gain_s = 0.3\n")
#: generous bound on "elephant ended -> its circuit released" across the restart (gone_intervals polls
#: of 1 s after the adoption; measured figures are printed)
RELEASE_BOUND_S = 30.0
INITIAL = {(o, p) for o, a, b in FIG2_CIRCUITS["initial"] for p in (a, b)}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with fig2_monitor_lab(tmp_path_factory.mktemp("terestart"), SETTINGS) as session:
        yield session


def flows(lab, sport: int, seconds: float) -> subprocess.Popen:
    """A 4 Mbit/s bursty UDP elephant h1 -> h3 among four 0.2 Mbit/s flows, for ``seconds``."""
    elephant = f"{sport}:4:4:1000:0.1"
    mice = [f"{sport + 1001 + i}:0.2:0.2:500:0.02" for i in range(4)]
    return lab.lab.node("h1").popen([sys.executable, SCRIPT, "flows", "10.0.0.3", "5201", str(seconds), elephant,
                                     *mice], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def offloads_done(lab, since: int = 0) -> list[dict]:
    return [e for e in lab.client.events(since, "te_done") if e["decision"] == "offload" and e["ok"]]


def wait_offloaded(lab, since: int, what: str) -> dict:
    """The first offload done after ``since``; on a timeout the TE loop's decisions say why not."""
    try:
        return wait_until(lambda: offloads_done(lab, since), 30, what)[0]
    except TimeoutError as exc:
        why = [(e["decision"], e["reason"]) for e in lab.client.events(since, "te_decision")]
        raise AssertionError(f"{exc}; decisions: {why}; monitor: {lab.client.events(since, 'monitor')[-5:]}; "
                             f"te: {lab.client.request('GET', '/te')}") from None


def te_records(lab) -> list[tuple[str, str]]:
    """(kind, state) of the TE loop's records: with a database (every lab has one) they are in its
    ``te_records`` table (docs/te-loop.md "Restart and takeover")."""
    with contextlib.closing(sqlite3.connect(lab.work / "capabilities.db")) as db:
        return [(str(k), str(st)) for k, st in db.execute("SELECT kind, state FROM te_records")]


def te_xcons(lab) -> set[tuple[str, int]]:
    """XCON directions (OTS, in_port) that are not the static circuit 'initial'."""
    return {(x["ots"], x["in_port"]) for x in lab.client.xcons()} - INITIAL


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=10)


def test_an_offload_survives_a_restart_is_released_when_its_elephant_ends_and_a_later_one_moves(lab):
    since = lab.client.events()[-1]["seq"]
    t0 = time.time()
    proc = flows(lab, 45000, 40)
    try:
        done = wait_offloaded(lab, since, "the elephant offloaded")
        offloaded_s = done["t"] - t0
        xcons = te_xcons(lab)
        assert len(xcons) == 4, lab.client.xcons()  # the temporary circuit: 2 XCONs, 4 directions
        assert band_rules(lab, "A", rule_plan.STEER) and band_rules(lab, "C", rule_plan.STEER)
        assert ("offload", "lit") in te_records(lab)  # recorded in the controller's database (te_records)

        killed = time.time()
        lab.restart_controller(kill=True)
        takeover = wait_until(lambda: lab.client.events(0, "te_takeover"), 40, "the TE takeover pass")[0]
        took_s = takeover["t"] - killed
        adopted = lab.client.events(0, "te_adopted")
        assert takeover["adopted"] == 1 and takeover["released"] == 0, (takeover, lab.client.events(0, "te_decision"))
        assert len(adopted) == 1 and adopted[0]["kind"] == "offload"
        assert {(x["ots"], p) for x in adopted[0]["xcons"] for p in (x["in_port"], x["out_port"])} == xcons
        assert proc.poll() is None, "the elephant ended before the takeover: the test proves nothing"
        te = lab.client.request("GET", "/te")
        assert te["adopted"] and len(te["offloads"]) == 1, te
        assert te_xcons(lab) == xcons  # still lit while the elephant flows
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    ended = time.time()
    release = wait_until(lambda: [e for e in lab.client.events(0, "te_done") if e["decision"] == "release" and e["ok"]],
                         RELEASE_BOUND_S, "the adopted offload released after its elephant ended")[0]
    released_s = release["t"] - ended
    assert te_xcons(lab) == set(), lab.client.xcons()
    assert band_rules(lab, "A", rule_plan.STEER) == [] and band_rules(lab, "C", rule_plan.STEER) == []
    assert te_records(lab) == []

    # a later elephant between the same switches moves again (the circuit is free again)
    since = lab.client.events()[-1]["seq"]
    t1 = time.time()
    proc = flows(lab, 45200, 14)
    try:
        again = wait_offloaded(lab, since, "the later elephant offloaded")
    finally:
        stop(proc)
    skips = [e for e in lab.client.events(since, "te_decision") if "no free circuit" in e["reason"] or "no free XCON chain" in e["reason"]]
    assert skips == []
    wait_until(lambda: [e for e in lab.client.events(since, "te_done") if e["decision"] == "release" and e["ok"]],
               RELEASE_BOUND_S, "the later offload released")
    assert te_xcons(lab) == set()
    print(f"\nTE restart: offloaded {offloaded_s:.2f} s after the elephant started; takeover pass "
          f"{took_s:.2f} s after the SIGKILL ({takeover['waited_s']:.2f} s after the new process started; "
          f"adopted 1); released {released_s:.2f} s after the elephant "
          f"ended; a later elephant offloaded {again['t'] - t1:.2f} s after it started")
