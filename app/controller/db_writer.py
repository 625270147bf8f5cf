"""One OS thread that does all of the controller's database writes, so a locked database never stalls the hub.

The controller runs on the eventlet hub with only threads green-patched: a SQLite write that waits for
the write lock (the web service's admission holds ``BEGIN IMMEDIATE``) would block the whole process —
LLDP, echo replies, barriers and the control API — for up to the busy timeout. Here the apps only
*enqueue* jobs (a callable applied to a named resource such as the monitor store or the web feed);
a real OS thread (``eventlet.patcher.original("threading")``) opens the resources and runs the jobs in
order, and sqlite releases the GIL while it waits, so the hub keeps running.

The writer owns the controller's one database engine: :func:`shared` gives it a ``connect``
function, called once in the writer thread before the first resource opens (it opens the
:class:`~app.db.engine.Database` and migrates it, unless ``mlte controller``'s start-up check already
migrated it and said so with :func:`migrated`); each resource's factory receives that database, and
the writer disposes it when it closes.

The queue is bounded (``[controller] db_queue_max`` jobs). When it is full the oldest *droppable*
job (utilization samples, retention pruning) is discarded and counted; events, snapshots and records
are never dropped (they may exceed the bound, with a warning). Failed jobs are retried
(non-droppable ones only) and then reported: the thread never logs itself — green locks in the
logging handlers are not safe across OS threads — it queues its messages, and :meth:`DbWriter.pump`
(called on the hub) logs them to ``mlte.controller.errors`` and ``guard.failures`` (``GET /health``).
:meth:`DbWriter.close` flushes what is queued, within a timeout.

Fencing (issue 24, docs/operations.md "Database fencing"): the writer holds the controller's
:class:`~app.db.fencing.Fence` (``writer.fence``; ``Fence()`` — no check — unless several
controllers are elected) and attaches a :class:`~app.db.fencing.Guard` to its database's engine, so
*every* transaction any resource commits (snapshots, circuits, events, capability records,
reservation state through the provisioning store, monitor samples and prunes) checks the stored
epoch just before it commits. :meth:`DbWriter.claim` makes this controller the database's leader, in
queue order. A refused job (:class:`~app.db.fencing.StaleEpoch`) is rolled back, counted
(``refused_writes`` in :meth:`DbWriter.stats`, hence ``GET /health``) and never retried.
"""
from __future__ import annotations

import logging
import traceback
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.db import fencing

if TYPE_CHECKING:
    from app.controller.services import Scheduler

with warnings.catch_warnings():  # "Eventlet is deprecated" (the launcher silences it too)
    warnings.simplefilter("ignore")  # EventletDeprecationWarning is not a DeprecationWarning
    from eventlet import patcher

_threading = patcher.original("threading")
_time = patcher.original("time")

LOG = logging.getLogger("mlte.controller.db_writer")

SAMPLE = "sample"  # utilization / latency time series: droppable
PRUNE = "prune"  # retention clean-up: droppable, at most one queued per resource
EVENT = "event"  # monitoring / controller events: never dropped
SNAPSHOT = "snapshot"  # topology snapshots and circuits: never dropped
RECORD = "record"  # other state (node capabilities): never dropped
OPEN = "open"  # open a resource (internal)
DATABASE = "database"  # the resource name of the writer's Database itself (claims)
DROPPABLE = frozenset({SAMPLE, PRUNE})
KINDS = frozenset({SAMPLE, PRUNE, EVENT, SNAPSHOT, RECORD})
DEFAULT_MAX_JOBS = 1000
PUMP_S = 0.2  # how often the writer thread's reports are logged on the hub


@dataclass
class Job:
    kind: str
    resource: str
    fn: Callable[[Any], Any]
    on_error: Callable[[BaseException], None] | None = None


class WriterClosed(RuntimeError):
    """A job was submitted after :meth:`DbWriter.close`."""


