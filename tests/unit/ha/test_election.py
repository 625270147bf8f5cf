"""The leader election against a real etcd (Debian's etcd-server, started by app.ha.etcd_server).

Each test uses its own election key on a shared etcd, or its own etcd when it stops it; every etcd is
stopped by PID when its fixture ends, also on failure. Takeover times are recorded (printed and
``record_property``), only bounded loosely here: bench/ha_election.py measures them.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.ha import election as election_mod
from app.ha.election import Election, ElectionError, run
from app.ha.etcd_server import EtcdServer, EtcdServerError, etcd_server, find_etcd

ROOT = Path(__file__).resolve().parents[3]

try:
    find_etcd()
    _NO_ETCD = ""
except EtcdServerError as exc:
    _NO_ETCD = str(exc)

pytestmark = pytest.mark.skipif(bool(_NO_ETCD), reason=_NO_ETCD or "etcd present")


@pytest.fixture(scope="module")
def shared_etcd() -> Iterator[EtcdServer]:
    with etcd_server() as server:
        yield server


@pytest.fixture
def own_etcd() -> Iterator[EtcdServer]:
    with etcd_server() as server:
        yield server


@pytest.fixture
def key() -> str:
    return f"/mlte/test/{uuid.uuid4().hex}"


class CountingClient:
    """A real etcd3gw client that counts the requests it sends (to prove a check made none)."""

    def __init__(self, endpoint: str) -> None:
        self.inner = election_mod._client_for(endpoint, 1.0)
        self.calls = 0

    def get_url(self, path: str) -> str:
        return self.inner.get_url(path)

    def post(self, url: str, *args: Any, json: Any = None, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner.post(url, *args, json=json, **kwargs)


class Loop:
    """run() in a thread, recording each transition with its monotonic time."""

    def __init__(self, election: Election, interval: float | None = None) -> None:
        self.election = election
        self.events: list[tuple[str, object, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=run, args=(election, self._elected, self._deposed),
            kwargs={"stop": self.stop, "interval": interval}, daemon=True)

    def _elected(self, epoch: int) -> None:
        self.events.append(("elected", epoch, time.monotonic()))

    def _deposed(self, reason: str) -> None:
        self.events.append(("deposed", reason, time.monotonic()))

    def kinds(self) -> list[str]:
        return [e[0] for e in self.events]

    def __enter__(self) -> Loop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the election loop did not stop"


def wait_until(cond: Callable[[], object], timeout: float = 10.0, step: float = 0.01) -> float:
    """Poll ``cond`` until true; the monotonic time it became true (fails the test after timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return time.monotonic()
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


def test_two_candidates_exactly_one_leader(shared_etcd: EtcdServer, key: str) -> None:
    a = Election(shared_etcd.endpoint, key=key, candidate="a")
    b = Election(shared_etcd.endpoint, key=key, candidate="b")
    results = {"a": a.campaign(), "b": b.campaign()}
    winners = [name for name, epoch in results.items() if epoch is not None]
    assert winners == ["a"]
    assert a.is_leader() and not b.is_leader()
    assert a.leader() == b.leader() == ("a", results["a"])
    assert b.keepalive() is False  # a follower has nothing to keep alive
    assert a.keepalive() is True
    assert b.campaign() is None  # still a's
    a.resign()
    assert not a.is_leader() and a.leader() is None


def test_concurrent_campaigns_elect_one(shared_etcd: EtcdServer, key: str) -> None:
    cands = [Election(shared_etcd.endpoint, key=key, candidate=f"c{i}") for i in range(6)]
    barrier = threading.Barrier(len(cands))
    epochs: dict[str, int | None] = {}

    def go(e: Election) -> None:
        barrier.wait()
        epochs[e.candidate] = e.campaign()

    threads = [threading.Thread(target=go, args=(e,)) for e in cands]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    won = {n: ep for n, ep in epochs.items() if ep is not None}
    assert len(won) == 1, epochs
    (name, epoch), = won.items()
    assert cands[0].leader() == (name, epoch)
    for e in cands:
        e.resign()


def test_epoch_grows_across_elections_and_etcd_restarts(own_etcd: EtcdServer, key: str) -> None:
    a = Election(own_etcd.endpoint, key=key, candidate="a")
    b = Election(own_etcd.endpoint, key=key, candidate="b")
    epochs = []
    for leader in (a, b, a, b):
        epoch = leader.campaign()
        assert epoch is not None
        epochs.append(epoch)
        assert leader.resign() is True
    own_etcd.stop()
    own_etcd.start()  # same data directory: revisions continue
    epoch = a.campaign()
    assert epoch is not None
    epochs.append(epoch)
    assert epochs == sorted(set(epochs)), epochs


def test_resign_hands_over_to_a_running_follower(shared_etcd: EtcdServer, key: str,
                                                 record_property: Callable[[str, object], None]) -> None:
    a = Election(shared_etcd.endpoint, key=key, candidate="a")
    first = a.campaign()
    assert first is not None
    with Loop(Election(shared_etcd.endpoint, key=key, candidate="b")) as b:
        time.sleep(0.3)
        assert b.kinds() == []
        t0 = time.monotonic()
        a.resign()
        elected_at = wait_until(lambda: b.kinds() == ["elected"])
        took = elected_at - t0
        print(f"takeover after resign: {took:.3f}s")
        record_property("takeover_after_resign_s", round(took, 3))
        assert took < 10
        assert b.events[0][1] > first
    assert b.kinds() == ["elected", "deposed"] and b.events[1][1] == "stopped"


def test_takeover_when_the_leader_stops_keepalive(shared_etcd: EtcdServer, key: str,
                                                  record_property: Callable[[str, object], None]) -> None:
    with Loop(Election(shared_etcd.endpoint, key=key, candidate="a")) as a:
        wait_until(lambda: a.kinds() == ["elected"])
        with Loop(Election(shared_etcd.endpoint, key=key, candidate="b")) as b:
            time.sleep(0.5)
            assert b.kinds() == [] and a.election.is_leader()
            # "kill" a: its loop stops without resigning, its lease is no longer refreshed
            a.election.resign = lambda: False  # type: ignore[method-assign]
            died_at = time.monotonic()
            a.stop.set()
            a.thread.join(5)
            elected_at = wait_until(lambda: b.kinds() == ["elected"])
            took = elected_at - died_at
            print(f"takeover after the leader stopped its keepalive: {took:.3f}s")
            record_property("takeover_after_death_s", round(took, 3))
            assert took < 10
            new_epoch = b.events[0][1]
            assert isinstance(new_epoch, int) and new_epoch > a.events[0][1]  # type: ignore[operator]
            assert b.election.leader() == ("b", new_epoch)


def test_frozen_leader_knows_without_contacting_etcd(shared_etcd: EtcdServer, key: str) -> None:
    counting = CountingClient(shared_etcd.endpoint)
    a = Election(shared_etcd.endpoint, key=key, candidate="a", client=counting)
    assert a.campaign() is not None
    for _ in range(3):
        assert a.keepalive()
        time.sleep(a.ttl / 4)
    assert a.is_leader()
    time.sleep(a.ttl + 0.1)  # "frozen": no keepalive for longer than the ttl
    sent = counting.calls
    assert a.is_leader() is False
    assert a.is_leader(now=a.valid_until - 0.01) is True  # the rule is the local deadline alone
    assert counting.calls == sent, "is_leader() must not contact etcd"
    assert a.keepalive() is False
    assert "validity passed" in a.deposed_reason
    b = Election(shared_etcd.endpoint, key=key, candidate="b")
    # the woken leader revoked its lease, so the next campaign starts a new term at once
    assert b.campaign() is not None


_FROZEN_CHILD = textwrap.dedent("""
    import sys, time
    from app.ha.election import Election
    e = Election(sys.argv[1], key=sys.argv[2], candidate="frozen")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # lead, with a just-confirmed keepalive (retried on a slow machine)
        if (e.is_leader() or e.campaign() is not None) and e.keepalive():
            break
        time.sleep(0.05)
    print("ready", e.epoch, flush=True)
    time.sleep(0.3)  # SIGSTOP arrives while sleeping
    print("woke", e.is_leader(), flush=True)
    print("keepalive", e.keepalive(), e.deposed_reason, flush=True)
""")


def test_sigstopped_leader_wakes_up_deposed(shared_etcd: EtcdServer, key: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", _FROZEN_CHILD, shared_etcd.endpoint, key],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
        assert line[:1] == ["ready"] and line[1] != "None", (line, child.poll())
        frozen_epoch = int(line[1])
        os.kill(child.pid, signal.SIGSTOP)
        b = Election(shared_etcd.endpoint, key=key, candidate="b")
        wait_until(lambda: b.campaign() is not None, timeout=10, step=0.05)
        assert b.epoch is not None and b.epoch > frozen_epoch
        os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate(timeout=10)
        assert out.splitlines()[0] == "woke False", out
        assert out.splitlines()[1].startswith("keepalive False"), out
        assert b.keepalive() and b.leader() == ("b", b.epoch)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(5)


def test_stale_leader_keepalive_fails_once_the_key_is_taken(shared_etcd: EtcdServer, key: str) -> None:
    a = Election(shared_etcd.endpoint, key=key, candidate="a", ttl=5.0)
    epoch_a = a.campaign()
    assert epoch_a is not None
    # an operator deletes the key (forcing a new election) and b wins while a's lease still lives
    ops = election_mod._client_for(shared_etcd.endpoint, 1.0)
    ops.delete(key)
    b = Election(shared_etcd.endpoint, key=key, candidate="b", ttl=5.0)
    epoch_b = b.campaign()
    assert epoch_b is not None and epoch_b > epoch_a
    assert a.is_leader()  # locally still valid: only etcd knows
    assert a.keepalive() is False
    assert a.deposed_reason == f"election key no longer ours (now b, epoch {epoch_b})"
    assert not a.is_leader()
    assert b.keepalive() and b.leader() == ("b", epoch_b)  # a's revoke did not touch b's lease
    b.resign()


def test_etcd_down_deposes_the_leader_after_valid_until(own_etcd: EtcdServer, key: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=election_mod.__name__)
    with Loop(Election(own_etcd.endpoint, key=key, candidate="a")) as a:
        wait_until(lambda: a.kinds() == ["elected"])
        with Loop(Election(own_etcd.endpoint, key=key, candidate="b")) as b:
            time.sleep(0.5)
            own_etcd.stop()
            stopped_at = time.monotonic()
            last_valid = a.election.valid_until
            deposed_at = wait_until(lambda: a.kinds() == ["elected", "deposed"])
            assert deposed_at >= last_valid  # never before its validity ran out ...
            assert deposed_at - stopped_at < a.election.ttl + 2.0  # ... and soon after
            assert "validity passed; etcd unreachable" in str(a.events[1][1])
            time.sleep(1.5)  # both keep retrying, each logs its trouble once
            assert b.kinds() == [] and a.kinds() == ["elected", "deposed"]
            own_etcd.start()
            wait_until(lambda: len(a.events) + len(b.events) == 3)
    for cand in ("a", "b"):
        complaints = [r for r in caplog.records
                      if r.getMessage().startswith(f"election {cand}: ") and "retrying" in r.getMessage()]
        assert len(complaints) == 1, [r.getMessage() for r in complaints]
    assert [r for r in caplog.records if r.getMessage() == "election b: etcd answers again"]


def test_bad_input_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ElectionError, match="needs a name"):
        Election("http://127.0.0.1:2379")
    with pytest.raises(ElectionError, match="bad etcd endpoint"):
        Election("http://127.0.0.1", candidate="a")
    with pytest.raises(EtcdServerError, match="make test"):
        find_etcd(str(tmp_path / "no-etcd"))
    with pytest.raises(EtcdServerError, match="installs Debian's etcd-server"):
        EtcdServer(binary=str(tmp_path / "no-etcd"))


def test_unreachable_etcd_raises_from_campaign() -> None:
    from app.ha.etcd_server import free_port

    e = Election(f"http://127.0.0.1:{free_port()}", candidate="a")
    with pytest.raises(ElectionError, match="failed"):
        e.campaign()
    assert e.keepalive() is False and not e.is_leader()


def test_server_stops_by_pid_and_cleans_up() -> None:
    server = EtcdServer()
    with server:
        pid = server.pid
        assert pid is not None and server.healthy()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not server.base.exists()


def test_a_dead_endpoint_is_skipped_for_the_next(shared_etcd: EtcdServer, key: str) -> None:
    from app.ha.etcd_server import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    a = Election([dead, shared_etcd.endpoint], key=key, candidate="a")
    epoch = a.campaign()
    assert epoch is not None and a.keepalive()
    assert a.leader() == ("a", epoch)
    assert a.resign() is True


def test_run_calls_each_callback_once_per_transition(shared_etcd: EtcdServer, key: str) -> None:
    calls: list[tuple[str, object]] = []
    slept: list[float] = []
    e = Election(shared_etcd.endpoint, key=key, candidate="a")
    rounds = iter(range(12))

    def sleep(s: float) -> None:  # the injected sleep: real time passes, the loop stops after 12 rounds
        slept.append(s)
        time.sleep(s)

    run(e, lambda ep: calls.append(("elected", ep)), lambda why: calls.append(("deposed", why)),
        sleep=sleep, stop=lambda: next(rounds, None) is None)
    assert [c[0] for c in calls] == ["elected", "deposed"]
    assert calls[1][1] == "stopped" and len(slept) == 12 and set(slept) == {e.ttl / 4}
    assert e.leader() is None  # stopping while leader resigned: the key went at once
