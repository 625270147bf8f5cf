"""One leader among several controllers, elected through a lease-bound key in etcd.

The rule (the one Kubernetes' leader election and Patroni follow, with etcd's leases):

- **campaign**: grant a lease of ``ttl`` seconds, then in one transaction create the election key
  *only if it is absent*, with our name as value, bound to the lease. Whoever creates it leads.
- **epoch**: the key's ``create_revision``. etcd's revision only grows, and a new key is made per
  term, so every new term has a larger epoch than every earlier one (also across etcd restarts on the
  same data). It fences the leader's messages and writes (OpenFlow ``generation_id``, the database).
- **keepalive**: refresh the lease every ``ttl/4``; the key vanishes with the lease when a leader
  stops refreshing it (dies, freezes, loses etcd), and a follower's next campaign takes over.
- **validity without the network**: ``valid_until`` is the monotonic time at which the last
  *confirmed* grant or refresh was *sent*, plus ``ttl``, minus a safety ``margin``. etcd counts the
  lease from when it received that request, so the lease outlives ``valid_until``: once the local
  clock passes it, the leader must stop acting -- no network round trip needed. CLOCK_MONOTONIC keeps
  running while a process is stopped (SIGSTOP), so a frozen leader that wakes up knows at once.

:class:`Election` holds no thread; :func:`run` is the loop (campaign while follower, keepalive while
leader, one callback per transition) with an injectable ``sleep`` so the controller can run it in an
eventlet greenthread.
"""
from __future__ import annotations

import base64
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from app.errors import MlteError

with warnings.catch_warnings():  # etcd3gw imports futurist, which imports eventlet: its notice is no
    warnings.simplefilter("ignore")  # DeprecationWarning subclass, and not ours to act on
    from etcd3gw.client import Etcd3Client
    from etcd3gw.exceptions import Etcd3Exception

log = logging.getLogger(__name__)

DEFAULT_KEY = "/mlte/leader"


class ElectionError(MlteError):
    """etcd could not be reached or answered with an error (one-line message)."""


class _Client(Protocol):
    """What the election needs of an etcd3gw client (tests pass a counting wrapper)."""

    def get_url(self, path: str) -> str: ...

    def post(self, url: str, *args: Any, json: Any = None, **kwargs: Any) -> Any: ...


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str) -> str:
    return base64.b64decode(text).decode(errors="replace")


def _client_for(endpoint: str, timeout: float) -> Etcd3Client:
    url = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if not url.hostname or not url.port:
        raise ElectionError(f"bad etcd endpoint {endpoint!r}: expected http://HOST:PORT")
    return Etcd3Client(host=url.hostname, port=url.port, protocol=url.scheme, timeout=timeout, api_path="/v3/")


