"""xcon-downtime lab arithmetic: loss runs, the downtime of each change, the provisioning delays the
OTS agent logged and the break-down (the Mininet run itself is tests/integration/test_labs_issue13.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mininet_labs import xcon_downtime as xd


def test_loss_runs_finds_each_gap_and_a_trailing_one() -> None:
    got = set(range(10)) - {2, 3, 4, 7}
    assert xd.loss_runs(12, got) == [(2, 3), (7, 1), (10, 2)]
    assert xd.loss_runs(3, {0, 1, 2}) == []


def test_each_change_gets_the_longest_run_that_began_after_it() -> None:
    # 1 packet per ms from t=100.000; lost 200..399 (after a change at 100.195) and 700..709 (jitter)
    arrivals = {n: 100.0 + n / 1000 for n in range(1000) if not (200 <= n < 400 or 700 <= n < 710)}
    out = xd.downtimes([100.195, 100.9], 1000, arrivals)
    assert out[0]["lost"] == 200 and out[0]["downtime_ms"] == pytest.approx(200.0)
    assert out[0]["dark_from"] == pytest.approx(100.199) and out[0]["dark_to"] == pytest.approx(100.4)
    assert out[1] == {"at": 100.9, "lost": 0, "downtime_ms": 0.0, "dark_at_request": False}  # 700-709 began before


def test_a_change_never_takes_the_next_changes_loss_run() -> None:
    # a change at 100.1 that lost nothing, the next one at 100.5 lost 600..799
    arrivals = {n: 100.0 + n / 1000 for n in range(1000) if not 600 <= n < 800}
    a, b = xd.downtimes([100.1, 100.5], 1000, arrivals)
    assert a["lost"] == 0 and b["lost"] == 200


def test_a_change_requested_while_the_last_one_is_still_dark_says_so() -> None:
    # the first change's run (200..899) outlasted the second change's request at 100.5: it has no run of its own
    arrivals = {n: 100.0 + n / 1000 for n in range(1000) if not 200 <= n < 900}
    a, b = xd.downtimes([100.15, 100.5], 1000, arrivals)
    assert a["lost"] == 700 and b["lost"] == 0 and b["dark_at_request"] is True


def test_the_probe_stops_on_sigterm_with_its_count_and_arrivals(tmp_path: Path) -> None:
    """The lab stops the 1-ms probe after its last change instead of guessing its length up front."""
    import signal
    import subprocess
    import sys
    import time

    from mininet_labs.planned_vs_oneshot import RECEIVER, SENDER
    from tests.lib.udp import free_port, wait_bound

    (tmp_path / "send.py").write_text(SENDER)
    (tmp_path / "recv.py").write_text(RECEIVER)
    port, got = free_port(), tmp_path / "got.json"
    recv = subprocess.Popen([sys.executable, str(tmp_path / "recv.py"), str(port), "600", str(got)])
    send = None
    try:
        wait_bound(port, recv)
        send = subprocess.Popen([sys.executable, str(tmp_path / "send.py"), "127.0.0.1", str(port), "600", "0.001"],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        send.send_signal(signal.SIGTERM)
        out, _ = send.communicate(timeout=10)
        time.sleep(0.2)
        recv.send_signal(signal.SIGTERM)
        assert recv.wait(timeout=10) == 0 and send.returncode == 0
    finally:
        for proc in (send, recv):
            if proc is not None and proc.poll() is None:
                proc.kill()
    sent = int(out.split()[0])
    arrivals = json.loads(got.read_text())
    assert 50 <= sent < 600_000 and 0 < len(arrivals) <= sent  # stopped early, and said how many it sent


def test_the_receiver_beats_and_the_lab_waits_for_the_probe_to_come_through(tmp_path: Path, monkeypatch) -> None:
    """The next change starts only once a probe packet has arrived after this one's links showed: links in
    the view do not prove the data plane switched."""
    import socket
    import subprocess
    import sys
    import time

    from mininet_labs.planned_vs_oneshot import RECEIVER
    from tests.lib.udp import free_port, wait_bound

    (tmp_path / "recv.py").write_text(RECEIVER)
    port, got, beat = free_port(), tmp_path / "got.json", tmp_path / "beat"
    recv = subprocess.Popen([sys.executable, str(tmp_path / "recv.py"), str(port), "600", str(got), str(beat)])
    notes: list[str] = []
    monkeypatch.setattr(xd, "LINK_WAIT_S", 0.5)
    try:
        wait_bound(port, recv)
        since = time.time()
        assert xd.wait_for_traffic(beat, since, since - 0.2, notes.append) is None  # nothing sent: waits, gives up
        assert notes and "no probe packet" in notes[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto((7).to_bytes(4, "big") + b"p" * 60, ("127.0.0.1", port))
        ms = xd.wait_for_traffic(beat, since, since - 0.2, notes.append)
        assert ms is not None and ms > 200.0  # after `since`, which was 0.2 s after the request
        assert xd.wait_for_traffic(beat, time.time(), 0.0, notes.append) is None  # an old packet is not traffic
    finally:
        recv.terminate()
        recv.wait(timeout=10)
    assert json.loads(got.read_text()).keys() == {"7"}


def test_a_slow_api_call_widens_the_changes_window() -> None:
    # on a loaded machine the call took 1.6 s: the circuit went dark 1.7 s after the request (1700..1899)
    arrivals = {n: 100.0 + n / 1000 for n in range(3000) if not 1700 <= n < 1900}
    assert xd.downtimes([100.0], 3000, arrivals)[0]["lost"] == 0  # outside the 1-s window alone
    assert xd.downtimes([100.0], 3000, arrivals, api_s=[1.6])[0]["lost"] == 200


def test_a_change_applied_in_two_batches_is_dark_for_both() -> None:
    changes = [{"at": 10.0, "downtime_ms": 400.0}, {"at": 11.0, "downtime_ms": 200.0}]
    xd.attribute(changes, [(10.2, 0.18), (10.4, 0.19), (11.2, 0.17)])
    assert changes[0]["provisioning_ms"] == 370.0 and changes[0]["batches"] == 2
    assert changes[1]["provisioning_ms"] == 170.0 and changes[1]["overhead_ms"] == 30.0


def test_provisioning_delays_are_read_from_the_agent_log(tmp_path: Path) -> None:
    log = tmp_path / "ots-Y.log"
    log.write_text("2026-11-25 10:00:00,100 mlte.ots INFO applied 2 change(s) after 0.000s dark; XCONs now []\n"
                   "2026-11-25 10:00:00,400 mlte.ots INFO applied 2 change(s) after 0.187s dark; XCONs now [(1, 4)]\n"
                   "garbage line\n")
    (t, d), = xd.provisioning_delays(log)
    assert d == pytest.approx(0.187)
    assert xd.provisioning_delays(tmp_path / "missing.log") == []
    changes = [{"at": t - 0.3, "downtime_ms": 210.0}, {"at": t + 5, "downtime_ms": 190.0}]
    xd.attribute(changes, [(t, d)])
    assert changes[0]["provisioning_ms"] == 187.0 and changes[0]["overhead_ms"] == 23.0
    assert changes[1]["provisioning_ms"] is None  # no batch logged after it: not guessed


def test_summary_and_plot(tmp_path: Path) -> None:
    changes = [{"kind": "bypass", "at": float(i), "downtime_ms": float(m), "provisioning_ms": m - 20.0,
                "overhead_ms": 20.0} for i, m in enumerate(range(170, 240, 2))]
    s = xd.summarise(changes)
    assert s["min_ms"] == 170.0 and s["max_ms"] == 238.0 and s["p95_ms"] == 236.0
    assert s["controller_overhead_ms_mean"] == 20.0 and s["provisioning_ms_mean"] == pytest.approx(184.0)
    xd.plot({**s, "changes": changes}, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_reps_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reps must be >= 1"):
        xd.run(tmp_path, reps=-1)


def test_finish_collects_output_and_kills_what_overruns() -> None:
    import subprocess
    import sys

    from mininet_labs.workdir import finish

    quick = subprocess.Popen([sys.executable, "-c", "print('ok')"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    (out, _), _ = finish([quick, slow], 1.0)
    assert out.strip() == "ok" and slow.poll() is not None


def test_the_journal_splits_the_time_after_the_xcon_was_confirmed() -> None:
    changes = [{"at": 10.0, "dark_to": 10.260}, {"at": 11.0, "dark_to": None}]
    events = [{"t": 10.01, "type": "xcon_delete", "ok": True}, {"t": 10.22, "type": "xcon_add", "ok": True},
              {"t": 10.235, "type": "link_add"}, {"t": 10.24, "type": "link_add"},
              {"t": 11.2, "type": "xcon_add", "ok": True}]
    xd.packet_layer(changes, events)
    assert changes[0]["lit_to_link_ms"] == 20.0 and changes[0]["link_to_traffic_ms"] == 20.0
    assert changes[1]["lit_to_link_ms"] is None and changes[1]["link_to_traffic_ms"] is None  # no link seen



def test_the_next_change_waits_for_this_ones_links_and_a_missing_link_is_noted() -> None:
    """A CI run's bypass whose link LLDP missed was still dark when its restore began (1,118 ms and
    0 ms): the lab now waits for a change's links before the next one, and says when they never came."""
    want = {("A", 3, "C", 1), ("C", 1, "A", 3)}
    calls: list[tuple[set, float]] = []
    notes: list[str] = []

    class Session:
        def __init__(self, ok: bool) -> None:
            self.ok = ok

        def wait_links(self, expected, timeout):
            calls.append((expected, timeout))
            if not self.ok:
                raise TimeoutError("timed out")

    import time

    ms = xd.wait_for_links(Session(True), want, time.time() - 0.25, notes.append)
    assert calls == [(want, xd.LINK_WAIT_S)] and ms is not None and 250.0 <= ms < 1000.0 and notes == []
    assert xd.wait_for_links(Session(False), want, time.time(), notes.append) is None
    assert notes == [f"the change's links did not show within {xd.LINK_WAIT_S:g} s: going on"]
