"""Errors of the OTS driver, in a plain module so plain logic (``circuits``) and tests need no os-ken."""
from __future__ import annotations


class DriverError(Exception):
    """A request the driver cannot even send (unknown OTS, not connected, barrier timeout)."""

    user_error = True

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class BarrierTimeout(DriverError):
    """No BARRIER_REPLY in time: what was sent before the barrier may or may not have been applied.

    ``sent`` lists the XCON directions ``(in_port, out_port)`` whose state is therefore unknown; the
    driver records them as *unknown* so that a roll-back (or ``DELETE /xcon``) removes them too.
    """

    def __init__(self, message: str, sent: list[tuple[int, int]] | None = None) -> None:
        super().__init__(message, 504)
        self.sent = list(sent or [])
