"""One place that creates HiGHS solver instances, because HiGHS's thread scheduler is process-wide.

HiGHS starts a global task scheduler on its first run with that run's thread count; a later
``Highs`` asking for a different count then fails with model status "Not Set". Every direct
highspy solve in pce/ goes through :func:`new_highs`, which restarts the scheduler whenever the
requested count differs from the one it last set.
"""
from __future__ import annotations

import os

import highspy

_scheduler_threads: int | None = None


def new_highs(threads: int | None = None, *, verbose: bool = False) -> highspy.Highs:
    """A fresh ``Highs`` using ``threads`` threads (None/0 = all cores), output off unless ``verbose``."""
    global _scheduler_threads
    want = int(threads) if threads else (os.cpu_count() or 1)
    if _scheduler_threads != want:
        highspy.Highs.resetGlobalScheduler(True)
        _scheduler_threads = want
    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(verbose))
    h.setOptionValue("threads", want)
    return h


def reset_scheduler() -> None:
    """Restart HiGHS's scheduler now (e.g. in a forked worker, where the inherited one is unusable);
    the next :func:`new_highs` starts it with the thread count it asks for."""
    global _scheduler_threads
    highspy.Highs.resetGlobalScheduler(True)
    _scheduler_threads = None