class Election:
    """One candidate's view of the election on ``key``; not thread-safe (one loop drives it)."""

    def __init__(self, endpoints: str | Sequence[str], key: str = DEFAULT_KEY, candidate: str = "",
                 ttl: float = 1.0, client: _Client | None = None, margin: float | None = None,
                 timeout: float | None = None) -> None:
        if not candidate:
            raise ElectionError("an election candidate needs a name")
        if ttl <= 0:
            raise ElectionError(f"election ttl must be > 0, not {ttl}")
        self.key = key
        self.candidate = candidate
        self.ttl = float(ttl)
        # etcd leases are whole seconds; our validity stays on the requested (shorter) ttl
        self._lease_ttl = max(1, math.ceil(self.ttl))
        self.margin = self.ttl / 4 if margin is None else float(margin)
        if not 0 <= self.margin < self.ttl:
            raise ElectionError(f"election margin must be in [0, ttl), not {self.margin}")
        timeout = self.ttl / 3 if timeout is None else timeout
        eps = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        if client is None and not eps:
            raise ElectionError("no etcd endpoint given")
        self.endpoints = eps
        self._clients: list[_Client] = [client] if client is not None else [_client_for(e, timeout) for e in eps]
        self._current = 0
        self.epoch: int | None = None
        self.lease_id: int | None = None
        self.valid_until = 0.0
        self.deposed_reason = ""
        self.last_error = ""

    # -- etcd requests -------------------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any]) -> Any:
        """POST to the current endpoint, moving on to the next ones if it cannot be reached."""
        errors = []
        for i in range(len(self._clients)):
            idx = (self._current + i) % len(self._clients)
            client = self._clients[idx]
            try:
                result = client.post(client.get_url(path), json=body)
            except Etcd3Exception as exc:
                detail = " ".join(str(exc).split())[:200]
                errors.append(f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__)
                continue
            self._current = idx
            return result
        where = ", ".join(self.endpoints) or "the given client"
        raise ElectionError(f"etcd at {where} failed ({'; '.join(errors)})")

    def _txn_create(self, lease_id: int) -> dict[str, Any]:
        key = _b64(self.key)
        rng = {"request_range": {"key": key}}
        return dict(self._post("/kv/txn", {
            "compare": [{"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": 0}],
            "success": [{"request_put": {"key": key, "value": _b64(self.candidate), "lease": lease_id}}, rng],
            "failure": [rng]}))

    def _holder(self) -> dict[str, Any] | None:
        kvs = self._post("/kv/range", {"key": _b64(self.key)}).get("kvs") or []
        return dict(kvs[0]) if kvs else None

    def _revoke(self, lease_id: int) -> None:
        try:
            self._post("/kv/lease/revoke", {"ID": lease_id})
        except ElectionError as exc:
            if "Not Found" not in str(exc):  # already expired: nothing to release
                raise

    # -- the election --------------------------------------------------------------------------
    def campaign(self) -> int | None:
        """Try to become leader: the new epoch, or None if someone else leads. Raises ElectionError."""
        if self.is_leader():
            return self.epoch
        self._depose("", revoke=True)  # a term whose validity passed is over: never resume it
        if self._holder() is not None:  # a follower's usual case: one request, no lease
            return None
        sent = time.monotonic()
        grant = self._post("/lease/grant", {"TTL": self._lease_ttl, "ID": 0})
        lease_id = int(grant["ID"])
        try:
            result = self._txn_create(lease_id)
        except ElectionError:
            self._revoke_quietly(lease_id)
            raise
        if not result.get("succeeded"):
            self._revoke_quietly(lease_id)
            return None
        kv = result["responses"][1]["response_range"]["kvs"][0]
        self.lease_id, self.epoch = lease_id, int(kv["create_revision"])
        self._confirm(sent, int(grant.get("TTL", self._lease_ttl)))
        self.deposed_reason = ""
        return self.epoch

    def keepalive(self) -> bool:
        """Refresh the lease: True while we still lead, False once lost (reason in ``deposed_reason``).

        Checks the local validity first, so a leader that was frozen past ``valid_until`` is deposed
        without a round trip (and revokes its lease, so a new term with a new epoch starts at once).
        If etcd cannot be reached, leadership lasts until ``valid_until`` (``last_error`` says why).
        """
        if self.epoch is None or self.lease_id is None:
            return False
        if not self.is_leader():
            cause = f"; etcd unreachable: {self.last_error}" if self.last_error else ""
            self._depose(f"no confirmed keepalive for {self.ttl - self.margin:g}s (lease validity passed{cause})",
                         revoke=True)
            return False
        sent = time.monotonic()
        try:
            refresh = self._post("/lease/keepalive", {"ID": self.lease_id})
            ttl = int(refresh.get("result", {}).get("TTL", -1))
            holder = self._holder() if ttl > 0 else None
        except ElectionError as exc:
            self.last_error = str(exc)
            if self.is_leader():
                return True
            self._depose(f"etcd unreachable until the lease validity passed ({exc})", revoke=False)
            return False
        self.last_error = ""
        if ttl <= 0:
            self._depose("lease expired in etcd", revoke=False)
            return False
        if holder is None or int(holder["create_revision"]) != self.epoch:
            taken = "" if holder is None else f" (now {_unb64(holder.get('value', ''))}, " \
                                               f"epoch {holder['create_revision']})"
            self._depose(f"election key no longer ours{taken}", revoke=True)
            return False
        self._confirm(sent, ttl)
        if not self.is_leader():  # frozen or slow while the request was out: the term is over
            self._depose("the keepalive came back after the lease validity passed", revoke=True)
            return False
        return True

    def resign(self) -> bool:
        """Give up leadership now (revoke the lease, so the key goes at once). True if etcd confirmed."""
        lease_id = self.lease_id
        self._depose("resigned", revoke=False)
        if lease_id is None:
            return False
        try:
            self._revoke(lease_id)
        except ElectionError as exc:
            self.last_error = str(exc)
            return False
        return True

    def leader(self) -> tuple[str, int] | None:
        """Who leads according to etcd: (name, epoch), or None. Raises ElectionError."""
        holder = self._holder()
        if holder is None:
            return None
        return _unb64(holder.get("value", "")), int(holder["create_revision"])

    def is_leader(self, now: float | None = None) -> bool:
        """May we act as leader now? Local only: False once monotonic time passed ``valid_until``."""
        if self.epoch is None:
            return False
        return (time.monotonic() if now is None else now) < self.valid_until

    # -- state ---------------------------------------------------------------------------------
    def _confirm(self, sent: float, granted_ttl: int) -> None:
        # etcd may grant longer than asked (its minimum TTL); our validity keeps the shorter one
        self.valid_until = sent + min(self.ttl, float(granted_ttl)) - self.margin

    def _forget(self, reason: str) -> None:
        self.epoch, self.lease_id, self.valid_until = None, None, 0.0
        self.deposed_reason = reason

    def _depose(self, reason: str, revoke: bool) -> None:
        lease_id = self.lease_id
        self._forget(reason)
        if revoke and lease_id is not None:
            self._revoke_quietly(lease_id)

    def _revoke_quietly(self, lease_id: int) -> None:
        """Best effort: if etcd cannot be reached the lease simply expires after its ttl."""
        try:
            self._revoke(lease_id)
        except ElectionError as exc:
            self.last_error = str(exc)


