"""The reservation life cycle: one transition table, checked in one function.

HELD (expires after ``[web] hold_seconds``) → RESERVED (committed) → PROVISIONING (start time
reached: waiting for the controller to light it) → ACTIVE (the controller installed its XCONs and
packet rules) → FINISHED (end time reached); CANCELLED by the owner/admin or an expired hold; FAILED
when the network cannot provide it (the reason is in ``state_reason``). A failure that breaks a lit
reservation's path moves it ACTIVE → RESTORING while the controller re-lights it on a new path
(→ ACTIVE), or → DEGRADED when no path is left (it holds its booking and is retried with back-off
until its end; docs/failures.md). Time moves a reservation into
PROVISIONING and FINISHED; only the controller moves PROVISIONING to ACTIVE or FAILED, and ACTIVE through RESTORING / DEGRADED
(:class:`app.db.provisioning.ProvisioningStore`). Anything else is refused with the reason (the API
answers 409). The table lives in ``app/db`` because the web service and the controller's store both
apply it.
"""
from __future__ import annotations

HELD = "HELD"
RESERVED = "RESERVED"
PROVISIONING = "PROVISIONING"
ACTIVE = "ACTIVE"
FINISHED = "FINISHED"
CANCELLED = "CANCELLED"
FAILED = "FAILED"
RESTORING = "RESTORING"
DEGRADED = "DEGRADED"

STATES = (HELD, RESERVED, PROVISIONING, ACTIVE, RESTORING, DEGRADED, FINISHED, CANCELLED, FAILED)
#: States that hold capacity: admission control counts them.
BOOKING_STATES = (HELD, RESERVED, PROVISIONING, ACTIVE, RESTORING, DEGRADED)
#: States that can still be modified (bandwidth / end time); not while a failure is being repaired.
MODIFIABLE_STATES = (HELD, RESERVED, PROVISIONING, ACTIVE)
#: States whose path is fixed: a modify is re-checked on exactly the recorded path, never re-routed
#: (OSCARS keeps the path of a committed reservation; a HELD one is still a draft and may move).
PINNED_PATH_STATES = (RESERVED, PROVISIONING, ACTIVE, RESTORING, DEGRADED)
#: States a user may cancel from.
CANCELLABLE_STATES = (HELD, RESERVED, PROVISIONING, ACTIVE, RESTORING, DEGRADED)
#: States of a reservation the controller has (or had) lit and still follows: a failure or a repair
#: concerns them.
LIT_STATES = (ACTIVE, RESTORING, DEGRADED)
#: Final states: whatever the controller installed for such a reservation must be removed.
FINAL_STATES = (FINISHED, CANCELLED, FAILED)

#: state -> {allowed next state: what causes it}
TRANSITIONS: dict[str, dict[str, str]] = {
    HELD: {RESERVED: "commit", CANCELLED: "cancel or hold expired", FAILED: "network failure"},
    RESERVED: {PROVISIONING: "start time reached", CANCELLED: "cancel", FAILED: "network failure",
               FINISHED: "end time reached"},
    PROVISIONING: {ACTIVE: "the controller lit it", FAILED: "the controller could not light it",
                   CANCELLED: "cancel", FINISHED: "end time reached"},
    ACTIVE: {FINISHED: "end time reached", CANCELLED: "cancel", FAILED: "network failure",
             RESTORING: "a failure broke its path"},
    RESTORING: {ACTIVE: "restored on a new path", DEGRADED: "no path left; retried while the failure lasts",
                FINISHED: "end time reached", CANCELLED: "cancel", FAILED: "the controller gave up"},
    DEGRADED: {RESTORING: "retry", ACTIVE: "restored on a new path", FINISHED: "end time reached",
               CANCELLED: "cancel", FAILED: "the controller gave up"},
    FINISHED: {},
    CANCELLED: {},
    FAILED: {},
}


class IllegalTransition(Exception):
    """``current → target`` is not in :data:`TRANSITIONS`; the message says why."""

    user_error = True

    def __init__(self, current: str, target: str) -> None:
        allowed = ", ".join(TRANSITIONS.get(current, {})) or "none (final state)"
        super().__init__(f"cannot go from {current} to {target}; allowed from {current}: {allowed}")
        self.current = current
        self.target = target


def check_transition(current: str, target: str) -> str:
    """Return ``target`` if ``current → target`` is allowed, else raise :class:`IllegalTransition`."""
    if current not in TRANSITIONS or target not in STATES or target not in TRANSITIONS[current]:
        raise IllegalTransition(current, target)
    return target