class DbWriter:
    """A bounded job queue drained by one OS thread that owns the database resources."""

    def __init__(self, max_jobs: int = DEFAULT_MAX_JOBS, retries: int = 2, retry_delay: float = 1.0,
                 name: str = "mlte-db-writer", connect: Callable[[], Any] | None = None) -> None:
        if max_jobs < 1:
            raise ValueError("max_jobs must be >= 1")
        self.max_jobs = max_jobs
        self.retries = retries
        self.retry_delay = retry_delay
        self.name = name
        self._cond = _threading.Condition(_threading.Lock())
        self._jobs: deque[Job] = deque()
        self._connect = connect
        self._database: Any = None  # what ``connect`` returned (writer thread only)
        self._factories: dict[str, Callable[[Any], Any]] = {}
        self._resources: dict[str, Any] = {}  # touched by the writer thread only
        self._running = False  # a job is being executed (for flush)
        self._closing = False
        self._thread: Any = None
        # (level, text, to the error log?) for pump()
        self._messages: deque[tuple[int, str, bool]] = deque(maxlen=1000)
        self.written = 0
        self.errors = 0
        self.dropped: dict[str, int] = {k: 0 for k in sorted(DROPPABLE)}
        self.over_bound = 0  # non-droppable jobs accepted while the queue was full
        self.last_error = ""
        self.guard = fencing.Guard()  # attached to the database's engine when it opens
        self._refusal_reported: fencing.Fence | None = None  # one warning per fence that is refused

    @property
    def fence(self) -> fencing.Fence:
        """The epoch this controller writes under (``Fence()``: one controller, no check)."""
        return self.guard.fence

    @fence.setter
    def fence(self, value: fencing.Fence) -> None:
        """Set by the leader election (e.g. ``Fence.standby()`` at once when the lease is lost): the
        next transaction committed in the writer thread is checked against it."""
        if not isinstance(value, fencing.Fence):
            raise TypeError(f"fence must be an app.db.fencing.Fence, got {type(value).__name__}")
        self.guard.fence = value

    def claim(self, epoch: int, holder: str, *, sleep: Callable[[float], Any] = _time.sleep,
              timeout: float = 60.0) -> int:
        """Make this controller the database's leader: raise the stored epoch to ``epoch``
        (:func:`app.db.fencing.claim`) and, in the same job, write under ``Fence(epoch, holder)`` from
        then on (jobs queued before it keep the fence they were queued under). Returns the epoch
        stored before; :class:`~app.db.fencing.StaleEpoch` if a newer one is stored (the fence is
        left as it was). Waits like :meth:`call` (pass ``hub.sleep`` on the hub)."""

        def take(db: Any) -> int:
            with db.session() as s:
                before = fencing.claim(s, epoch, holder)
            self.guard.fence = fencing.Fence(epoch, holder)
            return before

        return int(self.call(DATABASE, take, sleep=sleep, timeout=timeout))

    # ---- called from the hub (never blocks on the database) -----------------------------------------
    def start(self) -> DbWriter:
        if self._thread is None:
            self._thread = _threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def open(self, resource: str, factory: Callable[[Any], Any]) -> None:
        """Register ``factory`` for ``resource``; it is called in the writer thread with the writer's
        database (None without ``connect``): first thing queued, and again before a later job if
        opening failed, e.g. on a locked database at start-up."""
        with self._cond:
            self._factories[resource] = factory
        self._put(Job(OPEN, resource, lambda _r: None))

    def submit(self, kind: str, resource: str, fn: Callable[[Any], Any],
               on_error: Callable[[BaseException], None] | None = None) -> bool:
        """Queue ``fn(resource_object)``; returns False if it (a droppable job) was dropped at once.
        ``on_error`` runs in the writer thread after the last failed attempt (keep it trivial)."""
        if kind not in KINDS:
            raise ValueError(f"unknown job kind {kind!r} (known: {', '.join(sorted(KINDS))})")
        return self._put(Job(kind, resource, fn, on_error))

    def _put(self, job: Job) -> bool:
        with self._cond:
            if self._closing:
                raise WriterClosed(f"{self.name} is closed")
            queued_prune = next((j for j in self._jobs if j.kind == PRUNE and j.resource == job.resource), None)
            if job.kind == PRUNE and queued_prune is not None:
                queued_prune.fn = job.fn  # one prune (the newer cut-off) does the work of both
                return True
            if len(self._jobs) >= self.max_jobs:
                victim = next((j for j in self._jobs if j.kind in DROPPABLE), None)
                if victim is not None:
                    self._jobs.remove(victim)
                    self.dropped[victim.kind] += 1
                elif job.kind in DROPPABLE:
                    self.dropped[job.kind] += 1
                    return False
                else:
                    self.over_bound += 1
            self._jobs.append(job)
            self._cond.notify()
        return True

    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._jobs) + (1 if self._running else 0)

    def stats(self) -> dict[str, Any]:
        """For ``GET /health``: queue length, jobs written, drops, errors."""
        with self._cond:
            return {"queued": len(self._jobs), "max_jobs": self.max_jobs, "written": self.written,
                    "errors": self.errors, "dropped_samples": self.dropped[SAMPLE],
                    "dropped_prunes": self.dropped[PRUNE], "over_bound": self.over_bound,
                    "busy": self._running, "last_error": self.last_error,
                    "alive": bool(self._thread and self._thread.is_alive()), **self.guard.stats()}

    def pump(self, logger: logging.Logger | None = None, failures: list[str] | None = None) -> int:
        """Log what the writer thread reported (call on the hub); errors also go to ``failures``."""
        log = logger or LOG
        n = 0
        while self._messages:
            level, text, error_log = self._messages.popleft()
            (log if level >= logging.WARNING and error_log else LOG).log(level, "%s", text)
            if failures is not None and level >= logging.ERROR:
                failures.append(text.splitlines()[0])
            n += 1
        return n

    def call(self, resource: str, fn: Callable[[Any], Any], *, sleep: Callable[[float], Any] = _time.sleep,
             timeout: float = 60.0, poll: float = 0.01) -> Any:
        """Run ``fn(resource_object)`` in the writer thread, in queue order, and return its result.

        The caller (a greenthread: pass ``hub.sleep``) polls for the answer, because a green event
        must not be set from another OS thread. The job's exception is raised here after the
        writer's retries; TimeoutError if no answer within ``timeout``."""
        box: list[tuple[bool, Any]] = []
        self.submit(RECORD, resource, lambda res: box.append((True, fn(res))), lambda exc: box.append((False, exc)))
        deadline = _time.monotonic() + timeout
        while not box:
            if _time.monotonic() >= deadline:
                raise TimeoutError(f"{self.name}: no answer from the database within {timeout}s")
            sleep(poll)
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def flush(self, timeout: float, sleep: Callable[[float], Any] = _time.sleep) -> bool:
        """Wait (with ``sleep``: ``hub.sleep`` on the hub) until everything queued is written."""
        deadline = _time.monotonic() + timeout
        while self.pending():
            if _time.monotonic() >= deadline:
                return False
            sleep(0.02)
        return True

    def close(self, timeout: float = 5.0) -> bool:
        """Stop accepting jobs, write what is queued (at most ``timeout`` s), close the resources."""
        with self._cond:
            if self._closing:
                return not (self._thread and self._thread.is_alive())
            self._closing = True
            self._cond.notify_all()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        done = not self._thread.is_alive()
        if not done:
            LOG.error("%s: %d job(s) not written after %.1f s at shutdown", self.name, self.pending(), timeout)
        return done

    def report(self, level: int, text: str, error_log: bool = True) -> None:
        """Queue a log line for :meth:`pump` (safe from any thread, e.g. inside a job); warnings and errors
        go to the error log unless ``error_log`` is False (what fencing is for, not a fault)."""
        self._messages.append((level, text, error_log))

    # ---- the writer thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closing:
                    self._cond.wait()
                if not self._jobs:  # closing and drained
                    break
                job = self._jobs.popleft()
                self._running = True
            try:
                self._execute(job)
            finally:
                with self._cond:
                    self._running = False
        closers = [(name, getattr(res, "close", None)) for name, res in self._resources.items()]
        if (engine := getattr(self._database, "engine", None)) is not None:
            fencing.detach(engine)
        closers.append(("the database", getattr(self._database, "dispose", None)))
        for name, closer in closers:
            try:
                if closer is not None:
                    closer()
            except Exception as exc:  # noqa: BLE001 (shutting down: report, go on)
                self.report(logging.WARNING, f"{self.name}: closing {name} failed: {exc!r}")

    def _db(self) -> Any:
        if self._database is None and self._connect is not None:
            self._database = self._connect()  # the one engine, migrated once
            engine = getattr(self._database, "engine", None)
            if engine is not None:
                fencing.attach(engine, self.guard)  # every commit on it is checked against the fence
        return self._database

    def _resource(self, name: str) -> Any:
        if name == DATABASE:
            return self._db()
        if name not in self._resources:
            with self._cond:
                factory = self._factories.get(name)
            if factory is None:
                raise KeyError(f"no database resource {name!r} opened")
            self._resources[name] = factory(self._db())
        return self._resources[name]

    def _execute(self, job: Job) -> None:
        attempts = 1 if job.kind in DROPPABLE else 1 + self.retries
        for attempt in range(1, attempts + 1):
            try:
                job.fn(self._resource(job.resource))
                if job.kind != OPEN:
                    self.written += 1
                return
            except fencing.StaleEpoch as exc:  # refused (and rolled back): never retried
                self._refused(job, exc)
                return
            except Exception as exc:  # noqa: BLE001 (a DB error must never end the writer)
                last = exc
                if attempt < attempts and not self._closing:
                    _time.sleep(self.retry_delay)
        self.errors += 1
        self.last_error = f"{job.kind} on {job.resource}: {last!r}"
        self.report(logging.ERROR, f"{self.name}: {self.last_error}\n"
                                    + "".join(traceback.format_exception(last)))
        if job.on_error is not None:
            try:
                job.on_error(last)
            except Exception as exc:  # noqa: BLE001
                self.report(logging.ERROR, f"{self.name}: on_error of {job.kind} failed: {exc!r}")

    def _refused(self, job: Job, exc: fencing.StaleEpoch) -> None:
        """A fenced job refused: a warning once per fence (a deposed leader refuses everything
        after), the counter is the guard's; ``on_error`` so :meth:`call` raises it."""
        fence = self.guard.fence
        if self._refusal_reported != fence:
            self._refusal_reported = fence
            # the fence doing its job (a deposed leader's write), not a fault: the main log, not the error log
            self.report(logging.WARNING, f"{self.name}: {job.kind} on {job.resource} refused: {exc} "
                                         "(further refusals are only counted: refused_writes)", error_log=False)
        if job.on_error is not None:
            try:
                job.on_error(exc)
            except Exception as err:  # noqa: BLE001
                self.report(logging.ERROR, f"{self.name}: on_error of {job.kind} failed: {err!r}")