def _stopper(stop: Any) -> Callable[[], bool]:
    if stop is None:
        return lambda: False
    if hasattr(stop, "is_set"):
        return lambda: bool(stop.is_set())
    if callable(stop):
        return lambda: bool(stop())
    raise TypeError(f"stop must be an Event-like object or a callable, not {type(stop).__name__}")


def run(election: Election, on_elected: Callable[[int], object], on_deposed: Callable[[str], object],
        sleep: Callable[[float], object] = time.sleep, stop: Any = None,
        interval: float | None = None) -> None:
    """Campaign while follower, keep alive while leader, until ``stop`` (an Event or a callable) says so.

    ``on_elected(epoch)`` and ``on_deposed(reason)`` are called exactly once per transition, from this
    loop; leaving the loop while leading resigns and calls ``on_deposed("stopped")``. An etcd that
    cannot be reached is logged once per state (follower / leader), not once per round.
    """
    interval = election.ttl / 4 if interval is None else interval
    stopped = _stopper(stop)
    leading = False
    complained = ""  # the state in which an etcd error was last logged
    try:
        while not stopped():
            if not leading:
                try:
                    epoch = election.campaign()
                except ElectionError as exc:
                    epoch = None
                    if complained != "follower":
                        log.warning("election %s: %s; retrying every %gs", election.candidate, exc, interval)
                        complained = "follower"
                else:
                    if complained == "follower":
                        log.info("election %s: etcd answers again", election.candidate)
                        complained = ""
                if epoch is not None:
                    leading, complained = True, ""
                    log.info("election %s: leader, epoch %d", election.candidate, epoch)
                    on_elected(epoch)
            else:
                alive = election.keepalive()
                if election.last_error and complained != "leader":
                    log.warning("election %s: keepalive failed (%s); leadership valid for %.2fs more",
                                election.candidate, election.last_error,
                                max(0.0, election.valid_until - time.monotonic()))
                    complained = "leader"
                elif not election.last_error and complained == "leader":
                    log.info("election %s: keepalive confirmed again", election.candidate)
                    complained = ""
                if not alive:
                    leading, complained = False, ""
                    log.warning("election %s: deposed: %s", election.candidate, election.deposed_reason)
                    on_deposed(election.deposed_reason)
            sleep(interval)
    finally:
        if leading:
            election.resign()
            on_deposed("stopped")
