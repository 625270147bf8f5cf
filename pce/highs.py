"""One place that creates HiGHS solver instances, because HiGHS's thread scheduler is process-wide.

HiGHS starts a global task scheduler on its first run with that run's thread count; a later
``Highs`` asking for a different count then fails with model status "Not Set". Every direct
highspy solve in pce/ goes through :func:`new_highs`, which restarts the scheduler whenever the
requested count differs from the one it last set.

HiGHS also prints its licence banner ("Running HiGHS …") straight to the process's stdout when
the first ``Highs`` of a process is built, before any option (``output_flag``) can be set — also
inside PuLP's ``HiGHS(msg=False)``. :func:`quiet_banner` builds that first instance with stdout
pointed at /dev/null; :func:`new_highs` calls it, and so do the CLI commands that solve through PuLP,
so command output on stdout is results only.
"""
from __future__ import annotations

import ctypes
import os
import sys

import highspy

_scheduler_threads: int | None = None
_banner_done = False


def quiet_banner() -> None:
    """Build the process's first ``Highs`` with file descriptor 1 on /dev/null, so HiGHS's banner
    (printed once per process, at construction, whatever the options) never reaches stdout."""
    global _banner_done
    if _banner_done:
        return
    _banner_done = True
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
        ctypes.CDLL(None).fflush(None)  # whatever the C library buffered goes to /dev/null too
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def new_highs(threads: int | None = None, *, verbose: bool = False) -> highspy.Highs:
    """A fresh ``Highs`` using ``threads`` threads (None/0 = all cores), output off unless ``verbose``."""
    global _scheduler_threads
    quiet_banner()
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