# ---- the controller's one writer ------------------------------------------------------------------------
_SHARED: DbWriter | None = None
_USERS = 0
_MIGRATED: set[str] = set()  # URLs the start-up check has migrated (migrated())


def migrated(url: str) -> None:
    """``mlte controller``'s start-up check has migrated ``url``: the writer opens it without
    migrating again. (Only the URL is handed over: an engine made before the hub patches threads
    would keep locks eventlet never greened.)"""
    _MIGRATED.add(url)


def _connect(url: str) -> Callable[[], Any]:
    """The writer's ``connect``: opens the controller's one database, migrating it unless done."""

    def connect() -> Any:
        if url in _MIGRATED:
            from app.db.engine import Database

            return Database(url)
        from app.db.migrate import open_migrated

        return open_migrated(url)

    return connect


def pump_service(writer: DbWriter, spawn: Callable[..., Any], sleep: Callable[[float], Any]) -> Scheduler:
    """The writer's reports logged on the hub every ``PUMP_S`` (a :mod:`app.controller.services` row
    whose post runs the pump at once: no os-ken app owns the writer); it ends once the writer closed
    and everything queued is written."""
    from app.controller import guard
    from app.controller.services import Scheduler, Service

    def pump() -> None:
        writer.pump(guard.ERROR_LOG, guard.failures)
        if writer._closing and not writer.pending():
            writer.pump(guard.ERROR_LOG, guard.failures)
            sched.stop()

    sched = Scheduler("db_writer", lambda fn: sched.run("pump", fn), [Service("pump", lambda: pump, PUMP_S)],
                      spawn=spawn, sleep=sleep)
    return sched


