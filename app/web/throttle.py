"""Failed-login throttling for the UI's password login.

Passwords can be guessed online; API tokens (256 random bits) cannot, so only ``/login`` is
throttled. Failures are counted per user name and per client address in a sliding window: after
``max_failures`` failures for a name (or ``4 * max_failures`` from one address, which may hide
several users behind a NAT) further attempts are refused, without checking the password, until
the oldest counted failure leaves the window. A successful login clears its user name's count,
not its address's. State is in memory: ``mlte web`` is one process (waitress threads), and a
restart forgetting the counts only gives an attacker one more window.
"""
from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

ADDRESS_FACTOR = 4
MAX_TRACKED_KEYS = 10_000  # beyond this many names/addresses the least recently failed are forgotten


class LoginThrottle:
    """Sliding-window failure counts per key (``("user", name)`` or ``("addr", ip)``)."""

    def __init__(self, max_failures: int, window_s: float, clock: Callable[[], float]) -> None:
        if max_failures < 1 or window_s <= 0:
            raise ValueError("max_failures must be >= 1 and window_s > 0")
        self.max_failures = max_failures
        self.window_s = float(window_s)
        self._clock = clock
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _limit(self, key: tuple[str, str]) -> int:
        return self.max_failures * (ADDRESS_FACTOR if key[0] == "addr" else 1)

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, keys: Iterable[tuple[str, str]]) -> float:
        """Seconds until an attempt for all ``keys`` is allowed again; 0 when it is allowed now."""
        now = self._clock()
        wait = 0.0
        with self._lock:
            for key in keys:
                times = self._recent(key, now)
                limit = self._limit(key)
                if len(times) >= limit:
                    # allowed again when enough failures have left the window
                    wait = max(wait, times[len(times) - limit] + self.window_s - now)
        return wait

    def failed(self, keys: Iterable[tuple[str, str]]) -> None:
        now = self._clock()
        with self._lock:
            for key in keys:
                times = self._recent(key, now)
                times.append(now)
                self._failures[key] = times
                self._failures.move_to_end(key)
            while len(self._failures) > MAX_TRACKED_KEYS:
                self._failures.popitem(last=False)

    def succeeded(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._failures.pop(key, None)


def login_keys(username: str, address: str | None) -> list[tuple[str, str]]:
    """The keys a login attempt counts against (names compare case-insensitively)."""
    return [("user", username.strip().lower()), ("addr", address or "?")]
