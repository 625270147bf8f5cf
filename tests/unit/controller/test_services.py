"""The periodic-work scheduler: posts each service's event per period, never piles up, one failure
policy (logged, counted, swallowed), deadlines that can be pushed back."""
from __future__ import annotations

import pytest

from app.controller import guard, services
from app.controller.services import Deadline, Scheduler, Service


class Ev:
    def __init__(self, tag: str) -> None:
        self.tag = tag


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def scheduler(rows, posted, clock=None):
    clock = clock or Clock()
    spawned: list = []
    sch = Scheduler("app", posted.append, rows, spawn=lambda f, *a: spawned.append((f, a)),
                    sleep=clock.sleep, rand=lambda lo, hi: hi, clock=clock)
    return sch, spawned, clock


def test_each_service_gets_its_own_driver_and_posts_its_event():
    posted: list = []
    sch, spawned, _ = scheduler([Service("a", lambda: Ev("a"), 1.0), Service("b", lambda: Ev("b"), 2.0)], posted)
    sch.start()
    assert len(spawned) == 2 and services.RUNNING[-1] is sch
    assert sch.tick("a") and sch.tick("b")
    assert [e.tag for e in posted] == ["a", "b"]
    sch.stop()
    assert sch not in services.RUNNING


def test_a_pending_event_is_not_posted_again_until_its_run_ended():
    posted: list = []
    sch, _, _ = scheduler([Service("poll", lambda: Ev("p"), 1.0)], posted)
    sch.start()
    assert sch.tick("poll")
    assert not sch.tick("poll")  # still in the queue: the period is skipped, not queued
    sch.run("poll", lambda: None)
    assert sch.tick("poll")
    assert len(posted) == 2 and sch.status()["app.poll"]["skipped"] == 1
    sch.stop()


def test_a_failing_run_is_logged_counted_and_the_service_goes_on(caplog):
    posted: list = []
    sch, _, _ = scheduler([Service("poll", lambda: Ev("p"), 1.0)], posted)
    sch.start()
    before = len(guard.failures)
    sch.tick("poll")

    def boom() -> None:
        raise RuntimeError("switch said no")

    assert sch.run("poll", boom) is None
    st = sch.status()["app.poll"]
    assert st["failures"] == 1 and st["runs"] == 1 and "switch said no" in st["last_error"]
    assert len(guard.failures) == before + 1 and "app.poll" in guard.failures[-1]
    assert "service poll failed" in caplog.text
    assert sch.tick("poll")  # posted again next period
    del guard.failures[before:]
    sch.stop()


def test_a_write_refused_by_the_epoch_fence_is_one_warning_not_a_failure(caplog):
    """A deposed leader (e.g. woken from SIGSTOP) whose service ran before its gate closed: the fence
    refused the write, which is what fencing is for; the error log and the failures stay clean."""
    import logging

    from app.db.fencing import StaleEpoch

    posted: list = []
    sch, _, _ = scheduler([Service("follow", lambda: Ev("f"), 1.0)], posted)
    sch.start()
    before = len(guard.failures)
    sch.tick("follow")

    def write() -> None:
        raise StaleEpoch(0, 6, "c3")

    with caplog.at_level(logging.WARNING):
        assert sch.run("follow", write) is None
    st = sch.status()["app.follow"]
    assert st["refused"] == 1 and st["failures"] == 0 and st["runs"] == 1
    assert len(guard.failures) == before
    rec = [r for r in caplog.records if "service follow" in r.getMessage()]
    assert len(rec) == 1 and rec[0].levelno == logging.WARNING and rec[0].name == "mlte.controller.services"
    assert "epoch is 6 (held by c3)" in rec[0].getMessage() and not rec[0].exc_info
    sch.stop()


def test_the_driver_waits_first_then_posts_every_period_and_stops():
    posted: list = []
    clock = Clock()
    rows = [Service("r", lambda: Ev("r"), 0.5, jitter=0.1, first=0.0)]
    sch, spawned, _ = scheduler(rows, posted, clock)
    sch.start()
    f, args = spawned[0]
    times: list[float] = []

    def sleep(s: float) -> None:
        clock.t += s
        if posted:
            times.append(clock.t)
            sch.run("r", lambda: None)
            posted.clear()
        if len(times) == 3:
            sch.stop()

    sch._sleep = sleep
    f(*args)
    assert times == pytest.approx([0.55, 1.1, 1.65])  # rand gives the top of the jitter band


def test_bad_rows_are_refused():
    with pytest.raises(ValueError, match="interval"):
        Service("x", lambda: None, 0)
    with pytest.raises(ValueError, match="jitter"):
        Service("x", lambda: None, 1.0, jitter=1.5)
    with pytest.raises(ValueError, match="two services"):
        Scheduler("app", print, [Service("x", lambda: None, 1), Service("x", lambda: None, 2)],
                  spawn=lambda *a: None, sleep=lambda s: None)


def test_a_deadline_fires_once_after_the_latest_push():
    posted: list = []
    clock = Clock()
    spawned: list = []
    d = Deadline(posted.append, lambda: Ev("settled"), spawn=lambda f, *a: spawned.append(f),
                 sleep=clock.sleep, clock=clock)
    d.push(2.0)
    d.push(1.0)  # earlier: the later due time stands
    d.push(3.0)
    assert len(spawned) == 1
    spawned.pop()()
    assert [e.tag for e in posted] == ["settled"] and clock.t >= 3.0 and d.due is None
    d.push(clock.t + 1)  # re-armed after it fired
    assert len(spawned) == 1
    d.stop()
    spawned.pop()()
    assert len(posted) == 1  # stopped: nothing posted


def test_later_posts_once_after_its_delay_unless_stopped():
    posted: list = []
    sch, spawned, clock = scheduler([Service("s", lambda: Ev("s"), 1.0)], posted)
    sch.start()
    spawned.clear()
    sch.later(0.3, Ev("follow-up"))
    sch.later(0.1, Ev("gone"))
    f, args = spawned[0]
    f(*args)
    assert [e.tag for e in posted] == ["follow-up"] and clock.t == pytest.approx(0.3)
    sch.stop()
    f, args = spawned[1]
    f(*args)
    assert len(posted) == 1


def test_protect_applies_the_failure_policy_without_ending_the_period():
    posted: list = []
    sch, _, _ = scheduler([Service("poll", lambda: Ev("p"), 1.0)], posted)
    sch.start()
    before = len(guard.failures)
    sch.tick("poll")
    sch.protect("poll", lambda: 1 / 0)
    st = sch.status()["app.poll"]
    assert st["failures"] == 1 and st["runs"] == 0 and not sch.tick("poll")  # still pending
    assert sch.protect("poll", lambda: 7) == 7
    del guard.failures[before:]
    sch.stop()