def shared() -> DbWriter:
    """The process's writer on ``SETTINGS.db_url`` (started on first use, with a service on the
    hub that logs its reports); pair each call with :func:`release`. Import only inside the
    controller (uses the hub)."""
    global _SHARED, _USERS
    if _SHARED is None or _SHARED._closing:
        from os_ken.lib import hub

        from app.controller.runtime import SETTINGS

        # the migration runs in the writer thread; eventlet's green locks in the logging handlers
        # are not safe across OS threads, so keep alembic's INFO lines out of them
        logging.getLogger("alembic").setLevel(logging.WARNING)
        max_jobs = int(SETTINGS.controller.get("db_queue_max", DEFAULT_MAX_JOBS))
        writer = DbWriter(max_jobs, connect=_connect(SETTINGS.db_url)).start()

        pump_service(writer, hub.spawn, hub.sleep).start()
        _SHARED, _USERS = writer, 0
    _USERS += 1
    return _SHARED


def current() -> DbWriter | None:
    """The shared writer if one is running (for ``GET /health``)."""
    return _SHARED


def release(timeout: float = 5.0) -> None:
    """One user is done; the last one flushes and closes the writer."""
    global _USERS
    if _SHARED is None:
        return
    _USERS -= 1
    if _USERS <= 0:
        _SHARED.close(timeout)
        from app.controller import guard

        _SHARED.pump(guard.ERROR_LOG, guard.failures)
